// Injected time. Every component that reads a clock takes a Clock: the steady clock in
// production, a ManualClock in tests and simulations.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace zeus {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary, fixed epoch. Never decreases.
  virtual std::int64_t now_ns() const = 0;
  double now_s() const { return static_cast<double>(now_ns()) * 1e-9; }
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  std::int64_t now_ns() const override;
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ns = 0) : now_ns_(start_ns) {}
  std::int64_t now_ns() const override { return now_ns_.load(std::memory_order_acquire); }
  void advance_ns(std::int64_t delta_ns);
  void advance_s(double delta_s) { advance_ns(static_cast<std::int64_t>(delta_s * 1e9)); }

 private:
  std::atomic<std::int64_t> now_ns_;
};

// The process-wide steady clock.
std::shared_ptr<Clock> steady_clock();

}  // namespace zeus
