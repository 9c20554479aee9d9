#include "zeus/monitor/accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/load_profile.hpp"
#include "zeus/device/sensor_gpu.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/profile.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::monitor {
namespace {

using device::LoadProfile;

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kPollNs = 100 * kMs;  // the naive poller's period
constexpr std::int64_t kPollSpanNs = 10'000 * kMs;
constexpr std::int64_t kWarmNs = 2'000 * kMs;  // the load runs this long before the windows
constexpr std::int64_t kLongestNs = 60'000 * kMs;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

struct Load {
  std::string name;
  std::optional<double> period_s;  // a square wave's; none: the bursts
};

// Bursts of 20-60 ms after gaps of 50-250 ms, from a fixed linear congruential sequence (the
// same every run), over the longest study.
LoadProfile irregular_bursts() {
  std::vector<LoadProfile::Burst> bursts;
  std::uint64_t state = 0x2545F4914F6CDD1DULL;
  const auto next = [&state](std::int64_t low_ms, std::int64_t high_ms) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (low_ms + static_cast<std::int64_t>((state >> 33) %
                                               static_cast<std::uint64_t>(high_ms - low_ms + 1))) *
           kMs;
  };
  for (std::int64_t t_ns = 0; t_ns < kWarmNs + kLongestNs + 2'000 * kMs;) {
    const std::int64_t start_ns = t_ns + next(50, 250);
    const std::int64_t length_ns = next(20, 60);
    bursts.push_back({start_ns, length_ns});
    t_ns = start_ns + length_ns;
  }
  return LoadProfile::bursts(std::move(bursts));
}

double relative_error(double measured, double truth) {
  return std::abs(measured / truth - 1.0);
}

ZeusMonitorOptions monitor_options(std::shared_ptr<Clock> clock) {
  ZeusMonitorOptions options;
  options.clock = std::move(clock);
  options.start_sampler_thread = false;
  return options;
}

struct Rig {
  Rig(const device::SimulatedGpuModel& model, const device::SensorParameters& parameters,
      std::int64_t phase_ns)
      : clock(std::make_shared<ManualClock>()),
        truth(std::make_shared<device::SimulatedGpu>(model, 0, clock)),
        sensor(std::make_shared<device::SensorGpu>(truth, parameters, phase_ns)),
        monitor(device::Gpus({sensor}, {0}), {}, monitor_options(clock)) {}
  void at(std::int64_t t_ns) {
    clock->advance_ns(std::max<std::int64_t>(0, t_ns - clock->now_ns()));
  }
  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<device::SimulatedGpu> truth;
  std::shared_ptr<device::SensorGpu> sensor;
  ZeusMonitor monitor;
};

