// `zeus monitor`'s run: the devices and outputs chosen, the window measured over the command or
// the duration, carbon and cost priced, the summary written (monitor_command.hpp).
#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/monitor/monitor_command.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::cli::monitor_command {
namespace {

constexpr const char* kWindowName = "zeus.monitor";

// -o and --timeline (docs/cli.md, "Input and output files"): a device or FIFO is written through,
// a link followed; the summary replaces a regular file at the end, whole, while the timeline is
// truncated and streamed in place, so that what was measured survives zeus being killed.
OutputFile open_for_writing(const std::string& path, std::string_view what, bool in_place,
                            std::vector<std::filesystem::path> inputs) {
  OutputFileOptions options;
  options.what = std::string(what);
  options.replace_atomically = !in_place;
  options.create_parent_directories = true;
  options.inputs = std::move(inputs);
  return OutputFile(path, std::move(options));
}

// The message up to its first full stop, for a one-line note.
std::string first_sentence(const std::string& message) {
  const auto end = message.find(". ");
  return end == std::string::npos ? message : message.substr(0, end);
}

// The carbon and cost figures of the window, and notes for those that could not be had.
struct Footprint {
  std::optional<monitor::CarbonEmissionMeasurement> carbon;
  std::optional<monitor::EnergyCostMeasurement> cost;
  std::vector<std::string> notes;
};

// How long a lookup may go on after a stop signal: one that answers finishes, a slow one is
// cancelled (SIGTERM must end zeus within a few seconds).
constexpr double kLookupGraceAfterSignalS = 1.0;

// Asks the providers on a thread of their own while this one waits on `watch`: the energy figures
// never wait on a web service past its deadline (outside_services.hpp), nor past a stop signal
// and the grace after it (the lookups are then cancelled).
Footprint price_window(const Plan& plan, const monitor::Measurement& measured, double start_unix_s,
                       double end_unix_s, SignalWatch& watch, const Clock& clock) {
  Footprint footprint;
  const auto& carbon_provider = plan.carbon_provider;
  const auto& price_provider = plan.price_provider;
  if (!carbon_provider && !price_provider) {
    return footprint;
  }
  std::atomic<bool> finished{false};
  std::thread lookups([&] {
    // A provider that fails (a web service down) costs the carbon figure, never the energy one.
    if (carbon_provider) {
      try {
        footprint.carbon = monitor::CarbonEmissionMonitor::emissions_of(
            measured, carbon_provider->intensity_over(start_unix_s, end_unix_s));
      } catch (const Error& error) {
        footprint.notes.push_back(fmt::format("no carbon emissions: {}", error.what()));
      }
    }
    if (price_provider) {
      try {
        footprint.cost = monitor::EnergyCostMonitor::cost_of(
            measured, price_provider->price_over(start_unix_s, end_unix_s),
            price_provider->currency());
      } catch (const Error& error) {
        footprint.notes.push_back(fmt::format("no electricity cost: {}", error.what()));
      }
    }
    finished.store(true);
  });
  std::optional<std::int64_t> signalled_ns;
  bool cancelled = false;
  while (!finished.load()) {
    if (watch.stop_signal() && !cancelled) {
      const std::int64_t now_ns = clock.now_ns();
      signalled_ns = signalled_ns.value_or(now_ns);
      if (units::seconds_from_nanoseconds(now_ns - *signalled_ns) >= kLookupGraceAfterSignalS) {
        if (carbon_provider) {
          carbon_provider->cancel();
        }
        if (price_provider) {
          price_provider->cancel();
        }
        cancelled = true;
      }
    }
    watch.wait(0.05);
  }
  lookups.join();
  return footprint;
}

}  // namespace

