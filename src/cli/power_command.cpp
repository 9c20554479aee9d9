// `zeus power`: live GPU power, one line per interval, until interrupted; then the energy
// integrated over the same power domain.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::cli {
namespace {

// The sampler never polls slower than this, so that the integrated energy follows the power
// closely even when lines are printed rarely.
constexpr double kMaxSamplingPeriodS = 0.1;

struct PowerArgs {
  std::string gpus;
  std::string interval = "1s";
  std::string domain = "device_instant";
  std::string duration;
};

// Local time with milliseconds, e.g. 2025-01-31T14:05:09.123.
std::string local_iso_time() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto milliseconds =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  const std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &local);
  return fmt::format("{}.{:03}", std::string_view(text, length), milliseconds);
}

int run(const PowerArgs& args) {
  const double interval_s = parse_duration_s(args.interval, "--interval");
  if (interval_s < monitor::kMinSamplingPeriodS) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--interval \"{}\" is below the shortest sampling period, {}",
                            args.interval, format_duration(monitor::kMinSamplingPeriodS)));
  }
  std::optional<double> duration_s;
  if (!args.duration.empty()) {
    duration_s = parse_duration_s(args.duration, "--duration");
    if (*duration_s <= 0.0) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--duration \"{}\" must be longer than zero", args.duration));
    }
  }
  const monitor::PowerDomain domain = monitor::parse_power_domain(args.domain);
  const std::optional<std::vector<int>> gpu_request = parse_device_request(args.gpus, "--gpus");

  const device::Gpus& gpus = device::get_gpus();
  if (gpus.empty()) {
    throw Error(ErrorKind::kNotSupported,
                "no GPU found, so there is no power to show; `zeus show-env` says why");
  }
  const std::vector<int> gpu_indices = select_gpus(gpu_request, gpus);

  SignalWatch watch;
  const std::shared_ptr<Clock> clock = steady_clock();
  monitor::PowerSamplerOptions options;
  options.gpu_indices = gpu_indices;
  options.domains = {domain};
  options.period_s = std::min(interval_s, kMaxSamplingPeriodS);
  options.clock = clock;
  // Throws Error(kNotSupported) naming the GPU when the domain cannot be read.
  monitor::PowerSampler sampler(gpus, std::move(options));

  const std::int64_t start_ns = clock->now_ns();
  const auto elapsed_s = [&] {
    return units::seconds_from_nanoseconds(clock->now_ns() - start_ns);
  };
  double next_line_s = interval_s;
  while (!watch.stop_signal()) {
    const double now_s = elapsed_s();
    if (duration_s && now_s >= *duration_s) {
      break;
    }
    if (now_s >= next_line_s) {
      sampler.rethrow_if_failed();
      std::string line = local_iso_time();
      bool any = false;
      for (const int index : gpu_indices) {
        const std::optional<double> power_w = sampler.power_w(domain, index);
        any = any || power_w.has_value();
        line += power_w ? fmt::format("  GPU{} {:.1f} W", index, *power_w)
                        : fmt::format("  GPU{} ? W", index);
      }
      if (any) {  // nothing sampled yet: skip the line, as the reference does
        std::cout << line << std::endl;
      }
      // The next multiple of the interval (lines are skipped, not bunched, after a stall).
      while (next_line_s <= now_s) {
        next_line_s += interval_s;
      }
    }
    double wait_s = next_line_s - now_s;
    if (duration_s) {
      wait_s = std::min(wait_s, *duration_s - now_s);
    }
    watch.wait(wait_s);
  }
  const std::int64_t end_ns = clock->now_ns();
  sampler.stop();
  sampler.rethrow_if_failed();

  const double time_s = units::seconds_from_nanoseconds(end_ns - start_ns);
  const std::optional<int> stop_signal = watch.stop_signal();
  std::cout << fmt::format(
      "\n Energy over {:.3f} s ({} power, sampled every {}{}):\n\n", time_s,
      monitor::power_domain_name(domain), format_duration(sampler.period_s()),
      stop_signal ? ", interrupted by " + signal_name(*stop_signal) : std::string());
  double total_j = 0.0;
  for (const int index : gpu_indices) {
    std::string name = "?";
    try {
      name = gpus.at(index).name();
    } catch (const Error&) {
    }
    const std::optional<double> end_j = sampler.cumulative_energy_j(domain, index, end_ns);
    if (!end_j) {
      std::cout << fmt::format("   GPU {:<3} {:<24} {:>14} J\n", index, name, "no sample");
      continue;
    }
    const double energy_j =
        *end_j - sampler.cumulative_energy_j(domain, index, start_ns).value_or(0);
    total_j += energy_j;
    std::cout << fmt::format("   GPU {:<3} {:<24} {:>14.3f} J {:>8.1f} W\n", index, name, energy_j,
                             time_s > 0.0 ? energy_j / time_s : 0.0);
  }
  if (gpu_indices.size() > 1) {
    std::cout << fmt::format("   {:<7} {:<24} {:>14.3f} J {:>8.1f} W\n", "total", "", total_j,
                             time_s > 0.0 ? total_j / time_s : 0.0);
  }
  std::cout << std::endl;
  return kExitOk;
}

}  // namespace

void add_power(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "power",
      "Print the power of every GPU once per interval until interrupted (Ctrl-C) or --duration, "
      "then the energy integrated over the same power domain");
  auto args = std::make_shared<PowerArgs>();
  command->add_option("--gpus", args->gpus,
                      "GPUs to show, e.g. 0,1 (indices after CUDA_VISIBLE_DEVICES); default all");
  command
      ->add_option("--interval", args->interval,
                   "How often to print a line, e.g. 1s, 500ms (at least 1ms)")
      ->capture_default_str();
  command
      ->add_option("--domain", args->domain,
                   "Power domain: device_instant (instant), device_average (average) or "
                   "memory_average (memory)")
      ->capture_default_str();
  command->add_option("--duration", args->duration,
                      "Stop after this long, e.g. 10s, 2m (default: until SIGINT or SIGTERM)");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
