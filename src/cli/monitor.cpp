// `zeus monitor`: the time and energy of a command (like `perf stat`), or of the machine for a
// while, per GPU, CPU package and DRAM.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "carbon_spec.hpp"
#include "commands.hpp"
#include "common/output_file.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "devices.hpp"
#include "price_spec.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/power_sampler.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::cli {
namespace {

constexpr const char* kWindowName = "zeus.monitor";

struct MonitorArgs {
  std::string gpus;
  std::string cpus;
  std::string interval;
  std::string duration;
  std::string kill_after = "10s";
  std::string timeline;
  std::string output;
  std::string powercap_root;
  int metrics_port = -1;  // -1: no /metrics
  std::string metrics_host = "127.0.0.1";
  bool as_json = false;
  std::string carbon_intensity;  // --carbon-intensity SPEC (carbon_spec.hpp); empty: none
  std::string price;             // --price SPEC (price_spec.hpp); empty: none
  std::vector<std::string> command;
};

// What was run and how it ended, for the summary.
struct RunOutcome {
  std::optional<ChildExit> child;  // set when a command ran
  std::optional<int> stop_signal;  // SIGINT/SIGTERM that ended a run without a command
  std::optional<double> limit_s;   // --duration
  bool limit_reached = false;      // the command was sent SIGTERM at the time limit
  std::string kill_reason;         // set when zeus sent SIGKILL: why
};

// Forwarded to the command like SIGINT/SIGTERM, but not stop signals: the command may handle them
// and go on running.
const std::vector<int> kForwardedSignals = {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

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

// Streams the sampler's sweeps to a CSV file as they come (nothing is kept in memory).
class TimelineWriter {
 public:
  TimelineWriter(OutputFile file, std::int64_t steady_start_ns)
      : file_(std::move(file)),
        steady_start_ns_(steady_start_ns),
        wall_start_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count()) {
    // celsius: only on the temperature rows (domain "temperature", watts empty).
    file_.stream() << "timestamp,device,domain,watts,celsius\n";
  }

  // Called on the sampler thread; must not throw.
  void write(const std::vector<monitor::PowerSample>& sweep) noexcept {
    write_rows(sweep, [](std::string& out, const monitor::PowerSample& sample) {
      fmt::format_to(std::back_inserter(out), "gpu{},{},{:.3f},\n", sample.gpu_index,
                     monitor::power_domain_name(sample.domain), sample.power_w);
    });
  }

  // The temperatures that changed in a sweep; the sampler thread, must not throw. The same
  // sweep's power rows come first (the sampler calls on_sweep before on_temperature_change).
  void write(const std::vector<monitor::TemperatureSample>& changes) noexcept {
    write_rows(changes, [](std::string& out, const monitor::TemperatureSample& sample) {
      fmt::format_to(std::back_inserter(out), "gpu{},temperature,,{}\n", sample.gpu_index,
                     sample.temperature_c);
    });
  }

  // Flushes; false when any write failed.
  bool finish() {
    try {
      file_.commit();
    } catch (const Error&) {
      return false;
    }
    return !failed_;
  }

 private:
  // One row per sample: the Unix timestamp (microseconds), then what `rest` writes.
  template <typename Sample, typename Rest>
  void write_rows(const std::vector<Sample>& samples, Rest rest) noexcept {
    try {
      buffer_.clear();
      for (const Sample& sample : samples) {
        const std::int64_t wall_us = wall_start_us_ + units::microseconds_from_nanoseconds(
                                                          sample.time_ns - steady_start_ns_);
        fmt::format_to(std::back_inserter(buffer_), "{}.{:06},", wall_us / 1'000'000,
                       wall_us % 1'000'000);
        rest(buffer_, sample);
      }
      file_.stream().write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    } catch (...) {
      failed_ = true;
    }
  }

  OutputFile file_;
  std::int64_t steady_start_ns_;
  std::int64_t wall_start_us_;
  std::string buffer_;
  bool failed_ = false;
};

// Whether every GPU of `indices` reports its temperature; other errors than kNotSupported
// propagate.
bool temperature_supported(const device::Gpus& gpus, const std::vector<int>& indices) {
  for (const int index : indices) {
    try {
      (void)gpus.at(index).temperature_c();
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::kNotSupported) {
        return false;
      }
      throw;
    }
  }
  return true;
}

