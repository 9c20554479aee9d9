// `zeus sensor-probe`: measures one GPU's sensor (docs/monitor.md, "Measuring a GPU's sensor").
// Alone it polls the readings for --duration and says how often each changes and what one read
// costs. With a load command (`-- CMD`) it records while CMD runs and reads CMD's load log
// (--load-log: CSV `kind,start_s,end_s,period_s` on CLOCK_MONOTONIC, the clock of Python's
// time.monotonic()), then estimates the sampling window, the averaging window and delay of the
// readings, and how counter and polled power agree on each square wave.
#include <fmt/format.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.hpp"
#include "cli/devices.hpp"
#include "common/csv.hpp"
#include "common/duration.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/sensor_probe.hpp"

namespace zeus::cli {
namespace {

struct SensorProbeArgs {
  int gpu = 0;
  std::string duration = "3s";
  std::string poll_interval = "0.5ms";
  std::string load_log;
  bool json = false;
  std::vector<std::string> command;
};

std::vector<device::LoadSpan> read_load_log(const std::string& path) {
  csv::Table table(csv::LineReader(path, "load log"));
  const std::vector<std::string_view> names = {"kind", "start_s", "end_s", "period_s"};
  const std::vector<std::size_t> columns =
      table.columns(names, "load log", "the load command writes one row per span");
  std::vector<device::LoadSpan> spans;
  csv::Table::Row row;
  while (table.next(row)) {
    device::LoadSpan span;
    span.kind = row.fields[columns[0]];
    span.start_s = table.number(row, columns[1]);
    span.end_s = table.number(row, columns[2]);
    span.period_s = table.number(row, columns[3]);
    if (span.end_s < span.start_s) {
      table.fail(row.line, "end_s is before start_s");
    }
    spans.push_back(std::move(span));
  }
  return spans;
}

// The mean counter power over the spans of one kind (each shortened by `settle_s` at its start).
std::optional<double> mean_power_over(const device::SensorTrace& trace,
                                      const std::vector<device::LoadSpan>& load,
                                      std::string_view kind, double settle_s) {
  double energy_j = 0.0;
  double time_s = 0.0;
  for (const device::LoadSpan& span : load) {
    if (span.kind != kind || span.end_s - span.start_s <= settle_s) {
      continue;
    }
    if (const auto watts =
            device::counter_mean_power_w(trace.energy_mj, span.start_s + settle_s, span.end_s)) {
      energy_j += *watts * (span.end_s - span.start_s - settle_s);
      time_s += span.end_s - span.start_s - settle_s;
    }
  }
  return time_s > 0.0 ? std::optional<double>(energy_j / time_s) : std::nullopt;
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json stats_json(const device::UpdateStats& stats) {
  return {{"samples", stats.samples},
          {"changes", stats.changes},
          {"period_s", optional_number(stats.period_s)},
          {"smallest_step", optional_number(stats.smallest_step)},
          {"changed_every_poll", stats.changed_every_poll}};
}

std::string period_text(const device::UpdateStats& stats, double poll_s) {
  if (!stats.period_s) {
    return fmt::format("changed {} times in {} polls: too few to say how often", stats.changes,
                       stats.samples);
  }
  if (stats.changed_every_poll) {
    return fmt::format("changes at every poll (every {:.2f} ms or more often)", poll_s * 1e3);
  }
  return fmt::format("changes every {:.1f} ms (median of {} changes)", *stats.period_s * 1e3,
                     stats.changes);
}

// Everything the load log lets us estimate, into `out` (text lines and JSON).
void analyze(const device::SensorTrace& trace, const std::vector<device::LoadSpan>& load,
             const device::UpdateStats& counter, const device::UpdateStats& instant,
             nlohmann::json& out, std::vector<std::string>& lines, nlohmann::json& parameters) {
  const auto idle_w = mean_power_over(trace, load, "idle", 0.2);
  const auto busy_w = mean_power_over(trace, load, "step", 1.0);
  out["idle_w"] = optional_number(idle_w);
  out["busy_w"] = optional_number(busy_w);
  if (!idle_w || !busy_w) {
    lines.push_back(
        "load log: no idle span or no step span measured by the counter; "
        "nothing more to estimate");
    return;
  }
  lines.push_back(fmt::format("load: idle {:.1f} W, busy {:.1f} W (counter)", *idle_w, *busy_w));
  if (*busy_w - *idle_w < 0.2 * *idle_w) {
    lines.push_back(
        fmt::format("the load raised the power by only {:.1f} W: bursts and steps "
                    "cannot be told from idle; nothing more to estimate",
                    *busy_w - *idle_w));
    return;
  }
  const double refresh_s = counter.period_s.value_or(0.1);
  const double sampling_period_s = std::max(refresh_s, instant.period_s.value_or(0.0));
  const device::BurstAnalysis bursts =
      device::analyze_bursts(trace.energy_mj, load, refresh_s, *idle_w, *busy_w, sampling_period_s);
  out["bursts"] = {{"count", bursts.bursts},
                   {"missed", bursts.missed},
                   {"length_s", bursts.burst_length_s},
                   {"expected_j", bursts.expected_j},
                   {"mean_seen_j", bursts.mean_seen_j},
                   {"sampling_period_s", sampling_period_s},
                   {"sampling_window_s", optional_number(bursts.sampling_window_s)}};
  if (bursts.bursts > 0) {
    lines.push_back(fmt::format(
        "bursts: {} of {:.1f} ms, {} missed by the counter; seen {:.2f} J each on average "
        "against {:.2f} J drawn",
        bursts.bursts, bursts.burst_length_s * 1e3, bursts.missed, bursts.mean_seen_j,
        bursts.expected_j));
    lines.push_back(
        bursts.sampling_window_s
            ? fmt::format("power sampling: about {:.1f} ms of every {:.1f} ms (estimate)",
                          *bursts.sampling_window_s * 1e3, sampling_period_s * 1e3)
            : std::string("power sampling: no burst was missed: sampled all the time, as far as "
                          "bursts of this length can tell"));
    parameters["power_sample_window_s"] = optional_number(bursts.sampling_window_s);
    parameters["power_sample_period_s"] =
        bursts.sampling_window_s ? nlohmann::json(sampling_period_s) : nlohmann::json(nullptr);
  }
  if (instant.period_s) {
    const device::ReadingBurstAnalysis seen = device::analyze_reading_bursts(
        trace.instant_power_mw, load, *idle_w, *busy_w, *instant.period_s, 0.3);
    out["instant_power_bursts"] = {{"count", seen.bursts},
                                   {"missed", seen.missed},
                                   {"min_lag_s", optional_number(seen.min_lag_s)},
                                   {"sampling_window_s", optional_number(seen.sampling_window_s)}};
    lines.push_back(fmt::format(
        "instant power: missed {} of {} bursts; shortest lag {}; {}", seen.missed, seen.bursts,
        seen.min_lag_s ? fmt::format("{:.0f} ms", *seen.min_lag_s * 1e3) : "-",
        seen.sampling_window_s
            ? fmt::format("it averages about {:.1f} ms of every {:.1f} ms (estimate)",
                          *seen.sampling_window_s * 1e3, *instant.period_s * 1e3)
            : std::string("it saw every burst")));
    parameters["instant_power_window_s"] = optional_number(seen.sampling_window_s);
    parameters["instant_power_period_s"] = *instant.period_s;
    if (seen.min_lag_s) {
      parameters["reading_delay_s"] = *seen.min_lag_s;
    }
  }
  for (const device::LoadSpan& span : load) {
    if (span.kind == "step") {
      const auto fast =
          device::step_response(trace.instant_power_mw, span.start_s, span.end_s, *idle_w, *busy_w);
      const auto slow =
          device::step_response(trace.average_power_mw, span.start_s, span.end_s, *idle_w, *busy_w);
      out["step"] = {{"instant_delay_s", optional_number(fast.delay_s)},
                     {"instant_rise_s", optional_number(fast.rise_s)},
                     {"average_delay_s", optional_number(slow.delay_s)},
                     {"average_rise_s", optional_number(slow.rise_s)}};
      lines.push_back(fmt::format(
          "step: instant power shows it after {} (10-90% in {}); average power after {} "
          "(10-90% in {})",
          fast.delay_s ? fmt::format("{:.0f} ms", *fast.delay_s * 1e3) : "never",
          fast.rise_s ? fmt::format("{:.0f} ms", *fast.rise_s * 1e3) : "-",
          slow.delay_s ? fmt::format("{:.0f} ms", *slow.delay_s * 1e3) : "never",
          slow.rise_s ? fmt::format("{:.0f} ms", *slow.rise_s * 1e3) : "-"));
      if (!parameters.contains("reading_delay_s")) {
        parameters["reading_delay_s"] = optional_number(fast.delay_s);
      }
      // A boxcar average of window A rises from a tenth to nine tenths in 0.8 A.
      parameters["average_power_window_s"] =
          slow.rise_s ? nlohmann::json(*slow.rise_s / 0.8) : nlohmann::json(nullptr);
      break;
    }
  }
  nlohmann::json squares = nlohmann::json::array();
  for (const device::LoadSpan& span : load) {
    if (span.kind != "square") {
      continue;
    }
    const auto counter_w = device::counter_mean_power_w(trace.energy_mj, span.start_s, span.end_s);
    if (!counter_w) {
      continue;
    }
    const double length_s = span.end_s - span.start_s;
    const double instant_w =
        device::integrate_power_j(trace.instant_power_mw, span.start_s, span.end_s) / length_s;
    const double naive_w =
        device::integrate_power_j(trace.instant_power_mw, span.start_s, span.end_s, 0.1) / length_s;
    const double average_w =
        device::integrate_power_j(trace.average_power_mw, span.start_s, span.end_s) / length_s;
    const auto off = [&](double watts) { return 100.0 * (watts - *counter_w) / *counter_w; };
    squares.push_back({{"period_s", span.period_s},
                       {"counter_w", *counter_w},
                       {"instant_polled_w", instant_w},
                       {"instant_every_100ms_w", naive_w},
                       {"average_polled_w", average_w}});
    lines.push_back(
        fmt::format("square wave {:>6.0f} ms: counter {:7.1f} W; instant power polled {:+6.1f}%, "
                    "every 100 ms {:+6.1f}%; average power {:+6.1f}%",
                    span.period_s * 1e3, *counter_w, off(instant_w), off(naive_w), off(average_w)));
  }
  out["square_waves"] = squares;
}

int run(const SensorProbeArgs& args) {
  const double duration_s = parse_duration_s(args.duration, "--duration");
  const double poll_s = parse_duration_s(args.poll_interval, "--poll-interval");
  if (!(poll_s >= 1e-4 && poll_s <= 1.0)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("--poll-interval \"{}\" must be from 0.1 ms to 1 s", args.poll_interval));
  }
  if (args.command.empty() && !args.load_log.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "--load-log names the log of a load command: give the command after --");
  }
  const device::Gpus& gpus = device::get_gpus();
  if (gpus.empty()) {
    throw Error(ErrorKind::kNotSupported, "no GPU found to probe; `zeus show-env` says why");
  }
  const int index = select_gpus(std::vector<int>{args.gpu}, gpus).front();
  device::Gpu& gpu = gpus.at(index);
  const std::shared_ptr<Clock> clock = steady_clock();

