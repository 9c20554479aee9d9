#include "zeus/monitor/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::monitor {
namespace {

constexpr const char* kTrialWindow = "__zeus_profile_run_trial";
constexpr const char* kCalibrationWindow = "__zeus_profile_calibrate";
// A sweep expected to run longer than this says so at level warn when it starts (shorter ones at
// info), so that a long silent run is never a surprise.
constexpr double kLongSweepS = 600.0;

void check_target(const ProfileTarget& target) {
  if (!target.iteration) {
    throw Error(ErrorKind::kInvalidArgument, "profile: the target has no iteration function");
  }
  if (target.monitor == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "profile: the target has no monitor");
  }
  const ProfileRanks& ranks = target.ranks;
  if (static_cast<bool>(ranks.sum) != static_cast<bool>(ranks.max) || ranks.world_size < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                "profile: combining ranks needs both a sum and a max and a world size >= 1");
  }
}

bool distributed(const ProfileTarget& target) {
  return static_cast<bool>(target.ranks.sum);
}

// The reference's all_reduce of a trial: energy summed, time the maximum, temperatures
// averaged (in this order on every process).
void combine_ranks(const ProfileTarget& target, TrialResult& trial) {
  if (!distributed(target)) {
    return;
  }
  const ProfileRanks& ranks = target.ranks;
  const auto processes = static_cast<double>(ranks.world_size);
  trial.energy_j = ranks.sum(trial.energy_j);
  trial.time_s = ranks.max(trial.time_s);
  trial.temperature_before_c = ranks.sum(trial.temperature_before_c) / processes;
  trial.temperature_after_c = ranks.sum(trial.temperature_after_c) / processes;
}

void check_duration(const char* what, double value_s) {
  if (!std::isfinite(value_s) || value_s < 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("profile: {} must be a finite number of seconds >= 0, got {:g}", what,
                            value_s));
  }
}

Clock& clock_of(const ProfileTarget& target) {
  return target.clock ? *target.clock : *steady_clock();
}

double mean_temperature_c(const ProfileTarget& target) {
  if (target.gpus == nullptr && !target.temperature_c) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const std::vector<int>& indices = target.monitor->gpu_indices();
  if (indices.empty()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double sum_c = 0.0;
  for (const int index : indices) {
    sum_c += target.temperature_c ? target.temperature_c(index)
                                  : static_cast<double>(target.gpus->at(index).temperature_c());
  }
  return sum_c / static_cast<double>(indices.size());
}

void run_iterations(const ProfileTarget& target, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    target.iteration();
  }
}

// Iterations inside the open window `window`: when one throws, the window is cancelled (so the
// caller's monitor is not left with it open) and the exception propagates.
void run_iterations_in_window(const ProfileTarget& target, const char* window, std::int64_t count) {
  try {
    run_iterations(target, count);
  } catch (...) {
    try {
      target.monitor->end_window(window, {.sync_execution = false, .cancel = true});
    } catch (...) {  // NOLINT(bugprone-empty-catch): the workload's exception matters more
    }
    throw;
  }
}

std::string format_range(const std::vector<double>& values_s) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values_s.size(); ++i) {
    out << (i == 0 ? "" : ", ") << values_s[i];
  }
  out << "] s";
  return out.str();
}

void check_phase_shifts(const PhaseShifts& shifts) {
  if (shifts.count < 1 || shifts.count > 1000 || !std::isfinite(shifts.sampling_period_s) ||
      !(shifts.sampling_period_s > 0.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("profile: phase shifts need a count in [1, 1000] and a sampling "
                            "period > 0 s, got {} and {:g} s",
                            shifts.count, shifts.sampling_period_s));
  }
}

