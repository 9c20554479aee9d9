// A simulated GPU's utilization as a function of time on its clock (issue 29): two levels, `high`
// while the load is on and `low` otherwise, switching as fast as the load likes (faster than any
// sensor window). Piecewise constant, so the energy over any span is an exact sum of the time at
// each level; the sensor-faithful GPU (sensor_gpu.hpp) computes what a real sensor would read
// from those exact integrals.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace zeus::device {

class LoadProfile {
 public:
  // One span of the high level: [start_ns, start_ns + length_ns) on the GPU's clock.
  struct Burst {
    std::int64_t start_ns = 0;
    std::int64_t length_ns = 0;
  };

  // `utilization` all the time (what SimulatedGpu::set_utilization sets).
  static LoadProfile constant(double utilization);
  // `high` during the first duty x period of every period, `low` for the rest; periods start at
  // start_ns + k x period for every integer k. Throws Error(kInvalidArgument) unless
  // period_s >= 1 ns and 0 <= duty <= 1.
  static LoadProfile square_wave(double period_s, double duty, double high = 1.0, double low = 0.0,
                                 std::int64_t start_ns = 0);
  // `high` during each burst, `low` otherwise (overlapping bursts merge). Throws
  // Error(kInvalidArgument) for a negative length or an end past the clock's range.
  static LoadProfile bursts(std::vector<Burst> bursts, double high = 1.0, double low = 0.0);

  // Levels, clamped to [0, 1] (NaN is 0).
  double high() const { return high_; }
  double low() const { return low_; }
  double utilization_at(std::int64_t t_ns) const;
  // Nanoseconds at the high level in [from_ns, to_ns) (0 when to_ns <= from_ns).
  std::int64_t high_ns(std::int64_t from_ns, std::int64_t to_ns) const;
  // The first time after t_ns at which the level may change; INT64_MAX when it never does.
  std::int64_t next_change_ns(std::int64_t t_ns) const;

 private:
  enum class Shape { kConstant, kSquare, kBursts };
  // Nanoseconds at the high level in [origin, t_ns) of a square wave (negative before origin).
  std::int64_t square_high_before(std::int64_t t_ns) const;

  Shape shape_ = Shape::kConstant;
  double high_ = 0.0;
  double low_ = 0.0;
  std::int64_t period_ns_ = 0;
  std::int64_t on_ns_ = 0;
  std::int64_t origin_ns_ = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;  // sorted, disjoint [start, end)
};

}  // namespace zeus::device