  device::SensorTrace trace;
  if (args.command.empty()) {
    trace = device::record_sensor_trace(gpu, *clock, duration_s, poll_s);
  } else {
    std::atomic<bool> done{false};
    std::thread recorder([&] {
      trace = device::record_sensor_trace(gpu, *clock, 3600.0, poll_s, [&] { return done.load(); });
    });
    SignalWatch watch(SignalWatchOptions{.wake_on_child_exit = true,
                                         .forward_to_child = true,
                                         .forwarded_signals = passed_on_signals()});
    auto started = ChildProcess::start(args.command);
    if (auto* failure = std::get_if<ChildProcess::StartFailure>(&started)) {
      done = true;
      recorder.join();
      throw Error(ErrorKind::kInvalidArgument, failure->message);
    }
    const SupervisedExit ended =
        supervise_child(std::get<ChildProcess>(started), watch, *clock, {.kill_after_s = 10.0});
    done = true;
    recorder.join();
    if (ended.exit.exit_code != 0) {
      throw Error(ErrorKind::kUnavailable,
                  fmt::format("the load command {} ended with code {}", shell_join(args.command),
                              ended.exit.exit_code));
    }
  }
  const device::UpdateStats counter = device::update_stats(trace.energy_mj);
  const device::UpdateStats instant = device::update_stats(trace.instant_power_mw);
  const device::UpdateStats average = device::update_stats(trace.average_power_mw);
  constexpr int kReads = 2000;
  constexpr double kReadTimingS = 1.0;  // at most a second per reading's cost
  const double energy_read_s = gpu.supports_energy_counter()
                                   ? device::mean_read_cost_s(*clock, kReads, kReadTimingS,
                                                              [&] { (void)gpu.total_energy_mj(); })
                                   : 0.0;
  const double power_read_s =
      device::mean_read_cost_s(*clock, kReads, kReadTimingS, [&] { (void)gpu.instant_power_mw(); });

