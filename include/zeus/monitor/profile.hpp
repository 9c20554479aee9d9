// Thermally stable profiling (the reference's zeus.profile): how long to measure a workload, and
// how long to let the GPU cool before each measurement, so that energy per iteration is
// reproducible instead of following the GPU's temperature.
//
// A trial, as the reference's: sleep the cooldown (the GPU idles) -> read the mean GPU
// temperature -> warm-up iterations -> a window "__zeus_profile_run_trial" over
// max(1, ceil(measurement / iteration time)) iterations (the reference's count: the window lasts
// at least the measurement duration) -> read the temperature again. In a distributed job every
// process runs the same trials and their figures are combined as the reference's all_reduce
// combines them (ProfileRanks).
// A sweep first runs `num_warmup_trials` throw-away trials (no cooldown, no warm-up iterations,
// at the largest measurement duration) to bring the GPU to its working temperature, then
// `num_trials` trials per candidate duration, ascending. A candidate is valid when the sample
// standard deviation of energy per iteration over its trials is below `trial_stddev_threshold`:
// relative to their mean by default (one threshold fits any workload size), or in joules with
// `relative_threshold = false` (the reference's rule; zeus_cpp.profile uses it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::monitor {

// How a trial's figures combine across the processes of a distributed job (the reference's
// all_reduce): energy summed, time the maximum, temperatures averaged; the calibrated iteration
// time is the maximum too, so that every process runs as many iterations. Every process must run
// the same calls in the same order (each figure is one collective). Unset: one process.
struct ProfileRanks {
  std::function<double(double)> sum{};  // over every process
  std::function<double(double)> max{};
  int world_size = 1;
};

// What is profiled. `iteration` runs one iteration of the workload (and returns when the work is
// done, or the monitor's sync hook makes it so). `gpus` (or `temperature_c`) is used only to read
// temperatures of the monitor's GPUs; without either, temperatures are NaN. `clock` times the
// sweeps and sleeps the cooldowns (the steady clock when null; a ManualClock in tests makes them
// instant).
struct ProfileTarget {
  std::function<void()> iteration{};
  WindowMonitor* monitor = nullptr;
  const device::Gpus* gpus = nullptr;
  std::shared_ptr<Clock> clock{};
  // Reads the temperature of one of the monitor's GPUs (degrees C); used instead of `gpus` when
  // set (e.g. a Python monitor's gpus.get_gpu_temperature).
  std::function<double(int gpu_index)> temperature_c{};
  ProfileRanks ranks{};
};

struct TrialResult {
  double measurement_duration_s = 0.0;  // asked for
  double cooldown_duration_s = 0.0;
  std::int64_t iterations = 0;  // each process's
  double energy_j = 0.0;        // GPU energy of the window (summed over the processes)
  double time_s = 0.0;          // window time (the longest process's)
  double energy_per_iteration_j = 0.0;
  double time_per_iteration_s = 0.0;
  // Mean over the monitor's GPUs (and the mean of the processes' means), before the window.
  double temperature_before_c = 0.0;
  double temperature_after_c = 0.0;
};

// Phase-shifted repetition, as Yang, Adamek and Armour advise (SC'24, "Accurate and Convenient
// Energy Measurements for GPUs"): a GPU that samples its power only part of the time (25 ms of
// every 100 ms on A100 and H100, and its energy counter extrapolates those samples) sees the same
// part of every iteration when the iterations repeat in step with its sampling, and misreads
// them by up to the whole difference between busy and idle power. With `count` > 1 a trial runs
// as `count` runs of (its iterations / count) iterations, each after its own warm-up
// iterations, each started `1 / count` of a `sampling_period_s` later in the sampling period
// than the one before (the wait between runs, under one period, is outside every window), so
// that together the sensor's windows cover every part of the iteration. The trial reports the
// runs' summed energy, time and iterations. count = period / window (4 on A100/H100) covers
// the iteration exactly once. 1 (the default): one run, as the reference measures.
struct PhaseShifts {
  int count = 1;
  double sampling_period_s = 0.1;  // the sensor's (zeus/device/sensor.hpp)
};