// The poller and the three windows, on one timeline.
void measure_windows(Rig& rig, const LoadProfile& load, int placement, AccuracyRow& row) {
  rig.truth->set_load_profile(load);
  const std::int64_t begin_ns = kWarmNs + placement * 37 * kMs / 10;
  const std::int64_t longer_ns = placement * 13 * kMs;
  rig.at(begin_ns);
  const double begin_j = rig.truth->exact_energy_j();
  struct Window {
    const char* name;
    std::int64_t end_ns;
    double* worst;
  };
  Window windows[] = {{"1s", begin_ns + 1'000 * kMs + longer_ns, &row.window_1s},
                      {"10s", begin_ns + 10'000 * kMs + longer_ns, &row.window_10s},
                      {"60s", begin_ns + kLongestNs + longer_ns, &row.window_60s}};
  for (const Window& window : windows) {
    rig.monitor.begin_window(window.name, {.sync_execution = false});
  }
  double instant_j = 0.0;
  double average_j = 0.0;
  std::int64_t poll_ns = begin_ns;
  for (const Window& window : windows) {
    while (poll_ns < begin_ns + kPollSpanNs && poll_ns < window.end_ns) {
      rig.at(poll_ns);
      instant_j +=
          units::joules_at(units::watts_from_milliwatts(rig.sensor->instant_power_mw()), kPollNs);
      average_j +=
          units::joules_at(units::watts_from_milliwatts(rig.sensor->average_power_mw()), kPollNs);
      poll_ns += kPollNs;
      if (poll_ns == begin_ns + kPollSpanNs) {
        rig.at(poll_ns);
        const double truth_j = rig.truth->exact_energy_j() - begin_j;
        row.poll_instant = std::max(row.poll_instant, relative_error(instant_j, truth_j));
        row.poll_average = std::max(row.poll_average, relative_error(average_j, truth_j));
      }
    }
    rig.at(window.end_ns);
    const double measured_j =
        rig.monitor.end_window(window.name, {.sync_execution = false}).total_energy_j();
    const double truth_j = rig.truth->exact_energy_j() - begin_j;
    *window.worst = std::max(*window.worst, relative_error(measured_j, truth_j));
  }
}

// zeus::monitor::measure over iterations of one load period each (busy for half of it).
double measure_profile(Rig& rig, double period_s, int placement, int shifts) {
  const std::int64_t period_ns = units::nanoseconds_from_seconds(period_s);
  const auto& model = rig.truth->model();
  const double truth_j =
      units::joules_at(units::watts_from_milliwatts(model.peak_power_mw), period_ns / 2) +
      units::joules_at(units::watts_from_milliwatts(model.idle_power_mw),
                       period_ns - period_ns / 2);
  ProfileTarget target;
  target.monitor = &rig.monitor;
  target.clock = rig.clock;
  target.iteration = [&rig, period_ns] {
    const std::int64_t now_ns = rig.clock->now_ns();
    rig.truth->set_load_profile(LoadProfile::bursts({{now_ns, period_ns / 2}}));
    rig.clock->advance_ns(period_ns);
  };
  MeasureOptions options;
  options.measurement_duration_s = 10.0 + placement * 0.013;
  options.cooldown_duration_s = 1.0;
  options.iteration_duration_s = period_s;
  options.num_warmup_iterations = static_cast<int>(std::ceil(0.2 / period_s));
  // Shifts spread over the sampling period, or the counter's refresh period where the power is
  // sampled all the time.
  const auto& sensor = rig.sensor->parameters();
  options.phase_shifts = {.count = shifts,
                          .sampling_period_s = sensor.power_sample_period_s > 0.0
                                                   ? sensor.power_sample_period_s
                                                   : std::max(0.001, sensor.counter_refresh_s)};
  const TrialResult trial = measure(target, options);
  return relative_error(trial.energy_per_iteration_j, truth_j);
}

}  // namespace

std::vector<AccuracyRow> accuracy_study(const AccuracyOptions& options) {
  const device::SimulatedGpuModel& model = device::simulated_gpu_model(options.model_key);
  const auto parameters = device::published_sensor_parameters(model.name);
  if (!parameters || options.placements < 1 || options.placements > 64) {
    throw Error(ErrorKind::kInvalidArgument,
                "accuracy study: needs a model with published sensor parameters (" + model.key +
                    ") and 1 to 64 placements");
  }
  const std::int64_t sampling_ns = std::max<std::int64_t>(
      1, units::nanoseconds_from_seconds(
             std::max(parameters->power_sample_period_s, parameters->counter_refresh_s)));
  std::vector<Load> loads;
  for (const int period_ms : {10, 20, 50, 100, 200, 500, 52, 101}) {
    loads.push_back({fmt::format("square {} ms", period_ms), period_ms / 1000.0});
  }
  loads.push_back({"bursts 20-60 ms", std::nullopt});

  std::vector<AccuracyRow> rows;
  for (const Load& load : loads) {
    AccuracyRow row;
    row.load = load.name;
    const bool iterations = load.period_s && *load.period_s < 0.1;
    row.profile = iterations ? 0.0 : kNan;
    row.profile_shifted = iterations ? 0.0 : kNan;
    for (int k = 0; k < options.placements; ++k) {
      const std::int64_t phase_ns = sampling_ns * k / options.placements;
      {
        Rig rig(model, *parameters, phase_ns);
        measure_windows(
            rig, load.period_s ? LoadProfile::square_wave(*load.period_s, 0.5) : irregular_bursts(),
            k, row);
      }
      if (iterations) {
        Rig single(model, *parameters, phase_ns);
        single.at(kWarmNs + k * 37 * kMs / 10);
        row.profile = std::max(row.profile, measure_profile(single, *load.period_s, k, 1));
        Rig shifted(model, *parameters, phase_ns);
        shifted.at(kWarmNs + k * 37 * kMs / 10);
        row.profile_shifted =
            std::max(row.profile_shifted, measure_profile(shifted, *load.period_s, k, 4));
      }
    }
    rows.push_back(row);
  }
  return rows;
}

std::string accuracy_table_markdown(const std::vector<AccuracyRow>& rows) {
  const auto percent = [](double value) {
    return std::isnan(value) ? std::string("—") : fmt::format("{:.1f} %", 100.0 * value);
  };
  std::string out =
      "| load | poll instant, 100 ms | poll average, 100 ms | window 1 s | window 10 s | "
      "window 60 s | profile | profile, 4 phase shifts |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const AccuracyRow& row : rows) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", row.load,
                       percent(row.poll_instant), percent(row.poll_average), percent(row.window_1s),
                       percent(row.window_10s), percent(row.window_60s), percent(row.profile),
                       percent(row.profile_shifted));
  }
  return out;
}

}  // namespace zeus::monitor