TrialResult run_trial(const ProfileTarget& target, double measurement_s, double cooldown_s,
                      int warmup_iterations, double iteration_s, const PhaseShifts& shifts = {}) {
  if (cooldown_s > 0.0) {
    clock_of(target).sleep_for_s(cooldown_s);
  }
  TrialResult trial;
  trial.measurement_duration_s = measurement_s;
  trial.cooldown_duration_s = cooldown_s;
  // As the reference: enough iterations to fill the measurement duration. A small tolerance so
  // that 2.0 / 0.5 gives 4 iterations even when the quotient rounds up.
  trial.iterations = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(measurement_s / iteration_s - 1e-9)));
  trial.temperature_before_c = mean_temperature_c(target);
  // Phase-shifted runs (PhaseShifts): run r starts r / count of a sampling period after the
  // first run's phase; one run when count is 1.
  Clock& clock = clock_of(target);
  const std::int64_t per_run = std::max<std::int64_t>(1, trial.iterations / shifts.count);
  const std::int64_t period_ns =
      std::max<std::int64_t>(1, units::nanoseconds_from_seconds(shifts.sampling_period_s));
  const std::int64_t first_ns = clock.now_ns();
  for (int run = 0; run < shifts.count; ++run) {
    if (run > 0) {
      const std::int64_t offset_ns = period_ns * run / shifts.count;
      const std::int64_t into_ns = (clock.now_ns() - first_ns) % period_ns;
      clock.sleep_for_ns(((offset_ns - into_ns) % period_ns + period_ns) % period_ns);
    }
    run_iterations(target, warmup_iterations);
    target.monitor->begin_window(kTrialWindow, {.sync_execution = true, .restart = true});
    run_iterations_in_window(target, kTrialWindow, per_run);
    const Measurement measured = target.monitor->end_window(kTrialWindow);
    trial.energy_j += measured.total_energy_j();
    trial.time_s += measured.time_s;
  }
  trial.iterations = per_run * shifts.count;
  trial.temperature_after_c = mean_temperature_c(target);
  combine_ranks(target, trial);
  trial.energy_per_iteration_j = trial.energy_j / static_cast<double>(trial.iterations);
  trial.time_per_iteration_s = trial.time_s / static_cast<double>(trial.iterations);
  return trial;
}

void summarise(SweepResult& result, double threshold, bool relative) {
  const auto n = static_cast<double>(result.trials.size());
  double sum_j = 0.0;
  for (const TrialResult& trial : result.trials) {
    sum_j += trial.energy_per_iteration_j;
    result.mean_temperature_before_c += trial.temperature_before_c / n;
    result.mean_temperature_after_c += trial.temperature_after_c / n;
    result.mean_time_s += trial.time_s / n;
    result.mean_energy_j += trial.energy_j / n;
  }
  result.mean_energy_per_iteration_j = sum_j / n;
  double squares = 0.0;
  for (const TrialResult& trial : result.trials) {
    const double d = trial.energy_per_iteration_j - result.mean_energy_per_iteration_j;
    squares += d * d;
  }
  result.stddev_energy_per_iteration_j = n > 1.0 ? std::sqrt(squares / (n - 1.0)) : 0.0;
  result.relative_stddev =
      result.mean_energy_per_iteration_j > 0.0
          ? result.stddev_energy_per_iteration_j / result.mean_energy_per_iteration_j
          : std::numeric_limits<double>::infinity();
  result.valid = relative ? result.relative_stddev < threshold
                          : result.stddev_energy_per_iteration_j < threshold;
}

// The given iteration duration, else one calibrated now (SweepOptions and MeasureOptions both
// carry these fields). Throws Error(kInvalidArgument) unless it is > 0.
template <typename Options>
double iteration_duration_s(const ProfileTarget& target, const Options& options) {
  const double duration_s =
      options.iteration_duration_s
          ? *options.iteration_duration_s
          : calibrate_iteration_duration(target, options.num_warmup_iterations,
                                         options.num_calibration_iterations);
  if (!(duration_s > 0.0)) {
    throw Error(ErrorKind::kInvalidArgument, "profile: the iteration duration must be > 0 s");
  }
  return duration_s;
}

enum class Swept { kMeasurement, kCooldown };