struct MeasureOptions {
  double measurement_duration_s = 10.0;
  double cooldown_duration_s = 10.0;
  int num_warmup_iterations = 10;
  // Time of one iteration; when unset, measured over num_calibration_iterations first.
  std::optional<double> iteration_duration_s{};
  int num_calibration_iterations = 100;
  PhaseShifts phase_shifts{};
};

// Called after each trial of a sweep: the candidate (NaN for the warm-up trials), the trial's
// index among that candidate's trials (or the warm-up trials), their number, and its result.
// For progress bars.
using TrialObserver =
    std::function<void(double candidate_s, int trial, int trials, const TrialResult&)>;

struct SweepOptions {
  // Candidate durations in seconds, tried in ascending order. Empty: 1, 2, ..., 10.
  std::vector<double> search_range_s{};
  // The other duration, held fixed during the sweep: the cooldown when sweeping the measurement
  // duration, the measurement duration when sweeping the cooldown.
  double fixed_duration_s = 10.0;
  int num_trials = 10;
  int num_warmup_trials = 2;
  double trial_stddev_threshold = 0.01;
  bool relative_threshold = true;  // false: the threshold is in joules
  int num_warmup_iterations = 10;
  int num_calibration_iterations = 100;
  std::optional<double> iteration_duration_s{};
  // Stop at the first valid candidate (false: try them all, for a full report).
  bool stop_at_first_valid = true;
  PhaseShifts phase_shifts{};  // for every trial (the warm-up trials run once, unshifted)
  TrialObserver on_trial{};
};

struct SweepResult {
  double candidate_s = 0.0;
  double measurement_duration_s = 0.0;
  double cooldown_duration_s = 0.0;
  std::vector<TrialResult> trials;
  double mean_energy_per_iteration_j = 0.0;
  double stddev_energy_per_iteration_j = 0.0;  // sample standard deviation
  double relative_stddev = 0.0;                // stddev / mean
  double mean_temperature_before_c = 0.0;
  double mean_temperature_after_c = 0.0;
  double mean_time_s = 0.0;    // of the windows
  double mean_energy_j = 0.0;  // of the windows
  bool valid = false;
};

struct SweepReport {
  std::vector<SweepResult> sweep;     // in the order tried
  std::optional<double> chosen_s;     // the smallest valid candidate
  double iteration_duration_s = 0.0;  // given or calibrated
};

struct ProfileParameters {
  double measurement_duration_s = 0.0;
  double cooldown_duration_s = 0.0;
  SweepReport measurement_report;
  SweepReport cooldown_report;
};

// One trial. Throws Error(kInvalidArgument) for a target without iteration or monitor, negative
// durations, non-positive counts or phase shifts outside [1, 1000] or without a period > 0.
TrialResult measure(const ProfileTarget& target, const MeasureOptions& options = {});

// The time of one iteration: `warmup_iterations` first, then `iterations` timed in a window.
double calibrate_iteration_duration(const ProfileTarget& target, int warmup_iterations,
                                    int iterations);

// Sweeps the measurement duration with the cooldown fixed at options.fixed_duration_s.
SweepReport profile_measurement_duration(const ProfileTarget& target,
                                         const SweepOptions& options = {});
// Sweeps the cooldown with the measurement duration fixed at options.fixed_duration_s.
SweepReport profile_cooldown_duration(const ProfileTarget& target,
                                      const SweepOptions& options = {});

// The measurement duration (cooldown fixed at measurement.fixed_duration_s), then the cooldown
// with that measurement duration (cooldown.fixed_duration_s is ignored). Throws
// Error(kUnavailable) naming the search range when a sweep finds no valid candidate.
ProfileParameters profile_parameters(const ProfileTarget& target,
                                     const SweepOptions& measurement = {},
                                     const SweepOptions& cooldown = {});

}  // namespace zeus::monitor
