#include "zeus/common/clock.hpp"

#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

#include "zeus/common/error.hpp"

namespace zeus {

std::int64_t SteadyClock::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SteadyClock::sleep_for_ns(std::int64_t duration_ns) const {
  if (duration_ns > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(duration_ns));
  }
}

std::int64_t SystemClock::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemClock::sleep_for_ns(std::int64_t duration_ns) const {
  steady_clock()->sleep_for_ns(duration_ns);
}

void ManualClock::sleep_for_ns(std::int64_t duration_ns) const {
  const std::int64_t step = duration_ns > 0 ? duration_ns : 0;
  sleeps_.fetch_add(1, std::memory_order_acq_rel);
  slept_ns_.fetch_add(step, std::memory_order_acq_rel);
  now_ns_.fetch_add(step, std::memory_order_acq_rel);
}

void ManualClock::advance_ns(std::int64_t delta_ns) {
  if (delta_ns < 0) {
    throw Error(ErrorKind::kInvalidArgument, "ManualClock cannot go backwards");
  }
  now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
}

std::shared_ptr<Clock> steady_clock() {
  static const auto clock = std::make_shared<SteadyClock>();
  return clock;
}

std::shared_ptr<Clock> system_clock() {
  static const auto clock = std::make_shared<SystemClock>();
  return clock;
}

double local_utc_offset_hours(double unix_s) {
  if (!std::isfinite(unix_s) || std::fabs(unix_s) > 1e15) {  // beyond time_t's years
    return 0.0;
  }
  const auto seconds = static_cast<std::time_t>(std::floor(unix_s));
  std::tm local{};
  if (localtime_r(&seconds, &local) == nullptr) {
    return 0.0;
  }
  return static_cast<double>(local.tm_gmtoff) / 3600.0;
}

double local_utc_offset_hours() {
  return local_utc_offset_hours(static_cast<double>(std::time(nullptr)));
}

}  // namespace zeus
