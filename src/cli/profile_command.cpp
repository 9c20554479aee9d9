// `zeus profile -- CMD`: the thermally stable profiler (zeus/monitor/profile.hpp) from the shell.
// One iteration of the workload is one run of CMD; the measurement duration is swept first (with
// the longest cooldown candidate), then the cooldown (with the chosen measurement duration).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/progress_bar.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "common/text.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/sensor.hpp"
#include "zeus/monitor/profile.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::cli {
namespace {

struct ProfileArgs {
  std::string gpus;
  std::string measurement_durations = "1,2,3,4,5,6,7,8,9,10";
  std::string cooldown_durations = "1,2,3,4,5,6,7,8,9,10";
  int trials = 5;
  int warmup_iterations = 1;
  int phase_shifts = 1;
  double threshold = 0.01;
  bool as_json = false;
  bool show_output = false;
  std::vector<std::string> command;
};

// Thrown out of an iteration when zeus was asked to stop; the profiler cancels its window.
struct Stopped {
  int signal = 0;
  bool command_killed = false;  // `signal` was passed on to CMD and killed it
};

std::vector<double> parse_durations(const std::string& text, const char* what) {
  if (text::trim(text).empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} is empty; give at least one duration, e.g. 1,2,5s", what));
  }
  const std::vector<std::string_view> items = text::split_trimmed(text, ',');
  std::vector<double> durations_s;
  for (const std::string_view item : items) {
    if (item.empty()) {
      throw Error(
          ErrorKind::kInvalidArgument,
          fmt::format("{} \"{}\" has an empty item; give durations like 1,2,5s", what, text));
    }
    durations_s.push_back(parse_duration_s(item, what));
  }
  return durations_s;
}

// The steady clock, except that a cooldown ends early when zeus is asked to stop (so that
// Ctrl-C does not wait out a long cooldown).
class InterruptibleClock final : public Clock {
 public:
  explicit InterruptibleClock(SignalWatch& watch) : watch_(watch) {}
  std::int64_t now_ns() const override { return steady_clock()->now_ns(); }
  void sleep_for_ns(std::int64_t duration_ns) const override {
    // A huge cooldown (99999999999h saturates to INT64_MAX ns) waits until stopped, not wraps.
    const std::int64_t start_ns = now_ns();
    const std::int64_t wait_ns = std::max<std::int64_t>(duration_ns, 0);
    const std::int64_t end_ns = wait_ns > INT64_MAX - start_ns ? INT64_MAX : start_ns + wait_ns;
    while (!watch_.stop_signal()) {
      const std::int64_t left_ns = end_ns - now_ns();
      if (left_ns <= 0) {
        return;
      }
      watch_.wait(units::seconds_from_nanoseconds(left_ns));
    }
  }

 private:
  SignalWatch& watch_;
};

// Where the profile is, for the progress bar and for saying which trial a failing CMD was in.
struct Position {
  std::string sweep = "measurement-duration";
  int trials_done = 0;  // in this sweep, warm-up trials included
  int total_trials = 0;
  std::int64_t iterations = 0;
};

// How long CMD has to exit after a stop signal before it is sent SIGKILL (zeus monitor's
// default --kill-after).
constexpr double kStopGraceS = 10.0;