// Whether every GPU of `indices` can read `domain`; other errors than kNotSupported propagate.
bool domain_supported(const device::Gpus& gpus, const std::vector<int>& indices,
                      monitor::PowerDomain domain) {
  for (const int index : indices) {
    device::Gpu& gpu = gpus.at(index);
    try {
      monitor::read_power_mw(gpu, domain);
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::kNotSupported) {
        return false;
      }
      throw;
    }
  }
  return true;
}

std::string gpu_name(const device::Gpus& gpus, int index) {
  try {
    return gpus.at(index).name();
  } catch (const Error&) {
    return "?";
  }
}

std::string average_power(double energy_j, double time_s) {
  return time_s > 0.0 ? fmt::format("{:.1f} W", energy_j / time_s) : std::string("- W");
}

std::string outcome_text(const RunOutcome& outcome) {
  std::string text;
  if (outcome.child) {
    text = outcome.child->signal
               ? fmt::format("killed by {}, exit {}", signal_name(*outcome.child->signal),
                             outcome.child->exit_code)
               : fmt::format("exit {}", outcome.child->exit_code);
    if (outcome.limit_reached) {
      text += fmt::format(", sent SIGTERM at the {} time limit", format_duration(*outcome.limit_s));
    }
    if (!outcome.kill_reason.empty()) {
      text += ", " + outcome.kill_reason;
    }
  } else if (outcome.stop_signal) {
    text = fmt::format("interrupted by {}", signal_name(*outcome.stop_signal));
  }
  return text;
}

void write_text_summary(std::ostream& out, const MonitorArgs& args,
                        const monitor::Measurement& measured, const RunOutcome& outcome,
                        const device::Gpus& gpus, const device::CpuDiscovery& cpus,
                        const std::optional<monitor::CarbonEmissionMeasurement>& carbon,
                        const std::optional<monitor::EnergyCostMeasurement>& cost,
                        const std::vector<std::string>& notes) {
  const std::string status = outcome_text(outcome);
  if (outcome.child) {
    out << fmt::format("\n Energy of {} ({}), {:.3f} s:\n\n", shell_join(args.command), status,
                       measured.time_s);
  } else {
    out << fmt::format("\n Energy over {:.3f} s{}:\n\n", measured.time_s,
                       status.empty() ? "" : " (" + status + ")");
  }
  const auto row = [&](const std::string& label, const std::string& name, double energy_j) {
    out << fmt::format("   {:<7} {:<24} {:>14.3f} J {:>10}\n", label, name, energy_j,
                       average_power(energy_j, measured.time_s));
  };
  std::size_t rows = 0;
  double total_j = 0.0;
  for (const auto& [index, energy_j] : measured.gpu_energy_j) {
    row(fmt::format("GPU {}", index), gpu_name(gpus, index), energy_j);
    total_j += energy_j;
    ++rows;
  }
  const auto cpu_name = [&](int index) -> std::string {
    for (const auto& cpu : cpus.cpus) {
      if (cpu->index() == index) {
        return cpu->name();
      }
    }
    return "?";
  };
  for (const auto& [index, energy_j] : measured.cpu_energy_j) {
    row(fmt::format("CPU {}", index), cpu_name(index), energy_j);
    total_j += energy_j;
    ++rows;
  }
  for (const auto& [index, energy_j] : measured.dram_energy_j) {
    row(fmt::format("DRAM {}", index), cpu_name(index) + " DRAM", energy_j);
    total_j += energy_j;
    ++rows;
  }
  if (rows > 1) {
    row("total", "", total_j);
  }
  if (rows == 0) {
    out << "   (no device measured)\n";
  }
  if (carbon) {
    out << fmt::format(
        "\n   carbon  {:.6g} gCO2eq (GPU {:.6g}, CPU {:.6g}, DRAM {:.6g}) at a mean "
        "{:.6g} gCO2eq/kWh\n",
        carbon->total_carbon_emission_g(), carbon->gpu_carbon_emission_g.sum(),
        carbon->cpu_carbon_emission_g.sum(), carbon->dram_carbon_emission_g.sum(),
        carbon->mean_gco2eq_per_kwh);
  }
  if (cost) {
    const std::string unit = cost->currency.empty() ? "" : " " + cost->currency;
    out << fmt::format(
        "\n   cost    {:.6g}{} (GPU {:.6g}, CPU {:.6g}, DRAM {:.6g}) at a mean {:.6g}{}/kWh\n",
        cost->total_cost(), unit, cost->gpu_energy_cost.sum(), cost->cpu_energy_cost.sum(),
        cost->dram_energy_cost.sum(), cost->mean_price_per_kwh, unit);
  }
  for (const std::string& note : notes) {
    out << "\n   note: " << note << "\n";
  }
  out << "\n";
}