  nlohmann::json out;
  out["gpu"] = {{"index", index}, {"name", gpu.name()}};
  out["poll_interval_s"] = poll_s;
  out["energy_counter"] = stats_json(counter);
  out["instant_power"] = stats_json(instant);
  out["average_power"] = stats_json(average);
  out["read_cost_s"] = {{"energy", energy_read_s}, {"power", power_read_s}};
  nlohmann::json parameters;
  if (counter.changed_every_poll) {
    // Faster than the polls (an ideal sensor): the period and the resolution are not seen.
    parameters["counter_refresh_s"] = nullptr;
    parameters["counter_refresh_at_most_s"] = poll_s;
    parameters["counter_resolution_mj"] = nullptr;
  } else {
    // Each step holds a whole refresh period's energy: the resolution below it is not seen.
    parameters["counter_refresh_s"] = optional_number(counter.period_s);
    parameters["counter_smallest_step_mj"] = optional_number(counter.smallest_step);
  }
  std::vector<std::string> lines;
  lines.push_back(fmt::format("GPU {}: {}", index, gpu.name()));
  lines.push_back("energy counter: " + (gpu.supports_energy_counter()
                                            ? period_text(counter, poll_s) +
                                                  fmt::format(", smallest step {:g} mJ",
                                                              counter.smallest_step.value_or(0))
                                            : std::string("none")));
  lines.push_back("instant power: " + period_text(instant, poll_s));
  lines.push_back("average power: " + period_text(average, poll_s));
  lines.push_back(fmt::format("one read: energy {:.2f} us, power {:.2f} us", energy_read_s * 1e6,
                              power_read_s * 1e6));
  if (!args.load_log.empty()) {
    analyze(trace, read_load_log(args.load_log), counter, instant, out, lines, parameters);
  }
  out["sensor_parameters"] = parameters;
  out["summary"] = lines;
  if (args.json) {
    std::cout << out.dump(2) << '\n';
  } else {
    for (const std::string& line : lines) {
      std::cout << line << '\n';
    }
    std::cout << "sensor parameters: " << parameters.dump() << '\n';
  }
  return kExitOk;
}

}  // namespace

void add_sensor_probe(CLI::App& app, Action& action) {
  auto args = std::make_shared<SensorProbeArgs>();
  CLI::App* sub = app.add_subcommand(
      "sensor-probe",
      "Measure a GPU's sensor: how often its energy counter and power readings change, what a "
      "read costs, and with a load command (-- CMD) and its --load-log, the power sampling "
      "window and how counter and polled power agree");
  sub->add_option("--gpu", args->gpu, "The GPU to probe (default 0)");
  sub->add_option("--duration", args->duration,
                  "How long to poll without a load command (default 3s)");
  sub->add_option("--poll-interval", args->poll_interval, "Time between polls (default 0.5ms)");
  sub->add_option("--load-log", args->load_log,
                  "The CSV log the load command writes: kind,start_s,end_s,period_s");
  sub->add_flag("--json", args->json, "Print JSON");
  sub->add_option("command", args->command, "The load command, after --");
  sub->callback([args, &action] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
