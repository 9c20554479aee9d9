// How far a GPU's window energy can be from the energy it drew (issue 29), and a check of a GPU's
// energy counter against its power reading. docs/monitor.md, "Error bounds", derives the figures.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/sensor.hpp"
#include "zeus/monitor/measurement.hpp"

namespace zeus::monitor {

// The sensor assumed for a GPU model nobody has characterised: a counter that refreshes every
// 100 ms (the upper end of the 20-100 ms observed; Yang, Adamek and Armour, SC'24), in NVML's
// 1 mJ steps, with no reading delay beyond that.
device::SensorParameters conservative_sensor_parameters();

// The sensor assumed for a GPU when nothing better is known: a sensor-faithful simulated GPU's
// model (device::SensorGpu), the ideal sensor of a plain simulated GPU (every read current, whole
// millijoules), the published or measured parameters of a real GPU's model
// (device::published_sensor_parameters), else conservative_sensor_parameters().
// ZeusMonitorOptions::sensor_parameters comes first.
device::SensorParameters default_sensor_parameters(device::Gpu& gpu);

// The draw assumed for a GPU whose power limits cannot be read (above any GPU's limit today).
inline constexpr double kUnknownPeakPowerW = 1500.0;

// The most a GPU can draw, as far as a bound needs: its highest settable power limit, else its
// enforced limit, else kUnknownPeakPowerW. Never throws.
double peak_power_w(device::Gpu& gpu);

// A counter window: each end's reading lags the draw by between reading_delay_s and
// reading_delay_s + counter_refresh_s, so the window misses up to that much energy at its end
// and counts up to that much from before its start; the two have opposite signs, so together
// they err by at most (refresh + delay) x peak draw. Each reading is floored to the resolution:
// the difference errs by less than one step. |error| <= (refresh + delay) x peak + resolution.
GpuErrorBound counter_error_bound(const device::SensorParameters& sensor, double peak_power_w);

// Polled power (a GPU without a counter): polling sees instants, and between two samples the
// draw may be anything from 0 to the peak, so nothing tighter than peak x window holds for every
// load (a steady load errs far less). |error| <= peak x window.
GpuErrorBound polled_error_bound(double peak_power_w);

// A window shorter than this many counter periods (refresh + delay) is warned about once per
// monitor: its bound is then over a fifth of what the GPU draws at peak over the window.
inline constexpr double kShortWindowRefreshPeriods = 5.0;

// ---- Counter against power ----------------------------------------------------------------

// Counter and power disagree when they differ by more than this fraction of the larger.
inline constexpr double kCrossCheckTolerance = 0.10;

struct CrossCheckOptions {
  double duration_s = 1.0;       // how long both are watched
  double poll_period_s = 0.010;  // how often the power is read meanwhile
};

struct CounterPowerCheck {
  enum class Trust { kCounter, kPower };
  int gpu_index = 0;
  double duration_s = 0.0;
  double counter_energy_j = 0.0;  // the counter's difference over the check
  double power_energy_j = 0.0;    // the polled instant power integrated over the same time
  int power_samples = 0;
  double difference = 0.0;  // |counter - power| / the larger (0 when both are 0)
  bool disagrees = false;   // difference > kCrossCheckTolerance
  Trust trust = Trust::kCounter;
  std::string reason;  // why `trust`, in a sentence
};

// "counter" or "power".
const char* trust_name(CounterPowerCheck::Trust trust);

// One GPU to check: its index, the GPU, its counter's error bound and its peak draw.
struct CrossCheckedGpu {
  int index = 0;
  std::shared_ptr<device::Gpu> gpu;
  GpuErrorBound bound;
  double peak_power_w = 0.0;
};

// Reads each GPU's energy counter, polls its instant power every poll_period_s for duration_s
// (sleeping on `clock`), reads the counters again and compares the two energies. Device errors
// propagate.
std::vector<CounterPowerCheck> cross_check_counter_and_power(
    const std::vector<CrossCheckedGpu>& gpus, const Clock& clock, const CrossCheckOptions& options);

}  // namespace zeus::monitor
