// The thermally stable profiler on thermal simulated GPUs driven by a manual clock.
#include "zeus/monitor/profile.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using zeus::ErrorKind;
using zeus::ManualClock;
using zeus::device::SimulatedGpu;
using zeus::device::SimulatedGpuModel;
using zeus::monitor::MeasureOptions;
using zeus::monitor::ProfileTarget;
using zeus::monitor::SweepOptions;
using zeus::monitor::ZeusMonitor;
using zeus::monitor::ZeusMonitorOptions;

constexpr double kUtilization = 0.8;  // 575 W on an H200: below its 700 W limit with leakage
constexpr double kIterationS = 0.5;

// One thermal H200 whose workload keeps it busy for 0.5 s per iteration and idle in between.
struct ThermalRig {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  SimulatedGpuModel model;
  std::shared_ptr<SimulatedGpu> gpu;
  zeus::device::Gpus gpus;
  std::unique_ptr<ZeusMonitor> monitor;

  explicit ThermalRig(bool thermal = true) : model(zeus::device::simulated_gpu_model("h200")) {
    model.thermal_enabled = thermal;
    gpu = std::make_shared<SimulatedGpu>(model, 0, clock);
    gpus = zeus::device::Gpus({gpu}, {0});
    ZeusMonitorOptions options;
    options.clock = clock;
    options.start_sampler_thread = false;
    monitor = std::make_unique<ZeusMonitor>(gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{},
                                            options);
  }

  ProfileTarget target() {
    return ProfileTarget{.iteration =
                             [this] {
                               gpu->set_utilization(kUtilization);
                               clock->advance_s(kIterationS);
                               gpu->set_utilization(0.0);
                             },
                         .monitor = monitor.get(),
                         .gpus = &gpus,
                         .clock = clock};
  }

  // Energy per iteration of a GPU that has run the workload forever (no idle gaps).
  double steady_energy_per_iteration_j() const {
    const double r_c_per_mw = model.thermal.thermal_resistance_c_per_w / 1000.0;
    const double a_mw_per_c = model.idle_power_mw * model.thermal.leakage_per_c;
    const double demand_mw =
        model.idle_power_mw + kUtilization * (model.peak_power_mw - model.idle_power_mw);
    const double rise_c = r_c_per_mw * demand_mw / (1.0 - r_c_per_mw * a_mw_per_c);
    return kIterationS * (demand_mw + a_mw_per_c * rise_c) / 1000.0;
  }
};

double relative_spread(const std::vector<double>& values) {
  double mean = 0.0;
  for (const double v : values) {
    mean += v;
  }
  mean /= static_cast<double>(values.size());
  double squares = 0.0;
  for (const double v : values) {
    squares += (v - mean) * (v - mean);
  }
  return std::sqrt(squares / static_cast<double>(values.size() - 1)) / mean;
}

TEST(Profile, ShortWindowsWithoutCooldownDriftWhileTheGpuWarms) {
  ThermalRig rig;
  std::vector<double> energies_j;
  std::vector<double> temperatures_c;
  for (int i = 0; i < 10; ++i) {
    const auto trial = zeus::monitor::measure(rig.target(), {.measurement_duration_s = 2.0,
                                                             .cooldown_duration_s = 0.0,
                                                             .num_warmup_iterations = 0,
                                                             .iteration_duration_s = kIterationS});
    EXPECT_EQ(trial.iterations, 4);
    EXPECT_NEAR(trial.time_per_iteration_s, kIterationS, 1e-9);
    EXPECT_GE(trial.temperature_after_c, trial.temperature_before_c);
    energies_j.push_back(trial.energy_per_iteration_j);
    temperatures_c.push_back(trial.temperature_after_c);
  }
  for (std::size_t i = 1; i < energies_j.size(); ++i) {
    EXPECT_GT(energies_j[i], energies_j[i - 1]) << i;
  }
  EXPECT_GT(temperatures_c.back(), temperatures_c.front() + 10.0);
  EXPECT_GT(relative_spread(energies_j), 0.005);
  EXPECT_LT(energies_j.back(), 0.99 * rig.steady_energy_per_iteration_j());
}