SweepReport sweep(const ProfileTarget& target, const SweepOptions& options, Swept swept) {
  check_target(target);
  if (options.num_trials < 2) {
    throw Error(ErrorKind::kInvalidArgument,
                "profile: num_trials must be at least 2 (a spread needs two trials), got " +
                    std::to_string(options.num_trials));
  }
  if (options.num_warmup_trials < 0 || options.num_warmup_iterations < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "profile: num_warmup_trials and num_warmup_iterations must be >= 0");
  }
  if (!(options.trial_stddev_threshold > 0.0)) {
    throw Error(ErrorKind::kInvalidArgument, "profile: trial_stddev_threshold must be > 0");
  }
  check_phase_shifts(options.phase_shifts);
  std::vector<double> candidates_s = options.search_range_s;
  if (candidates_s.empty()) {
    for (int s = 1; s <= 10; ++s) {
      candidates_s.push_back(s);
    }
  }
  for (const double candidate_s : candidates_s) {
    check_duration("a search-range value", candidate_s);
  }
  check_duration("the fixed duration", options.fixed_duration_s);
  std::sort(candidates_s.begin(), candidates_s.end());

  SweepReport report;
  report.iteration_duration_s = iteration_duration_s(target, options);
  // Throw-away trials to reach the working temperature: back to back, at the longest
  // measurement duration of the sweep.
  const double warmup_measurement_s =
      swept == Swept::kMeasurement ? candidates_s.back() : options.fixed_duration_s;
  const char* what = swept == Swept::kMeasurement ? "measurement duration" : "cooldown duration";
  // Progress: what the sweep will take at most (every candidate tried), then a line per
  // candidate (level info).
  const auto trial_s = [&](double candidate_s) {
    const double measurement_s =
        swept == Swept::kMeasurement ? candidate_s : options.fixed_duration_s;
    const double cooldown_s = swept == Swept::kCooldown ? candidate_s : options.fixed_duration_s;
    return measurement_s + cooldown_s + options.num_warmup_iterations * report.iteration_duration_s;
  };
  double estimate_s = options.num_warmup_trials * warmup_measurement_s;
  for (const double candidate_s : candidates_s) {
    estimate_s += options.num_trials * trial_s(candidate_s);
  }
  log().log(estimate_s > kLongSweepS ? spdlog::level::warn : spdlog::level::info,
            "profile: sweeping the {} over {} ({} trials each, {} warm-up trials) takes up to "
            "about {:.0f} s ({:.1f} min); each candidate is logged at level info "
            "(ZEUS_LOG_LEVEL=info); fewer candidates or trials take less",
            what, format_range(candidates_s), options.num_trials, options.num_warmup_trials,
            estimate_s, estimate_s / 60.0);
  for (int trial = 0; trial < options.num_warmup_trials; ++trial) {
    const TrialResult outcome =
        run_trial(target, warmup_measurement_s, 0.0, 0, report.iteration_duration_s);
    if (options.on_trial) {
      options.on_trial(std::numeric_limits<double>::quiet_NaN(), trial, options.num_warmup_trials,
                       outcome);
    }
  }
  for (std::size_t index = 0; index < candidates_s.size(); ++index) {
    const double candidate_s = candidates_s[index];
    log().info("profile: {} {:g} s, candidate {} of {}: {} trials of about {:.1f} s", what,
               candidate_s, index + 1, candidates_s.size(), options.num_trials,
               trial_s(candidate_s));
    const double measurement_s =
        swept == Swept::kMeasurement ? candidate_s : options.fixed_duration_s;
    const double cooldown_s = swept == Swept::kCooldown ? candidate_s : options.fixed_duration_s;
    SweepResult result;
    result.candidate_s = candidate_s;
    result.measurement_duration_s = measurement_s;
    result.cooldown_duration_s = cooldown_s;
    for (int trial = 0; trial < options.num_trials; ++trial) {
      TrialResult outcome =
          run_trial(target, measurement_s, cooldown_s, options.num_warmup_iterations,
                    report.iteration_duration_s, options.phase_shifts);
      if (options.on_trial) {
        options.on_trial(candidate_s, trial, options.num_trials, outcome);
      }
      result.trials.push_back(outcome);
    }
    summarise(result, options.trial_stddev_threshold, options.relative_threshold);
    log().info(
        "profile: {} {:g} s: spread of energy per iteration {:g}{} (threshold {:g}{}): {}", what,
        candidate_s,
        options.relative_threshold ? result.relative_stddev : result.stddev_energy_per_iteration_j,
        options.relative_threshold ? "" : " J", options.trial_stddev_threshold,
        options.relative_threshold ? "" : " J", result.valid ? "stable" : "not stable enough");
    report.sweep.push_back(std::move(result));
    if (report.sweep.back().valid && !report.chosen_s) {
      report.chosen_s = candidate_s;
      if (options.stop_at_first_valid) {
        break;
      }
    }
  }
  return report;
}

