// Injected time. Every component that reads a clock or waits takes a Clock: the steady clock in
// production, a ManualClock in tests and simulations. A Clock carries both reading the time and
// sleeping, so that a ManualClock's sleep is an instant advance and a test of retries, backoff or
// polling runs in no wall time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "zeus/common/units.hpp"

namespace zeus {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary, fixed epoch. Never decreases.
  virtual std::int64_t now_ns() const = 0;
  double now_s() const { return static_cast<double>(now_ns()) * 1e-9; }
  // Blocks for `duration_ns` (at least; a negative duration is zero). Thread-safe.
  virtual void sleep_for_ns(std::int64_t duration_ns) const = 0;
  void sleep_for_s(double duration_s) const {
    sleep_for_ns(units::nanoseconds_from_seconds(duration_s));
  }
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  std::int64_t now_ns() const override;
  void sleep_for_ns(std::int64_t duration_ns) const override;
};

// Unix time (std::chrono::system_clock, whose epoch is the Unix epoch since C++20): what records
// are stamped with. Unlike the steady clock it steps when the system time is set, so measure
// durations with the steady clock; its sleep is the steady clock's.
class SystemClock final : public Clock {
 public:
  std::int64_t now_ns() const override;
  void sleep_for_ns(std::int64_t duration_ns) const override;
};

// A clock that moves only when told to, or when something sleeps on it: sleep_for_ns advances it
// by the duration and returns at once. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ns = 0) : now_ns_(start_ns) {}
  std::int64_t now_ns() const override { return now_ns_.load(std::memory_order_acquire); }
  void sleep_for_ns(std::int64_t duration_ns) const override;
  // Throws Error(kInvalidArgument) for a negative delta: the clock never goes backwards.
  void advance_ns(std::int64_t delta_ns);
  void advance_s(double delta_s) { advance_ns(units::nanoseconds_from_seconds(delta_s)); }
  // The total time slept on this clock, and how many sleeps (for tests of backoff).
  std::int64_t slept_ns() const { return slept_ns_.load(std::memory_order_acquire); }
  std::int64_t sleeps() const { return sleeps_.load(std::memory_order_acquire); }

 private:
  mutable std::atomic<std::int64_t> now_ns_;
  mutable std::atomic<std::int64_t> slept_ns_{0};
  mutable std::atomic<std::int64_t> sleeps_{0};
};

// The process-wide steady clock.
std::shared_ptr<Clock> steady_clock();

// The process-wide Unix-time clock.
std::shared_ptr<Clock> system_clock();

// This machine's UTC offset (hours east of UTC, daylight saving time included) at Unix time
// `unix_s`, from the TZ setting; 0 when the local time cannot be worked out. What a schedule in
// "local time" means when nothing says which zone it is in.
double local_utc_offset_hours(double unix_s);
// The same, now.
double local_utc_offset_hours();

}  // namespace zeus