TEST(Profile, FindsDurationsThatRemoveTheDriftAndMeasureReproducesTheSteadyState) {
  ThermalRig rig;
  const SweepOptions measurement{.search_range_s = {2, 5, 10, 20, 40, 80, 160, 320},
                                 .fixed_duration_s = 10.0,
                                 .trial_stddev_threshold = 0.001,
                                 .iteration_duration_s = kIterationS};
  const SweepOptions cooldown{.search_range_s = {0, 1, 2, 5, 10, 20, 40},
                              .trial_stddev_threshold = 0.001,
                              .iteration_duration_s = kIterationS};
  const auto parameters = zeus::monitor::profile_parameters(rig.target(), measurement, cooldown);

  // The short candidates were rejected because energy per iteration followed the temperature.
  const auto& sweep = parameters.measurement_report.sweep;
  ASSERT_GE(sweep.size(), 2u);
  EXPECT_FALSE(sweep.front().valid);
  EXPECT_GT(sweep.front().relative_stddev, 0.001);
  EXPECT_TRUE(sweep.back().valid);
  EXPECT_EQ(parameters.measurement_duration_s, sweep.back().candidate_s);
  EXPECT_GT(parameters.measurement_duration_s, 2.0);
  ASSERT_FALSE(parameters.cooldown_report.sweep.empty());
  EXPECT_TRUE(parameters.cooldown_report.sweep.back().valid);
  EXPECT_EQ(parameters.cooldown_duration_s, parameters.cooldown_report.sweep.back().candidate_s);
  EXPECT_EQ(parameters.measurement_report.sweep.front().trials.size(), 10u);

  // measure() with the chosen durations is reproducible and close to the steady state.
  const MeasureOptions chosen{.measurement_duration_s = parameters.measurement_duration_s,
                              .cooldown_duration_s = parameters.cooldown_duration_s,
                              .iteration_duration_s = kIterationS};
  std::vector<double> energies_j;
  for (int i = 0; i < 5; ++i) {
    energies_j.push_back(zeus::monitor::measure(rig.target(), chosen).energy_per_iteration_j);
  }
  EXPECT_LT(relative_spread(energies_j), 0.001);
  const double steady_j = rig.steady_energy_per_iteration_j();
  EXPECT_NEAR(energies_j.back(), steady_j, 0.01 * steady_j);
  // A cold GPU measured briefly is biased low by more than that tolerance.
  ThermalRig cold;
  const double cold_j = zeus::monitor::measure(cold.target(), {.measurement_duration_s = 2.0,
                                                               .cooldown_duration_s = 0.0,
                                                               .num_warmup_iterations = 0,
                                                               .iteration_duration_s = kIterationS})
                            .energy_per_iteration_j;
  EXPECT_LT(cold_j, 0.97 * steady_j);
}

TEST(Profile, WithoutTheThermalModelTheFirstCandidateIsValid) {
  ThermalRig rig(/*thermal=*/false);
  struct Seen {
    double candidate_s;
    int trial;
    int trials;
    std::int64_t iterations;
  };
  std::vector<Seen> seen;
  const auto report = zeus::monitor::profile_measurement_duration(
      rig.target(), {.num_trials = 3,
                     .num_warmup_trials = 1,
                     .num_calibration_iterations = 4,
                     .on_trial = [&](double candidate_s, int trial, int trials,
                                     const zeus::monitor::TrialResult& result) {
                       seen.push_back({candidate_s, trial, trials, result.iterations});
                     }});
  // One warm-up trial at the longest candidate (10 s: 20 iterations), then 3 trials of 1 s.
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(std::isnan(seen[0].candidate_s));
  EXPECT_EQ(seen[0].trials, 1);
  EXPECT_EQ(seen[0].iterations, 20);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(seen[i].candidate_s, 1.0);
    EXPECT_EQ(seen[i].trial, i - 1);
    EXPECT_EQ(seen[i].trials, 3);
    EXPECT_EQ(seen[i].iterations, 2);
  }
  EXPECT_NEAR(report.iteration_duration_s, kIterationS, 1e-9);  // calibrated
  ASSERT_EQ(report.sweep.size(), 1u);
  EXPECT_EQ(report.chosen_s, 1.0);
  const auto& result = report.sweep.front();
  EXPECT_EQ(result.trials.size(), 3u);
  EXPECT_EQ(result.measurement_duration_s, 1.0);
  EXPECT_EQ(result.cooldown_duration_s, 10.0);
  EXPECT_NEAR(result.mean_energy_per_iteration_j, kIterationS * 575.0, 1e-2);
  EXPECT_NEAR(result.mean_time_s, 1.0, 1e-9);
  // The default cooldown (10 s) was slept before each counted trial, not the warm-up one.
  EXPECT_EQ(rig.clock->slept_ns(), 3 * 10'000'000'000LL);

  // The reference's rule: the threshold in joules.
  ThermalRig warm;
  const auto absolute = zeus::monitor::profile_measurement_duration(
      warm.target(), {.search_range_s = {2},
                      .fixed_duration_s = 0.0,
                      .num_warmup_trials = 0,
                      .trial_stddev_threshold = 1.0,
                      .relative_threshold = false,
                      .num_warmup_iterations = 0,
                      .iteration_duration_s = kIterationS});
  ASSERT_EQ(absolute.sweep.size(), 1u);
  EXPECT_EQ(absolute.sweep.front().valid,
            absolute.sweep.front().stddev_energy_per_iteration_j < 1.0);
  EXPECT_GT(absolute.sweep.front().stddev_energy_per_iteration_j, 0.0);
}