// One run of CMD, waited for. A failure names the sweep and trial.
void run_once(const ProfileArgs& args, SignalWatch& watch, Position& at) {
  if (const auto signal = watch.stop_signal()) {
    throw Stopped{*signal};
  }
  ++at.iterations;
  ChildProcessOptions options;
  if (!args.show_output) {
    options.output_file = "/dev/null";
  }
  auto started = ChildProcess::start(args.command, options);
  if (auto* failure = std::get_if<ChildProcess::StartFailure>(&started)) {
    throw Error(ErrorKind::kInvalidArgument,
                failure->message + "; give the command to profile after --");
  }
  // As `zeus monitor -- CMD`'s: a stop signal reaches CMD (forwarded, or from the terminal); a CMD
  // that ignores it is sent SIGKILL after a grace period, or at once on a second stop signal, so
  // that zeus returns. SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to CMD.
  const SupervisedExit ended = supervise_child(std::get<ChildProcess>(started), watch,
                                               *steady_clock(), {.kill_after_s = kStopGraceS});
  const ChildExit& exited = ended.exit;
  if (const auto signal = watch.stop_signal()) {
    throw Stopped{*signal};
  }
  // A passed-on signal that CMD does not handle ends the profile as it ends `zeus monitor`: with
  // 128 + that signal, the exit code of CMD.
  const std::vector<int>& passed_on = passed_on_signals();
  if (exited.signal &&
      std::find(passed_on.begin(), passed_on.end(), *exited.signal) != passed_on.end()) {
    throw Stopped{*exited.signal, true};
  }
  if (exited.exit_code != 0) {
    const std::string how = exited.signal
                                ? fmt::format("was killed by {}", signal_name(*exited.signal))
                                : fmt::format("exited with code {}", exited.exit_code);
    throw Error(ErrorKind::kUnknown,
                fmt::format("the command {} in trial {} of the {} sweep (iteration {}); `{}`", how,
                            at.trials_done + 1, at.sweep, at.iterations, shell_join(args.command)));
  }
}

nlohmann::json sweep_json(const monitor::SweepReport& report) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const monitor::SweepResult& result : report.sweep) {
    candidates.push_back(
        {{"candidate_s", result.candidate_s},
         {"measurement_duration_s", result.measurement_duration_s},
         {"cooldown_duration_s", result.cooldown_duration_s},
         {"mean_energy_per_iteration_j", result.mean_energy_per_iteration_j},
         {"stddev_energy_per_iteration_j", result.stddev_energy_per_iteration_j},
         {"relative_stddev", result.relative_stddev},
         {"mean_temperature_before_c", std::isfinite(result.mean_temperature_before_c)
                                           ? nlohmann::json(result.mean_temperature_before_c)
                                           : nlohmann::json(nullptr)},
         {"mean_temperature_after_c", std::isfinite(result.mean_temperature_after_c)
                                          ? nlohmann::json(result.mean_temperature_after_c)
                                          : nlohmann::json(nullptr)},
         {"trials", result.trials.size()},
         {"valid", result.valid}});
  }
  return {
      {"iteration_duration_s", report.iteration_duration_s},
      {"candidates", candidates},
      {"chosen_s", report.chosen_s ? nlohmann::json(*report.chosen_s) : nlohmann::json(nullptr)}};
}

std::string temperature_text(double celsius) {
  return std::isfinite(celsius) ? fmt::format("{:.1f}", celsius) : std::string("-");
}

void write_sweep_text(std::ostream& out, const char* title, const monitor::SweepReport& report) {
  out << fmt::format("{} sweep (iteration {:.4f} s):\n", title, report.iteration_duration_s);
  out << fmt::format("  {:>10}  {:>10}  {:>16}  {:>8}  {:>9}  {:>9}  {}\n", "measure s",
                     "cooldown s", "J per iteration", "spread", "temp0 C", "temp1 C", "");
  for (const monitor::SweepResult& result : report.sweep) {
    out << fmt::format("  {:>10.3f}  {:>10.3f}  {:>16.4f}  {:>7.2f}%  {:>9}  {:>9}  {}\n",
                       result.measurement_duration_s, result.cooldown_duration_s,
                       result.mean_energy_per_iteration_j, 100.0 * result.relative_stddev,
                       temperature_text(result.mean_temperature_before_c),
                       temperature_text(result.mean_temperature_after_c),
                       result.valid ? "VALID" : "INVALID");
  }
}

