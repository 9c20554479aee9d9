#include "zeus/common/clock.hpp"

#include <chrono>
#include <stdexcept>

namespace zeus {

std::int64_t SteadyClock::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ManualClock::advance_ns(std::int64_t delta_ns) {
  if (delta_ns < 0) {
    throw std::invalid_argument("ManualClock cannot go backwards");
  }
  now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel);
}

std::shared_ptr<Clock> steady_clock() {
  static const auto clock = std::make_shared<SteadyClock>();
  return clock;
}

}  // namespace zeus