TEST(Profile, NoValidCandidateIsAnErrorNamingTheRange) {
  ThermalRig rig;
  try {
    zeus::monitor::profile_parameters(rig.target(), {.search_range_s = {1, 2},
                                                     .fixed_duration_s = 0.0,
                                                     .num_warmup_trials = 0,
                                                     .trial_stddev_threshold = 1e-6,
                                                     .num_warmup_iterations = 0,
                                                     .iteration_duration_s = kIterationS});
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(error.what()).find("[1, 2] s"), std::string::npos) << error.what();
  }
  // With the threshold in joules, the best spread it names is in joules too: the smallest
  // candidate's sample standard deviation, not its relative spread.
  ThermalRig absolute_rig;
  const zeus::monitor::SweepOptions absolute{.search_range_s = {1},
                                             .fixed_duration_s = 0.0,
                                             .num_warmup_trials = 0,
                                             .trial_stddev_threshold = 1e-9,
                                             .relative_threshold = false,
                                             .num_warmup_iterations = 0,
                                             .iteration_duration_s = kIterationS};
  ThermalRig replay;  // the same sweep again, for the figure the message should carry
  const auto sweep = zeus::monitor::profile_measurement_duration(replay.target(), absolute);
  ASSERT_EQ(sweep.sweep.size(), 1u);
  const double best_j = sweep.sweep.front().stddev_energy_per_iteration_j;
  ASSERT_GT(best_j, 1e-3);
  try {
    zeus::monitor::profile_parameters(absolute_rig.target(), absolute);
    FAIL();
  } catch (const zeus::Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("spread of energy per iteration below 1e-09 J"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("(best {:g} J)", best_j)), std::string::npos) << what;
  }
}

TEST(Profile, AFailingIterationCancelsTheWindowAndPropagates) {
  ThermalRig rig;
  ProfileTarget target = rig.target();
  int calls = 0;
  target.iteration = [&] {
    if (++calls == 3) {
      throw std::runtime_error("workload failed");
    }
  };
  EXPECT_THROW(zeus::monitor::measure(
                   target, {.num_warmup_iterations = 1, .iteration_duration_s = kIterationS}),
               std::runtime_error);
  EXPECT_TRUE(rig.monitor->open_windows().empty());
  calls = 0;
  EXPECT_THROW(zeus::monitor::calibrate_iteration_duration(target, 0, 5), std::runtime_error);
  EXPECT_TRUE(rig.monitor->open_windows().empty());
}

TEST(Profile, RejectsBadArguments) {
  ThermalRig rig;
  ProfileTarget no_monitor = rig.target();
  no_monitor.monitor = nullptr;
  EXPECT_THROW(zeus::monitor::measure(no_monitor), zeus::Error);
  EXPECT_THROW(zeus::monitor::measure(rig.target(), {.measurement_duration_s = -1.0}), zeus::Error);
  EXPECT_THROW(zeus::monitor::profile_cooldown_duration(rig.target(), {.num_trials = 1}),
               zeus::Error);
  EXPECT_THROW(zeus::monitor::profile_cooldown_duration(
                   rig.target(), {.search_range_s = {std::nan("")}, .iteration_duration_s = 1.0}),
               zeus::Error);
  for (const zeus::monitor::PhaseShifts shifts :
       {zeus::monitor::PhaseShifts{.count = 0}, zeus::monitor::PhaseShifts{.count = 1001},
        zeus::monitor::PhaseShifts{4, 0.0}, zeus::monitor::PhaseShifts{4, std::nan("")}}) {
    MeasureOptions options;
    options.iteration_duration_s = kIterationS;
    options.phase_shifts = shifts;
    EXPECT_THROW(zeus::monitor::measure(rig.target(), options), zeus::Error);
  }
}