double chosen_or_throw(const SweepReport& report, const SweepOptions& options, const char* what) {
  if (report.chosen_s) {
    return *report.chosen_s;
  }
  std::vector<double> tried_s;
  double best = std::numeric_limits<double>::infinity();
  for (const SweepResult& result : report.sweep) {
    tried_s.push_back(result.candidate_s);
    // The best spread in the threshold's own terms: relative, or in joules.
    best = std::min(best, options.relative_threshold ? result.relative_stddev
                                                     : result.stddev_energy_per_iteration_j);
  }
  const char* unit = options.relative_threshold ? "" : " J";
  throw Error(
      ErrorKind::kUnavailable,
      fmt::format("profile: no {} in {} gave a {}spread of energy per iteration below {:g}{} "
                  "(best {:g}{}); try longer durations or a larger threshold",
                  what, format_range(tried_s), options.relative_threshold ? "relative " : "",
                  options.trial_stddev_threshold, unit, best, unit));
}

}  // namespace

double calibrate_iteration_duration(const ProfileTarget& target, int warmup_iterations,
                                    int iterations) {
  check_target(target);
  run_iterations(target, std::max(0, warmup_iterations));
  if (iterations < 1) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "profile: num_calibration_iterations must be >= 1, got " + std::to_string(iterations));
  }
  target.monitor->begin_window(kCalibrationWindow, {.sync_execution = true, .restart = true});
  run_iterations_in_window(target, kCalibrationWindow, iterations);
  const Measurement measured = target.monitor->end_window(kCalibrationWindow);
  // The slowest process's time: every process then runs as many iterations per trial.
  const double time_s = distributed(target) ? target.ranks.max(measured.time_s) : measured.time_s;
  return time_s / static_cast<double>(iterations);
}

TrialResult measure(const ProfileTarget& target, const MeasureOptions& options) {
  check_target(target);
  check_duration("measurement_duration", options.measurement_duration_s);
  check_duration("cooldown_duration", options.cooldown_duration_s);
  if (options.num_warmup_iterations < 0) {
    throw Error(ErrorKind::kInvalidArgument, "profile: num_warmup_iterations must be >= 0");
  }
  check_phase_shifts(options.phase_shifts);
  const double iteration_s = iteration_duration_s(target, options);
  return run_trial(target, options.measurement_duration_s, options.cooldown_duration_s,
                   options.num_warmup_iterations, iteration_s, options.phase_shifts);
}

SweepReport profile_measurement_duration(const ProfileTarget& target, const SweepOptions& options) {
  return sweep(target, options, Swept::kMeasurement);
}

SweepReport profile_cooldown_duration(const ProfileTarget& target, const SweepOptions& options) {
  return sweep(target, options, Swept::kCooldown);
}

ProfileParameters profile_parameters(const ProfileTarget& target, const SweepOptions& measurement,
                                     const SweepOptions& cooldown) {
  ProfileParameters result;
  result.measurement_report = profile_measurement_duration(target, measurement);
  result.measurement_duration_s =
      chosen_or_throw(result.measurement_report, measurement, "measurement duration");
  SweepOptions cooldown_options = cooldown;
  cooldown_options.fixed_duration_s = result.measurement_duration_s;
  if (!cooldown_options.iteration_duration_s) {
    // Calibrated once: the second sweep reuses the first's iteration time.
    cooldown_options.iteration_duration_s = result.measurement_report.iteration_duration_s;
  }
  result.cooldown_report = profile_cooldown_duration(target, cooldown_options);
  result.cooldown_duration_s =
      chosen_or_throw(result.cooldown_report, cooldown_options, "cooldown duration");
  return result;
}

}  // namespace zeus::monitor