int run(const ProfileArgs& args) {
  // Every argument is checked before a device is touched or CMD runs.
  std::vector<double> measurement_s =
      parse_durations(args.measurement_durations, "--measurement-durations");
  std::vector<double> cooldown_s = parse_durations(args.cooldown_durations, "--cooldown-durations");
  for (const double duration_s : measurement_s) {
    if (!(duration_s > 0.0)) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--measurement-durations must be > 0 (a window needs time to measure)");
    }
  }
  if (args.trials < 2) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("--trials {} is too few: the spread needs at least 2 trials", args.trials));
  }
  if (args.warmup_iterations < 0) {
    throw Error(ErrorKind::kInvalidArgument, "--warmup-iterations must be >= 0");
  }
  if (args.phase_shifts < 1 || args.phase_shifts > 1000) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--phase-shifts {} must be between 1 and 1000", args.phase_shifts));
  }

  if (!(args.threshold > 0.0) || !std::isfinite(args.threshold)) {
    throw Error(ErrorKind::kInvalidArgument,
                "--threshold must be a finite number > 0 (the relative spread, e.g. 0.01)");
  }
  if (args.command.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "zeus profile needs a command to profile (zeus profile [OPTIONS] -- CMD ARGS...)");
  }
  const std::optional<std::vector<int>> gpu_request = parse_device_request(args.gpus, "--gpus");
  const device::Gpus& gpus = device::get_gpus();
  const std::vector<int> gpu_indices = select_gpus(gpu_request, gpus);
  if (gpu_indices.empty()) {
    throw Error(ErrorKind::kNotSupported, "zeus profile: no GPU found; `zeus show-env` says why");
  }
  monitor::ZeusMonitorOptions monitor_options;
  monitor_options.gpu_indices = gpu_indices;
  monitor_options.cpu_indices = std::vector<int>{};
  monitor::ZeusMonitor zeus_monitor(gpus, {}, monitor_options);

  SignalWatch watch(SignalWatchOptions{.wake_on_child_exit = true,
                                       .forward_to_child = true,
                                       .forwarded_signals = passed_on_signals()});
  Position at;
  ProgressBar bar;
  monitor::ProfileTarget target;
  target.monitor = &zeus_monitor;
  target.gpus = &gpus;
  target.clock = std::make_shared<InterruptibleClock>(watch);
  target.iteration = [&] { run_once(args, watch, at); };

  monitor::SweepOptions options;
  options.num_trials = args.trials;
  options.trial_stddev_threshold = args.threshold;
  options.num_warmup_iterations = args.warmup_iterations;
  options.num_calibration_iterations = 3;
  options.stop_at_first_valid = false;  // the full table
  options.phase_shifts.count = args.phase_shifts;
  if (!gpus.empty()) {
    // Spread over the first GPU's sampling period (or counter refresh), where it is published.
    if (const auto sensor = device::published_sensor_parameters(gpus.at(0).name())) {
      const double period_s = sensor->power_sample_period_s > 0.0 ? sensor->power_sample_period_s
                                                                  : sensor->counter_refresh_s;
      options.phase_shifts.sampling_period_s = period_s > 0.0 ? period_s : 0.1;
    }
  }
  options.on_trial = [&](double candidate_s, int trial, int trials, const monitor::TrialResult&) {
    ++at.trials_done;
    const std::string current = std::isnan(candidate_s)
                                    ? fmt::format("warm-up {}/{}", trial + 1, trials)
                                    : fmt::format("candidate {} trial {}/{}",
                                                  format_duration(candidate_s), trial + 1, trials);
    bar.show(static_cast<std::size_t>(std::max(at.trials_done, 0)),
             static_cast<std::size_t>(std::max(at.total_trials, 0)),
             fmt::format("{} sweep {}/{} trials  {}", at.sweep, at.trials_done, at.total_trials,
                         current));
  };
  // The trials of a sweep over `candidates` durations, warm-up trials included.
  const auto sweep_trials = [&options](const std::vector<double>& candidates) {
    return options.num_warmup_trials + options.num_trials * static_cast<int>(candidates.size());
  };
  monitor::SweepOptions measurement = options;
  measurement.search_range_s = measurement_s;
  measurement.fixed_duration_s = *std::max_element(cooldown_s.begin(), cooldown_s.end());
  at.total_trials = sweep_trials(measurement_s);

  monitor::SweepReport measurement_report;
  std::optional<monitor::SweepReport> cooldown_report;
  try {
    measurement_report = monitor::profile_measurement_duration(target, measurement);
    if (measurement_report.chosen_s) {
      monitor::SweepOptions cooldown = options;
      cooldown.search_range_s = cooldown_s;
      cooldown.fixed_duration_s = *measurement_report.chosen_s;
      cooldown.iteration_duration_s = measurement_report.iteration_duration_s;
      at = Position{"cooldown", 0, sweep_trials(cooldown_s), at.iterations};
      cooldown_report = monitor::profile_cooldown_duration(target, cooldown);
    }
  } catch (const Stopped& stopped) {
    bar.clear();
    std::cerr << fmt::format(
        "zeus: profile stopped by {}{} in trial {} of the {} sweep\n", signal_name(stopped.signal),
        stopped.command_killed ? " (passed on to the command, which it killed)" : "",
        at.trials_done + 1, at.sweep);
    return 128 + stopped.signal;
  }
  bar.clear();

  const bool complete = cooldown_report && cooldown_report->chosen_s;
  if (args.as_json) {
    nlohmann::json summary{
        {"command", args.command},
        {"gpus", gpu_indices},
        {"trials", args.trials},
        {"threshold", args.threshold},
        {"measurement_sweep", sweep_json(measurement_report)},
        {"cooldown_sweep",
         cooldown_report ? sweep_json(*cooldown_report) : nlohmann::json(nullptr)},
        {"measurement_duration_s", measurement_report.chosen_s
                                       ? nlohmann::json(*measurement_report.chosen_s)
                                       : nlohmann::json(nullptr)},
        {"cooldown_duration_s",
         complete ? nlohmann::json(*cooldown_report->chosen_s) : nlohmann::json(nullptr)}};
    std::cout << summary.dump(2) << "\n";
  } else {
    write_sweep_text(std::cout, "Measurement duration", measurement_report);
    if (cooldown_report) {
      write_sweep_text(std::cout, "Cooldown duration", *cooldown_report);
    }
    if (complete) {
      std::cout << fmt::format("Chosen: measurement duration {} s, cooldown duration {} s\n",
                               *measurement_report.chosen_s, *cooldown_report->chosen_s);
    }
  }
  if (!complete) {
    std::cerr << fmt::format(
        "zeus: error: no {} candidate had a relative spread below {}; try longer durations, "
        "more --trials or a larger --threshold\n",
        measurement_report.chosen_s ? "cooldown" : "measurement duration", args.threshold);
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void add_profile(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "profile",
      "Find how long to measure a command, and how long to let the GPU cool before, so that its "
      "energy per run is reproducible (thermally stable profiling)");
  auto args = std::make_shared<ProfileArgs>();
  command->add_option("--gpus", args->gpus, "GPUs to measure, e.g. 0,1; default all");
  command
      ->add_option("--measurement-durations", args->measurement_durations,
                   "Candidate measurement durations, e.g. 1,2,5s (each > 0)")
      ->capture_default_str();
  command
      ->add_option("--cooldown-durations", args->cooldown_durations,
                   "Candidate cooldown durations, e.g. 0,5,10s; the longest is the cooldown "
                   "while the measurement duration is swept")
      ->capture_default_str();
  command->add_option("--trials", args->trials, "Trials per candidate (at least 2)")
      ->capture_default_str();
  command
      ->add_option("--warmup-iterations", args->warmup_iterations,
                   "Runs of the command before each trial's window")
      ->capture_default_str();
  command
      ->add_option("--phase-shifts", args->phase_shifts,
                   "Split each trial into N runs started evenly over the GPU sensor's sampling "
                   "period, so that a sensor that samples part of the time (25 ms of every 100 ms "
                   "on A100/H100) sees every part of a short command; 4 on those GPUs")
      ->capture_default_str();
  command
      ->add_option("--threshold", args->threshold,
                   "A candidate is VALID when the standard deviation of energy per run over its "
                   "trials, relative to their mean, is below this")
      ->capture_default_str();
  command->add_flag("--json", args->as_json, "Print the result as one JSON object");
  command->add_flag("--show-output", args->show_output,
                    "Let the command's output through (default: it goes to /dev/null)");
  command->add_option("command", args->command,
                      "The command to run and its arguments; put -- "
                      "before it");
  command->footer(
      "Form: zeus profile [OPTIONS] -- CMD [ARGS...]\nOne iteration is one run of CMD. The "
      "result goes to standard output, a progress bar to standard error when it is a terminal. "
      "Exit code: 0 when both durations were found, 1 when none was valid or CMD failed, 2 for "
      "bad input (CMD not found included), 128+N when signal N stopped zeus (SIGINT, SIGTERM) or, "
      "passed on, killed CMD (SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2; CMD may handle them and go on).");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