// Yang et al.'s mitigation of part-time power sampling: the trial's iterations run as 4 runs
// whose starts are spread over the sensor's 100 ms sampling period (a 0.5 s iteration alone
// would start every run at the same phase).
TEST(Profile, PhaseShiftedRunsStartEvenlyOverTheSamplingPeriod) {
  ThermalRig rig(false);
  std::vector<std::int64_t> starts_ns;
  ProfileTarget target = rig.target();
  const auto iteration = target.iteration;
  target.iteration = [&] {
    starts_ns.push_back(rig.clock->now_ns());
    iteration();
  };
  MeasureOptions options;
  options.measurement_duration_s = 4.0;  // 8 iterations: 4 runs of 2
  options.cooldown_duration_s = 0.0;
  options.num_warmup_iterations = 0;
  options.iteration_duration_s = kIterationS;
  options.phase_shifts = {.count = 4, .sampling_period_s = 0.1};
  const zeus::monitor::TrialResult trial = zeus::monitor::measure(target, options);
  EXPECT_EQ(trial.iterations, 8);
  EXPECT_NEAR(trial.time_s, 4.0, 1e-9);  // the windows only, not the waits between runs
  // Busy 0.5 s at 575 W per iteration; the waits between runs are idle and outside the windows.
  EXPECT_NEAR(trial.energy_per_iteration_j, 0.5 * 575.0, 1.0);
  ASSERT_EQ(starts_ns.size(), 8u);
  for (int run = 0; run < 4; ++run) {
    const std::int64_t into_ns = (starts_ns[2 * run] - starts_ns[0]) % 100'000'000;
    EXPECT_EQ(into_ns, run * 25'000'000) << run;
  }
}

// Iterations as the reference counts them: enough to fill the measurement duration.
TEST(Profile, TheWindowHoldsEnoughIterationsToFillTheMeasurement) {
  ThermalRig rig(false);
  const auto trial = zeus::monitor::measure(rig.target(), {.measurement_duration_s = 1.2,
                                                           .cooldown_duration_s = 0.0,
                                                           .num_warmup_iterations = 0,
                                                           .iteration_duration_s = kIterationS});
  EXPECT_EQ(trial.iterations, 3);  // 2.4 rounds up (the floor, 2, measured only 1 s)
  EXPECT_GE(trial.time_s, 1.2);
}

// Three ranks, as torch.distributed would combine them: the two others' figures are scripted.
struct ScriptedRanks {
  std::vector<std::pair<char, double>> calls;  // ('s'um or 'm'ax, this rank's value)
  zeus::monitor::ProfileRanks ranks() {
    return {.sum =
                [this](double value) {
                  calls.emplace_back('s', value);
                  return value + 2 * 100.0;  // each other rank: 100 (J or degrees C)
                },
            .max =
                [this](double value) {
                  calls.emplace_back('m', value);
                  return std::max(value, 7.0);  // the slowest other rank: 7 s
                },
            .world_size = 3};
  }
};

TEST(Profile, RanksCombineAsTheReferencesAllReduce) {
  ThermalRig rig(false);
  ScriptedRanks scripted;
  ProfileTarget target = rig.target();
  target.ranks = scripted.ranks();
  const auto trial = zeus::monitor::measure(target, {.measurement_duration_s = 2.0,
                                                     .cooldown_duration_s = 0.0,
                                                     .num_warmup_iterations = 0,
                                                     .num_calibration_iterations = 2});
  // The calibration's time is the slowest rank's (7 s over 2 iterations: 3.5 s each), so every
  // rank runs ceil(2 / 3.5) = 1 iteration; then energy summed, time the maximum, temperatures
  // averaged, in that order.
  ASSERT_EQ(scripted.calls.size(), 5u);
  EXPECT_EQ(scripted.calls[0].first, 'm');
  EXPECT_DOUBLE_EQ(scripted.calls[0].second, 2 * kIterationS);
  EXPECT_EQ(trial.iterations, 1);
  const double local_j = scripted.calls[1].second;
  EXPECT_EQ(scripted.calls[1].first, 's');
  EXPECT_GT(local_j, 0.0);
  EXPECT_DOUBLE_EQ(trial.energy_j, local_j + 200.0);
  EXPECT_EQ(scripted.calls[2].first, 'm');
  EXPECT_DOUBLE_EQ(scripted.calls[2].second, kIterationS);
  EXPECT_DOUBLE_EQ(trial.time_s, 7.0);
  EXPECT_EQ(scripted.calls[3].first, 's');
  EXPECT_DOUBLE_EQ(trial.temperature_before_c, (scripted.calls[3].second + 200.0) / 3.0);
  EXPECT_EQ(scripted.calls[4].first, 's');
  EXPECT_DOUBLE_EQ(trial.temperature_after_c, (scripted.calls[4].second + 200.0) / 3.0);
  EXPECT_DOUBLE_EQ(trial.energy_per_iteration_j, trial.energy_j);
  EXPECT_DOUBLE_EQ(trial.time_per_iteration_s, 7.0);

  target.ranks.max = nullptr;  // half a combiner
  EXPECT_THROW(zeus::monitor::measure(target, {.iteration_duration_s = kIterationS}), zeus::Error);
}

}  // namespace