nlohmann::json energy_json(const monitor::EnergyByIndex& energy) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [index, energy_j] : energy) {
    object[std::to_string(index)] = energy_j;
  }
  return object;
}

void write_json_summary(std::ostream& out, const MonitorArgs& args,
                        const monitor::Measurement& measured, const RunOutcome& outcome,
                        const std::optional<monitor::CarbonEmissionMeasurement>& carbon,
                        const std::optional<monitor::EnergyCostMeasurement>& cost,
                        const std::vector<std::string>& notes) {
  nlohmann::json summary;
  summary["command"] =
      args.command.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.command);
  summary["exit_code"] =
      outcome.child ? nlohmann::json(outcome.child->exit_code) : nlohmann::json(nullptr);
  summary["signal"] = outcome.child && outcome.child->signal
                          ? nlohmann::json(signal_name(*outcome.child->signal))
                      : outcome.stop_signal ? nlohmann::json(signal_name(*outcome.stop_signal))
                                            : nlohmann::json(nullptr);
  summary["killed"] = !outcome.kill_reason.empty();
  summary["time_s"] = measured.time_s;
  summary["gpu_energy_j"] = energy_json(measured.gpu_energy_j);
  summary["cpu_energy_j"] = energy_json(measured.cpu_energy_j);
  summary["dram_energy_j"] = energy_json(measured.dram_energy_j);
  if (!args.carbon_intensity.empty()) {
    // null when the provider could not say (a note says why).
    summary["carbon"] = nullptr;
    if (carbon) {
      summary["carbon"] = {{"gco2eq", carbon->total_carbon_emission_g()},
                           {"mean_gco2eq_per_kwh", carbon->mean_gco2eq_per_kwh},
                           {"gpu_gco2eq", energy_json(carbon->gpu_carbon_emission_g)},
                           {"cpu_gco2eq", energy_json(carbon->cpu_carbon_emission_g)},
                           {"dram_gco2eq", energy_json(carbon->dram_carbon_emission_g)}};
    }
  }
  if (!args.price.empty()) {
    summary["cost"] = nullptr;
    if (cost) {
      summary["cost"] = {{"total", cost->total_cost()},
                         {"currency", cost->currency.empty() ? nlohmann::json(nullptr)
                                                             : nlohmann::json(cost->currency)},
                         {"mean_price_per_kwh", cost->mean_price_per_kwh},
                         {"gpu", energy_json(cost->gpu_energy_cost)},
                         {"cpu", energy_json(cost->cpu_energy_cost)},
                         {"dram", energy_json(cost->dram_energy_cost)}};
    }
  }
  summary["notes"] = notes;
  if (!outcome.kill_reason.empty()) {
    summary["notes"].push_back("zeus " + outcome.kill_reason);
  }
  out << summary.dump(2) << "\n";
}

// The message up to its first full stop, for a one-line note.
std::string first_sentence(const std::string& message) {
  const auto end = message.find(". ");
  return end == std::string::npos ? message : message.substr(0, end);
}

double positive_duration(const std::string& text, std::string_view what) {
  const double duration_s = parse_duration_s(text, what);
  if (duration_s <= 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} \"{}\" must be longer than zero", what, text));
  }
  return duration_s;
}

bool is_stop_signal(int signal) {
  return signal == SIGINT || signal == SIGTERM;
}