int run(const MonitorArgs& args, const Plan& plan) {
  const std::optional<double>& interval_s = plan.interval_s;
  const std::optional<double>& duration_s = plan.duration_s;
  const double kill_after_s = plan.kill_after_s;
  const std::optional<std::vector<int>>& gpu_request = plan.gpu_request;
  const std::optional<std::vector<int>>& cpu_request = plan.cpu_request;

  const device::Gpus& gpus = device::get_gpus();
  std::vector<std::string> notes;
  const std::vector<int> gpu_indices = select_gpus(gpu_request, gpus);
  if (!gpu_request && gpus.empty()) {
    notes.push_back("no GPU found; `zeus show-env` says why");
  }

  const device::CpuDiscovery cpus =
      args.powercap_root.empty()
          ? device::get_cpus()
          : device::discover_rapl_cpus(std::filesystem::path(args.powercap_root));
  std::vector<int> cpu_indices;
  if (cpu_request) {
    require_cpus(cpus, args.cpus);
    cpu_indices = select_cpus(cpu_request, cpus);
  } else if (cpus.available) {
    cpu_indices = select_cpus(std::nullopt, cpus);
  } else {
    notes.push_back("no CPU energy: " + first_sentence(cpus.message) +
                    "; `zeus show-env` has the details");
  }

  // The timeline first: it exists then, so that `-o` naming the same file is refused.
  std::optional<OutputFile> timeline_file;
  if (!args.timeline.empty()) {
    timeline_file = open_for_writing(args.timeline, "--timeline", /*in_place=*/true, {});
  }
  std::optional<OutputFile> output_file;
  if (!args.output.empty()) {
    std::vector<std::filesystem::path> inputs;
    if (!args.timeline.empty()) {
      inputs = {args.timeline, monitor::timeline_csv::windows_path(args.timeline)};
    }
    output_file = open_for_writing(args.output, "--output", /*in_place=*/false, std::move(inputs));
  }

  monitor::ZeusMonitorOptions options;
  options.gpu_indices = gpu_indices;
  options.cpu_indices = cpu_indices;
  options.sampler_period_s = interval_s;
  options.warn_short_windows = false;   // a note in the summary says it
  options.warn_module_scope = false;    // the summary labels module energy and says it
  options.soc = device::get_soc().soc;  // a Jetson's rails (ZEUS_JETSON_ROOT for another root)
  if (!args.timeline.empty()) {
    // The measured window, for `zeus report` to shade on the timeline (ZeusMonitor's log format).
    options.log_file = monitor::timeline_csv::windows_path(args.timeline);
  }
  monitor::ZeusMonitor monitor(gpus, cpus.cpus, options);
  if (output_file && !options.log_file.empty()) {
    output_file->refuse_inputs({options.log_file});  // it exists now
  }

  // --cross-check: the counters against the power, before anything is measured.
  std::vector<monitor::CounterPowerCheck> cross_checks;
  if (args.cross_check) {
    cross_checks = monitor.cross_check();
    if (cross_checks.empty()) {
      notes.push_back("--cross-check: no monitored GPU has an energy counter to check");
    }
    for (const monitor::CounterPowerCheck& check : cross_checks) {
      if (check.disagrees) {
        notes.push_back(fmt::format(
            "GPU {}: its energy counter and its power disagree by {:.0f}%; trust the {}: {}",
            check.gpu_index, check.difference * 100.0, monitor::trust_name(check.trust),
            check.reason));
      }
    }
  }

  // /metrics while the command runs (docs/prometheus.md).
  std::unique_ptr<metrics::DeviceMetrics> device_metrics;
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (args.metrics_port >= 0) {
    if (args.metrics_port > 65535) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--metrics-port {} is out of range; use 1-65535 (0: any free port)",
                              args.metrics_port));
    }
    metrics::DeviceMetricsOptions metrics_options;
    metrics_options.gpu_indices = gpu_indices;
    metrics_options.interval_s = interval_s.value_or(1.0);
    metrics_options.soc = options.soc;
    // The same providers as the summary's: a web service's cache then serves both.
    metrics_options.carbon_intensity = plan.carbon_provider;
    metrics_options.electricity_price = plan.price_provider;
    std::vector<std::shared_ptr<device::Cpu>> metric_cpus = cpus_with_indices(cpus, cpu_indices);
    device_metrics =
        std::make_unique<metrics::DeviceMetrics>(gpus, metric_cpus, std::move(metrics_options));
    metrics_server = std::make_unique<metrics::MetricsServer>(
        args.metrics_host, args.metrics_port,
        std::vector<metrics::MetricsServer::Source>{
            [devices = device_metrics.get()](std::string& out) { devices->render(out); }});
    metrics_server->start();
    std::cerr << fmt::format("zeus: serving metrics at http://{}:{}/metrics\n", args.metrics_host,
                             metrics_server->port());
  }

  // The power timeline: every readable domain of the monitored GPUs, streamed to the file.
  std::optional<TimelineRecording> timeline;
  if (timeline_file) {
    timeline.emplace(std::move(*timeline_file), gpus, gpu_indices, interval_s);
  }

  // SIGCHLD wakes the wait when the command exits; kill/timeout signals are passed on to it, and
  // so are SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (which would otherwise kill zeus and leave it).
  SignalWatch watch(SignalWatchOptions{
      .wake_on_child_exit = true,
      .forward_to_child = true,
      .forwarded_signals = args.command.empty() ? std::vector<int>{} : passed_on_signals()});
  RunOutcome outcome;
  outcome.limit_s = duration_s;
  const std::shared_ptr<Clock> clock = steady_clock();
  monitor.begin_window(kWindowName, {.sync_execution = false});
  const double start_unix_s = system_clock()->now_s();
  // Counted from after the window opened (opening it reads every device, which takes a while
  // on a busy machine), so the measured window is never shorter than --duration.
  const std::int64_t start_ns = clock->now_ns();
  const auto elapsed_s = [&] {
    return units::seconds_from_nanoseconds(clock->now_ns() - start_ns);
  };

  if (!args.command.empty()) {
    auto started = ChildProcess::start(args.command);
    if (auto* failure = std::get_if<ChildProcess::StartFailure>(&started)) {
      monitor.end_window(kWindowName, {.sync_execution = false, .cancel = true});
      std::cerr << "zeus: " << failure->message << "\n";
      return kExitCommandNotStarted;
    }
    const SupervisedExit ended = supervise_child(
        std::get<ChildProcess>(started), watch, *clock,
        {.time_limit_s = duration_s, .start_ns = start_ns, .kill_after_s = kill_after_s});
    outcome.child = ended.exit;
    outcome.limit_reached = ended.limit_reached;
    outcome.kill_reason = ended.kill_reason;
  } else {
    while (!watch.stop_signal()) {
      const double remaining_s = *duration_s - elapsed_s();
      if (remaining_s <= 0.0) {
        break;
      }
      watch.wait(remaining_s);
    }
    outcome.stop_signal = watch.stop_signal();
  }

  const monitor::Measurement measured = monitor.end_window(kWindowName, {.sync_execution = false});
  const double end_unix_s = system_clock()->now_s();
  std::optional<std::string> short_run;
  if (!measured.gpu_energy_j.empty() && measured.time_s < monitor.short_window_s()) {
    short_run = fmt::format(
        "the run lasted under {:g} refresh periods of the GPU energy counters ({:.3f} s): its "
        "GPU figures may be off by up to their ± bound",
        monitor::kShortWindowRefreshPeriods,
        monitor.short_window_s() / monitor::kShortWindowRefreshPeriods);
  }
  Footprint footprint = price_window(plan, measured, start_unix_s, end_unix_s, watch, *clock);
  notes.insert(notes.end(), footprint.notes.begin(), footprint.notes.end());
  if (metrics_server) {
    metrics_server->stop();
    device_metrics->stop();
  }
  std::vector<std::string> errors;
  if (timeline) {
    timeline->finish(args.timeline, errors);
  }

  std::ostream& out = output_file ? output_file->stream() : static_cast<std::ostream&>(std::cerr);
  if (short_run && !args.as_json) {  // the JSON has the bounds themselves
    notes.push_back(*short_run);
  }
  const Summary summary{measured, outcome, footprint.carbon, footprint.cost, notes, cross_checks};
  if (args.as_json) {
    write_json_summary(out, args, summary);
  } else {
    write_text_summary(out, args, summary, gpus, cpus);
  }
  try {
    if (output_file) {
      output_file->commit();
    }
  } catch (const Error& error) {
    errors.push_back(error.what());
  }
  for (const std::string& error : errors) {
    std::cerr << "zeus: error: " << error << "\n";
  }
  if (outcome.child) {
    return outcome.child->exit_code;  // the command's, whatever happened to the extras
  }
  return errors.empty() ? kExitOk : kExitError;
}

}  // namespace zeus::cli::monitor_command
