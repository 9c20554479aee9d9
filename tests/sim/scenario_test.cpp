// The scenario engine behind `zeus demo` (sim/scenario.hpp): the pure parts (workload model,
// run streams, the Default baseline) exactly, and a few training runs against a real in-process
// BSO server.
#include "sim/scenario.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "server/server_harness.hpp"
#include "support/temp_dir.hpp"
#include "zeus/optimizer/cost.hpp"

namespace {

using zeus::sim::builtin_trace;
using zeus::sim::paper_workload;
using zeus::sim::WorkloadModel;

WorkloadModel librispeech_v100() {
  return WorkloadModel(builtin_trace("v100", paper_workload("librispeech")));
}

TEST(Scenario, RunsOnTheGpusWithABoardAndAWorkloadModel) {
  EXPECT_EQ(zeus::sim::scenario_gpus(), (std::vector<std::string>{"v100", "a40", "p100"}));
}

TEST(Scenario, SamplesPerEpochAreTheDatasetsSizes) {
  EXPECT_EQ(zeus::sim::samples_per_epoch("librispeech"), 281000);
  EXPECT_EQ(zeus::sim::samples_per_epoch("imagenet"), 1281167);
  EXPECT_EQ(zeus::sim::samples_per_epoch("something-else"), 100000);
}

TEST(Scenario, WorkloadModelInterpolatesBetweenPowerLimits) {
  const WorkloadModel model = librispeech_v100();
  const auto& points = model.trace().at_batch_size(32).power;
  ASSERT_GE(points.size(), 2u);
  // On a grid point: the point itself.
  const zeus::sim::PowerPoint exact = model.at(32, points[1].power_limit_w);
  EXPECT_EQ(exact.time_per_epoch_s, points[1].time_per_epoch_s);
  EXPECT_EQ(exact.average_power_w, points[1].average_power_w);
  // Half-way: the mean of the neighbours.
  const double mid_w = 0.5 * (points[0].power_limit_w + points[1].power_limit_w);
  const zeus::sim::PowerPoint half = model.at(32, mid_w);
  EXPECT_DOUBLE_EQ(half.time_per_epoch_s,
                   0.5 * (points[0].time_per_epoch_s + points[1].time_per_epoch_s));
  EXPECT_DOUBLE_EQ(half.average_power_w,
                   0.5 * (points[0].average_power_w + points[1].average_power_w));
  // Outside the range: clamped to the ends.
  EXPECT_EQ(model.at(32, 1.0).power_limit_w, points.front().power_limit_w);
  EXPECT_EQ(model.at(32, 1e6).power_limit_w, points.back().power_limit_w);
  EXPECT_EQ(model.max_power_limit_w(), 250);
}

TEST(Scenario, StepsPerEpochRoundUp) {
  const WorkloadModel model = librispeech_v100();
  EXPECT_EQ(model.steps_per_epoch(32), (281000 + 31) / 32);
  EXPECT_EQ(model.steps_per_epoch(1 << 30), 1);
}

TEST(Scenario, RunStreamsAreReproducibleAndDifferPerRecurrence) {
  auto a = zeus::sim::run_stream(7, 3);
  auto b = zeus::sim::run_stream(7, 3);
  auto c = zeus::sim::run_stream(7, 4);
  std::vector<std::uint64_t> first, second, third;
  for (int i = 0; i < 8; ++i) {
    first.push_back(a.below(1000));
    second.push_back(b.below(1000));
    third.push_back(c.below(1000));
  }
  EXPECT_EQ(first, second);
  EXPECT_NE(first, third);
}

TEST(Scenario, DefaultBaselineChargesB0AtTheMaximumLimitUntilARunReaches) {
  const WorkloadModel model = librispeech_v100();
  zeus::sim::ScenarioConfig config;
  config.gpus = 2;
  const int b0 = model.trace().workload.default_batch_size;
  const zeus::sim::PowerPoint point = model.at(b0, model.max_power_limit_w());
  const double max_power_w = 500.0;
  for (int recurrence = 1; recurrence <= 5; ++recurrence) {
    // The same draws the baseline makes.
    auto stream = zeus::sim::run_stream(config.seed, recurrence);
    double energy_j = 0.0;
    double time_s = 0.0;
    double cost = 0.0;
    for (int attempt = 1; attempt <= config.max_tries; ++attempt) {
      const auto target = model.target_epoch(b0, stream.below(model.runs()));
      const bool reached = target && *target <= model.trace().workload.max_epochs;
      const int epochs = reached ? *target : model.trace().workload.max_epochs;
      const double e = epochs * point.energy_per_epoch_j() * config.gpus;
      const double t = epochs * point.time_per_epoch_s;
      energy_j += e;
      time_s += t;
      cost += zeus::optimizer::zeus_cost(e, t, config.eta, max_power_w);
      if (reached) {
        break;
      }
    }
    const zeus::sim::Totals totals =
        zeus::sim::default_recurrence(model, config, recurrence, max_power_w);
    EXPECT_EQ(totals.energy_j, energy_j);
    EXPECT_EQ(totals.time_s, time_s);
    EXPECT_EQ(totals.cost, cost);
    EXPECT_GT(totals.energy_j, 0.0);
  }
}

TEST(Scenario, MostChosenCountsReachedRunsOfTheLastRecurrences) {
  const auto run = [](int recurrence, int batch_size, int limit_w, const char* outcome) {
    zeus::sim::RunRecord record;
    record.recurrence = recurrence;
    record.batch_size = batch_size;
    record.power_limit_w = limit_w;
    record.outcome = outcome;
    return record;
  };
  const std::vector<zeus::sim::RunRecord> runs = {
      run(1, 8, 100, "reached"),        run(1, 8, 100, "reached"),  run(2, 16, 150, "reached"),
      run(3, 32, 200, "early-stopped"), run(3, 32, 200, "reached"), run(4, 16, 150, "reached"),
  };
  EXPECT_EQ(zeus::sim::most_chosen(runs, 1), (std::pair<int, int>{16, 150}));
  EXPECT_EQ(zeus::sim::most_chosen(runs, 0), (std::pair<int, int>{16, 150}));  // ties: latest
  EXPECT_EQ(zeus::sim::most_chosen(runs, 2), (std::pair<int, int>{16, 150}));
  EXPECT_EQ(zeus::sim::most_chosen(runs, 4), (std::pair<int, int>{0, 0}));
}

TEST(Scenario, TrainsRecurrencesAgainstARealServer) {
  zeus::test::ServerHarness server;
  const zeus::testing::TempDir dir("zeus-scenario-test");
  zeus::sim::ScenarioConfig config;
  config.gpu_model = "a40";
  config.seed = 3;
  const WorkloadModel model(builtin_trace("a40", paper_workload("squad")));
  zeus::sim::Scenario scenario(config, model, server.base_url(), dir.path());
  ASSERT_EQ(scenario.gpus().size(), 1u);
  EXPECT_EQ(scenario.spec().job_id.value_or(""), "demo-squad");

  std::set<int> profiled;
  for (int recurrence = 1; recurrence <= 3; ++recurrence) {
    auto stream = zeus::sim::run_stream(config.seed, recurrence);
    bool reached = false;
    for (int attempt = 1; attempt <= config.max_tries && !reached; ++attempt) {
      const zeus::sim::RunRecord record =
          scenario.train(recurrence, attempt, stream.below(model.runs()));
      reached = record.outcome == "reached";
      EXPECT_EQ(record.recurrence, recurrence);
      EXPECT_GT(record.epochs, 0);
      EXPECT_GT(record.energy_j, 0.0);
      EXPECT_GT(record.time_s, 0.0);
      EXPECT_NE(std::find(scenario.spec().batch_sizes.begin(), scenario.spec().batch_sizes.end(),
                          record.batch_size),
                scenario.spec().batch_sizes.end());
      // The first run of a batch size profiles; later ones reuse the profile.
      EXPECT_EQ(record.profiled, profiled.insert(record.batch_size).second);
      EXPECT_GE(record.power_limit_w, 100);
      EXPECT_LE(record.power_limit_w, 300);
      EXPECT_DOUBLE_EQ(record.cost, zeus::optimizer::zeus_cost(record.energy_j, record.time_s,
                                                               config.eta, scenario.max_power_w()));
    }
    EXPECT_TRUE(reached) << "recurrence " << recurrence;
  }
  EXPECT_EQ(scenario.max_power_w(), 300.0);
}

}  // namespace