// Waits for the command to exit. It is sent SIGTERM at the --duration limit; once it was sent a
// stop signal (at the limit, or one that zeus received), it has `kill_after_s` to exit before it
// is sent SIGKILL, and another stop signal zeus receives meanwhile sends SIGKILL at once.
ChildExit supervise(ChildProcess& child, SignalWatch& watch, const Clock& clock,
                    std::int64_t start_ns, double kill_after_s, RunOutcome& outcome) {
  std::optional<std::int64_t> kill_at_ns;  // set while the grace period runs
  int grace_signal = SIGTERM;              // the stop signal that started it
  const std::string grace = format_duration(kill_after_s);
  const auto start_grace_period = [&](int signal) {
    if (!kill_at_ns) {
      grace_signal = signal;
      const std::int64_t now_ns = clock.now_ns();
      const std::int64_t grace_ns = units::nanoseconds_from_seconds(kill_after_s);
      kill_at_ns = grace_ns > INT64_MAX - now_ns ? INT64_MAX : now_ns + grace_ns;
    }
  };
  const auto send_kill = [&](std::string reason) {
    if (outcome.kill_reason.empty()) {
      child.send_signal(SIGKILL);
      outcome.kill_reason = std::move(reason);
    }
  };
  while (true) {
    if (const auto exited = child.try_wait()) {
      return *exited;
    }
    std::optional<double> timeout_s;
    const auto wake_within = [&timeout_s](double seconds) {
      timeout_s = std::min(timeout_s.value_or(seconds), seconds);
    };
    if (outcome.limit_s && !outcome.limit_reached) {
      const double remaining_s =
          *outcome.limit_s - units::seconds_from_nanoseconds(clock.now_ns() - start_ns);
      if (remaining_s <= 0.0) {
        child.send_signal(SIGTERM);
        outcome.limit_reached = true;
        start_grace_period(SIGTERM);
      } else {
        wake_within(remaining_s);
      }
    }
    if (kill_at_ns && outcome.kill_reason.empty()) {
      const double remaining_s = units::seconds_from_nanoseconds(*kill_at_ns - clock.now_ns());
      if (remaining_s <= 0.0) {
        send_kill(kill_after_s > 0.0
                      ? fmt::format("sent SIGKILL after the {} grace period", grace)
                      : fmt::format("sent SIGKILL right after {}", signal_name(grace_signal)));
        continue;
      }
      wake_within(remaining_s);
    }
    // Woken by SIGCHLD, a signal zeus received (forwarded by the handler) or a deadline.
    const std::optional<int> signal = watch.next_signal(timeout_s);
    // A stop signal that was ignored before zeus is ignored by the command too: it asks nothing.
    if (signal && is_stop_signal(*signal) && !forwarding::was_ignored(*signal)) {
      if (kill_at_ns) {
        send_kill(fmt::format("sent SIGKILL on {} during the {} grace period", signal_name(*signal),
                              grace));
      } else {
        start_grace_period(*signal);
      }
    }
  }
}

