// How accurate are the figures, against the truth? (issue 29) The study behind docs/monitor.md's
// "Accuracy" table: a sensor-faithful simulated GPU (zeus/device/sensor_gpu.hpp) with its
// published sensor parameters runs loads that change faster than its sensor's windows, and each
// way of measuring is compared with SimulatedGpu::exact_energy_j(). Everything runs on a
// ManualClock: deterministic, and a whole study takes well under a second.
//
// Each figure is the worst |relative error| over `placements` placements of the measurement
// against the sensor: placement k shifts the sensor's sampling phase by k/placements of its
// sampling period, starts the windows k x 3.7 ms later and makes them k x 13 ms longer (so the
// windows' edges fall anywhere between counter refreshes; the profiler's measurement duration
// grows by k x 13 ms for the same reason).
#pragma once

#include <string>
#include <vector>

namespace zeus::monitor {

struct AccuracyOptions {
  std::string model_key = "h100";  // a simulated model with published sensor parameters
  int placements = 8;
};

struct AccuracyRow {
  std::string load;  // e.g. "square 10 ms"
  // A naive poller: reads the power every 100 ms for 10 s and integrates (reading x 100 ms).
  double poll_instant = 0.0;  // instant_power_mw()
  double poll_average = 0.0;  // average_power_mw()
  // ZeusMonitor windows (the energy counter) of about 1 s, 10 s and 60 s.
  double window_1s = 0.0;
  double window_10s = 0.0;
  double window_60s = 0.0;
  // Energy per iteration from zeus::monitor::measure (one iteration = one period of the load,
  // 10 s of iterations after 1 s of cooldown): one run, and 4 phase-shifted runs
  // (PhaseShifts). NaN where the load has no iterations shorter than 100 ms.
  double profile = 0.0;
  double profile_shifted = 0.0;
};

// One row per load: square waves of 50 % duty (full load, then idle) with periods of 10, 20, 50,
// 100, 200 and 500 ms, and bursts of 20-60 ms at irregular gaps of 50-250 ms. Throws
// Error(kInvalidArgument) for a model without sensor parameters or placements outside [1, 64].
std::vector<AccuracyRow> accuracy_study(const AccuracyOptions& options = {});

// The rows as a Markdown table, errors in percent.
std::string accuracy_table_markdown(const std::vector<AccuracyRow>& rows);

}  // namespace zeus::monitor
