// How a GPU's energy and power readings relate to the power it really draws (issue 29).
//
// A real GPU is not an ideal meter. Its energy counter advances in steps, once per refresh
// period, in units of its resolution; its power is sampled part of the time (a window of each
// period) and extrapolated; its "power usage" reading may be an average over a window; every
// reading may lag the draw. SensorParameters names these for one GPU model, the sensor-faithful
// simulated GPU models them, measurement error bounds are derived from them, and
// probe_energy_counter() (device/sensor_probe.cpp) measures the refresh period on any Gpu.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zeus::device {

struct SensorParameters {
  // Period between changes of the energy counter (total_energy_mj); 0: every read is current.
  double counter_refresh_s = 0.0;
  // Smallest step of the counter, in millijoules (NVML counts millijoules).
  double counter_resolution_mj = 1.0;
  // Part-time power sampling: the sensor sees `power_sample_window_s` of every
  // `power_sample_period_s` and the power readings extrapolate that window to the whole period.
  // Both 0: power is seen all the time.
  double power_sample_window_s = 0.0;
  double power_sample_period_s = 0.0;
  // Whether the energy counter integrates the draw all the time even where the power readings
  // are sampled part-time (a real H200 showed this: zeus sensor-probe saw every 20 ms burst in
  // its counter and only 42 of 100 in its instant power), rather than accruing the sampled
  // windows extrapolated (Yang et al.'s account of the A100 and H100).
  bool counter_integrates_continuously = false;
  // Averaging window of the average-power reading (average_power_mw); 0: the latest sample.
  double average_power_window_s = 0.0;
  // How long after the draw changes a reading starts to show it.
  double reading_delay_s = 0.0;
  // Where the figures come from (a publication or a measurement), saying which are estimates.
  std::string source;
};

// The parameters published or measured for the GPU model named `gpu_name` (as Gpu::name()
// returns it, e.g. "NVIDIA H100 80GB HBM3"); nullopt for a model nobody has characterised.
std::optional<SensorParameters> published_sensor_parameters(std::string_view gpu_name);

}  // namespace zeus::device