int run(const MonitorArgs& args) {
  // Check every argument before touching a device or starting anything.
  std::optional<double> interval_s;
  if (!args.interval.empty()) {
    interval_s = parse_duration_s(args.interval, "--interval");
    if (*interval_s < monitor::kMinSamplingPeriodS) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--interval \"{}\" is below the shortest sampling period, {}",
                              args.interval, format_duration(monitor::kMinSamplingPeriodS)));
    }
  }
  std::optional<double> duration_s;
  if (!args.duration.empty()) {
    duration_s = positive_duration(args.duration, "--duration");
  }
  const double kill_after_s = parse_duration_s(args.kill_after, "--kill-after");
  // Before anything runs: a bad file or spec is a usage error, not a lost measurement.
  const std::shared_ptr<monitor::CarbonIntensityProvider> carbon_provider =
      args.carbon_intensity.empty() ? nullptr : carbon_provider_from_spec(args.carbon_intensity);
  const std::shared_ptr<monitor::ElectricityPriceProvider> price_provider =
      args.price.empty() ? nullptr : price_provider_from_spec(args.price);
  if (args.command.empty() && !duration_s) {
    throw Error(ErrorKind::kInvalidArgument,
                "zeus monitor needs a command to measure (zeus monitor [OPTIONS] -- CMD ARGS...) "
                "or a time to measure for (zeus monitor --duration 10s); see zeus monitor --help");
  }
  const std::optional<std::vector<int>> gpu_request = parse_device_request(args.gpus, "--gpus");
  const std::optional<std::vector<int>> cpu_request = parse_device_request(args.cpus, "--cpus");

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
      inputs = {args.timeline, args.timeline + ".windows.csv"};
    }
    output_file = open_for_writing(args.output, "--output", /*in_place=*/false, std::move(inputs));
  }

  monitor::ZeusMonitorOptions options;
  options.gpu_indices = gpu_indices;
  options.cpu_indices = cpu_indices;
  options.sampler_period_s = interval_s;
  if (!args.timeline.empty()) {
    // The measured window, for `zeus report` to shade on the timeline (ZeusMonitor's log format).
    options.log_file = args.timeline + ".windows.csv";
  }
  monitor::ZeusMonitor monitor(gpus, cpus.cpus, options);
  if (output_file && !options.log_file.empty()) {
    output_file->refuse_inputs({options.log_file});  // it exists now
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
    // The same providers as the summary's: a web service's cache then serves both.
    metrics_options.carbon_intensity = carbon_provider;
    metrics_options.electricity_price = price_provider;
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
  std::unique_ptr<TimelineWriter> timeline;
  std::unique_ptr<monitor::PowerSampler> sampler;
  if (!args.timeline.empty()) {
    const std::shared_ptr<Clock> clock = steady_clock();
    timeline = std::make_unique<TimelineWriter>(std::move(*timeline_file), clock->now_ns());
    if (!gpu_indices.empty()) {
      monitor::PowerSamplerOptions sampler_options;
      sampler_options.gpu_indices = gpu_indices;
      sampler_options.domains.clear();
      for (const monitor::PowerDomain domain :
           {monitor::PowerDomain::kDeviceInstant, monitor::PowerDomain::kDeviceAverage,
            monitor::PowerDomain::kMemoryAverage}) {
        if (domain_supported(gpus, gpu_indices, domain)) {
          sampler_options.domains.push_back(domain);
        }
      }
      if (sampler_options.domains.empty()) {
        throw Error(ErrorKind::kNotSupported,
                    "--timeline: the monitored GPUs support no power reading in common");
      }
      sampler_options.period_s = interval_s;
      sampler_options.clock = clock;
      sampler_options.on_sweep =
          [writer = timeline.get()](const std::vector<monitor::PowerSample>& sweep) {
            writer->write(sweep);
          };
      // Temperature rows when every monitored GPU reports one (changes only).
      sampler_options.temperature = temperature_supported(gpus, gpu_indices);
      sampler_options.on_temperature_change =
          [writer = timeline.get()](const std::vector<monitor::TemperatureSample>& changes) {
            writer->write(changes);
          };
      sampler = std::make_unique<monitor::PowerSampler>(gpus, std::move(sampler_options));
    }
  }

  // SIGCHLD wakes the wait when the command exits; kill/timeout signals are passed on to it, and
  // so are SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (which would otherwise kill zeus and leave it).
  SignalWatch watch(SignalWatchOptions{
      .wake_on_child_exit = true,
      .forward_to_child = true,
      .forwarded_signals = args.command.empty() ? std::vector<int>{} : kForwardedSignals});
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
    outcome.child =
        supervise(std::get<ChildProcess>(started), watch, *clock, start_ns, kill_after_s, outcome);
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
  std::optional<monitor::CarbonEmissionMeasurement> carbon;
  if (carbon_provider) {
    // A provider that fails (a web service down) costs the carbon figure, never the energy one.
    try {
      carbon = monitor::CarbonEmissionMonitor::emissions_of(
          measured, carbon_provider->intensity_over(start_unix_s, end_unix_s));
    } catch (const Error& error) {
      notes.push_back(fmt::format("no carbon emissions: {}", error.what()));
    }
  }
  std::optional<monitor::EnergyCostMeasurement> cost;
  if (price_provider) {
    try {
      cost = monitor::EnergyCostMonitor::cost_of(
          measured, price_provider->price_over(start_unix_s, end_unix_s),
          price_provider->currency());
    } catch (const Error& error) {
      notes.push_back(fmt::format("no electricity cost: {}", error.what()));
    }
  }
  if (metrics_server) {
    metrics_server->stop();
    device_metrics->stop();
  }
  std::vector<std::string> errors;
  if (sampler) {
    sampler->stop();
    try {
      sampler->rethrow_if_failed();
    } catch (const std::exception& error) {
      errors.push_back(fmt::format("the power timeline stopped early: {}", error.what()));
    }
  }
  if (timeline && !timeline->finish()) {
    errors.push_back(fmt::format("writing the power timeline to \"{}\" failed", args.timeline));
  }

  std::ostream& out = output_file ? output_file->stream() : static_cast<std::ostream&>(std::cerr);
  if (args.as_json) {
    write_json_summary(out, args, measured, outcome, carbon, cost, notes);
  } else {
    write_text_summary(out, args, measured, outcome, gpus, cpus, carbon, cost, notes);
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

}  // namespace

void add_monitor(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "monitor",
      "Run a command and print its time and energy per GPU, CPU package and DRAM, like "
      "`perf stat` (or measure the machine for --duration)");
  auto args = std::make_shared<MonitorArgs>();
  command->add_option("--gpus", args->gpus,
                      "GPUs to measure, e.g. 0,1 (indices as CUDA numbers them, after "
                      "CUDA_VISIBLE_DEVICES); default all");
  command->add_option("--cpus", args->cpus,
                      "CPU packages to measure through RAPL, e.g. 0,1; default all that can be "
                      "read (none, with a note, when RAPL is unavailable)");
  command->add_option("--interval", args->interval,
                      "Power sampling period for --timeline and for GPUs without an energy "
                      "counter, e.g. 100ms (at least 1ms; default inferred from the GPU)");
  command->add_option("--duration", args->duration,
                      "Without a command: measure for this long, e.g. 10s, 500ms, 2m. With a "
                      "command: a time limit, after which the command is sent SIGTERM");
  command
      ->add_option("--kill-after", args->kill_after,
                   "With a command: after it was sent SIGTERM (at --duration, or passed on from "
                   "zeus), send SIGKILL if it still runs this much later (0: at once)")
      ->capture_default_str();
  command->add_option("--timeline", args->timeline,
                      "Write the sampled GPU power to this CSV file "
                      "(timestamp,device,domain,watts,celsius; temperature rows have only "
                      "celsius), and the measured window to "
                      "FILE.windows.csv (ZeusMonitor's log format)");
  command->add_flag("--json", args->as_json, "Print the summary as one JSON object");
  command->add_option("--carbon-intensity", args->carbon_intensity,
                      "Add the carbon emissions (gCO2eq) to the summary, from gCO2eq/kWh given "
                      "as a number, a time series file (CSV timestamp,gco2eq_per_kwh or JSON), "
                      "or electricitymaps:ZONE (token from ELECTRICITYMAPS_TOKEN); docs/carbon.md");
  command->add_option("--price", args->price,
                      "Add the electricity cost to the summary, from a price per kWh given as a "
                      "number, a JSON time-of-use tariff file, or openei:LABEL@LAT,LON (a US "
                      "utility's rate from OpenEI, key from OPENEI_API_KEY); docs/cost.md");
  command->add_option("-o,--output", args->output,
                      "Write the summary to this file instead of standard error");
  command->add_option("--metrics-port", args->metrics_port,
                      "Serve GPU/CPU energy and power for Prometheus at "
                      "http://HOST:PORT/metrics while measuring (0: any free port, printed)");
  command
      ->add_option("--metrics-host", args->metrics_host,
                   "Address for --metrics-port (0.0.0.0: every interface)")
      ->capture_default_str();
  command->add_option("--powercap-root", args->powercap_root,
                      "Powercap sysfs root to search for RAPL zones (default /sys/class/powercap)");
  command->add_option("command", args->command,
                      "The command to run and its arguments; put -- before it");
  command->footer(
      "Forms: zeus monitor [OPTIONS] -- CMD [ARGS...]   or   zeus monitor [OPTIONS] --duration "
      "D\nThe summary goes to standard error (or --output), so the command's own output stays "
      "clean. Exit code: the command's; 127 when it cannot be started; 128+N when signal N "
      "killed it. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to zeus are passed on "
      "to the command; a second SIGINT/SIGTERM sends it SIGKILL at once.");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
