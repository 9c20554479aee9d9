// A simulated GPU that reads like a real one (issue 29): its energy counter, instant power and
// average power come out of a model of the GPU's sensor (SensorParameters, zeus/device/sensor.hpp)
// applied to the exact draw of a SimulatedGpu, which stays the truth (exact_energy_j()).
//
// The sensor, with window W and period P of part-time sampling, refresh period R, resolution q,
// averaging window A and reading delay d (a reading taken at t shows the sensor at t - d):
// - sample k covers [kP + phase, kP + phase + W); its value is the mean draw over that window;
// - the counter accrues each sample's value x P when the sample's window closes (so it
//   extrapolates the sampled quarter to the whole period, as Yang et al. found on A100/H100),
//   or, with counter_integrates_continuously (a real H200), the exact energy; it is shown as it
//   stood at the last refresh (kR + phase), rounded down to a multiple of q;
// - instant_power_mw() is the last closed sample's value;
// - average_power_mw() is the mean of the samples closed in the last A (the last sample when
//   A is 0 or shorter than P).
// Without part-time sampling (W = P = 0) the counter accrues the exact energy, the instant power
// is the draw, and the average power is the exact mean draw over the last A.
// One SensorGpu per SimulatedGpu: the sensor tells the truth how much history to keep
// (SimulatedGpu::retain_history_from_ns), and a second sensor would move that on under the first.
// Every computation is an exact integral of the truth's piecewise-constant draw, so a test on a
// ManualClock pins each effect to the millijoule. Opt in with ZEUS_SIMULATED_GPUS="2:h200:sensor"
// (parse_simulated_gpus_spec) or by constructing one over a SimulatedGpu.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "zeus/device/forwarding_gpu.hpp"
#include "zeus/device/sensor.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::device {

class SensorGpu final : public ForwardingGpu {
 public:
  // Throws Error(kInvalidArgument) for parameters that are negative or not finite, a window
  // longer than its period, only one of window and period set, or a resolution <= 0.
  // `phase_ns`: where on the clock the sampling periods and counter refreshes start (modulo P
  // and R).
  SensorGpu(std::shared_ptr<SimulatedGpu> truth, SensorParameters parameters,
            std::int64_t phase_ns = 0);
  // With published_sensor_parameters(truth->name()); Error(kInvalidArgument) when it has none.
  explicit SensorGpu(std::shared_ptr<SimulatedGpu> truth);

  SimulatedGpu& truth() { return *truth_; }
  const SensorParameters& parameters() const { return parameters_; }

  std::uint32_t instant_power_mw() override;
  std::uint32_t average_power_mw() override;
  std::uint64_t total_energy_mj() override;

 private:
  // What the sensor shows at `reading_ns` (the delay applied, and no earlier than its start).
  std::int64_t sensor_time_ns(std::int64_t reading_ns) const;
  bool part_time() const { return period_ns_ > 0; }
  // Whether the counter accrues the sampled windows (else the exact energy).
  bool counter_sampled() const {
    return part_time() && !parameters_.counter_integrates_continuously;
  }
  std::int64_t window_start_ns(std::int64_t k) const { return k * period_ns_ + phase_ns_; }
  std::int64_t window_end_ns(std::int64_t k) const { return window_start_ns(k) + window_ns_; }
  // The last sample closed at or before `t_ns`.
  std::int64_t last_sample_at(std::int64_t t_ns) const;
  double sample_mw(std::int64_t k) const;
  // Accrues the samples closed by `t_ns` into accrued_mj_; must hold mutex_.
  void accrue_until_locked(std::int64_t t_ns);
  void retain_locked(std::int64_t sensor_ns);

  std::shared_ptr<SimulatedGpu> truth_;
  SensorParameters parameters_;
  std::int64_t phase_ns_;
  std::int64_t start_ns_;  // when the sensor started (the truth is known from here on)
  std::int64_t window_ns_;
  std::int64_t period_ns_;
  std::int64_t refresh_ns_;
  std::int64_t average_ns_;
  std::int64_t delay_ns_;

  std::mutex mutex_;
  // The counter's energy from the samples up to next_sample_ (long double: days of samples add
  // up without losing a millijoule).
  long double accrued_mj_ = 0.0L;
  std::int64_t next_sample_ = 0;
  std::int64_t first_sample_ = 0;  // the first window that starts after start_ns_
};

}  // namespace zeus::device
