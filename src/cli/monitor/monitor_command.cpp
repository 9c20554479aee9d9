// `zeus monitor`: the time and energy of a command (like `perf stat`), or of the machine for a
// while, per GPU, CPU package and DRAM. This file: its command line; the run is monitor_run.cpp
// (monitor_command.hpp lists the parts).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>

#include "cli/arguments.hpp"
#include "cli/carbon_spec.hpp"
#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "cli/monitor/monitor_command.hpp"
#include "cli/price_spec.hpp"
#include "zeus/common/error.hpp"

namespace zeus::cli {
namespace monitor_command {
namespace {

double positive_duration(const std::string& text, std::string_view what) {
  const double duration_s = parse_duration_s(text, what);
  if (duration_s <= 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} \"{}\" must be longer than zero", what, text));
  }
  return duration_s;
}

}  // namespace

Plan check_arguments(const MonitorArgs& args) {
  Plan plan;
  if (!args.interval.empty()) {
    plan.interval_s = parse_duration_s(args.interval, "--interval");
    if (*plan.interval_s < monitor::kMinSamplingPeriodS) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--interval \"{}\" is below the shortest sampling period, {}",
                              args.interval, format_duration(monitor::kMinSamplingPeriodS)));
    }
  }
  if (!args.duration.empty()) {
    plan.duration_s = positive_duration(args.duration, "--duration");
  }
  plan.kill_after_s = parse_duration_s(args.kill_after, "--kill-after");
  // Before anything runs: a bad file or spec is a usage error, not a lost measurement.
  plan.carbon_provider =
      args.carbon_intensity.empty() ? nullptr : carbon_provider_from_spec(args.carbon_intensity);
  plan.price_provider = args.price.empty() ? nullptr : price_provider_from_spec(args.price);
  if (args.command.empty() && !plan.duration_s) {
    throw Error(ErrorKind::kInvalidArgument,
                "zeus monitor needs a command to measure (zeus monitor [OPTIONS] -- CMD ARGS...) "
                "or a time to measure for (zeus monitor --duration 10s); see zeus monitor --help");
  }
  plan.gpu_request = parse_device_request(args.gpus, "--gpus");
  plan.cpu_request = parse_device_request(args.cpus, "--cpus");
  return plan;
}

}  // namespace monitor_command

void add_monitor(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "monitor",
      "Run a command and print its time and energy per GPU, CPU package and DRAM, like "
      "`perf stat` (or measure the machine for --duration)");
  auto args = std::make_shared<monitor_command::MonitorArgs>();
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
  command->add_flag("--cross-check", args->cross_check,
                    "Before measuring, compare each GPU's energy counter with its power polled "
                    "every 10 ms for 1 s, and say in the summary whether they agree within 10% "
                    "and which to trust");
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
  command->callback([&action, args] {
    action = [args] {
      return monitor_command::run(*args, monitor_command::check_arguments(*args));
    };
  });
}

}  // namespace zeus::cli
