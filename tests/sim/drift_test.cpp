// Drift (the paper's third research question): the best batch size moves during the recurrences.
// The settle measure, the checks, the oracle's switch, and the scenario where the paper's
// windowed Thompson Sampling re-converges and the unwindowed one does not.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "support/expect_error.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

using zeus::ErrorKind;
using zeus::sim::builtin_trace;
using zeus::sim::ConvergenceShift;
using zeus::sim::Drift;
using zeus::sim::paper_workload;
using zeus::sim::PolicyKind;
using zeus::sim::RunResult;
using zeus::sim::SimulationConfig;
using zeus::sim::WorkloadTrace;
using zeus::testing::expect_error;

RunResult history_of(const std::vector<int>& batch_sizes) {
  RunResult run;
  for (std::size_t r = 0; r < batch_sizes.size(); ++r) {
    zeus::sim::RecurrenceRecord record;
    record.recurrence = static_cast<int>(r);
    record.batch_size = batch_sizes[r];
    run.history.push_back(record);
  }
  return run;
}

TEST(Settle, IsTheFirstRecurrenceFromWhichEightOfTenUseTheBatchSize) {
  // From recurrence 2: 1 at 3 (the drift), 2 stray, then 8 of 10 from recurrence 5 on.
  const RunResult run =
      history_of({1, 1, 1, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2});
  EXPECT_EQ(zeus::sim::settle_recurrences(run, 3, 2), 2);  // recurrence 5: 8 of 5..14
  // A window must start on the batch size: from 3, recurrence 3 qualifies already when it is 2.
  EXPECT_EQ(zeus::sim::settle_recurrences(history_of(std::vector<int>(12, 2)), 0, 2), 0);
  // Never 8 of 10, or not enough recurrences left for a whole window.
  EXPECT_EQ(zeus::sim::settle_recurrences(history_of({2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1}), 0, 2),
            std::nullopt);
  EXPECT_EQ(zeus::sim::settle_recurrences(history_of({1, 1, 1, 2, 2, 2, 2, 2, 2, 2}), 3, 2),
            std::nullopt);
}

// movielens-1m: the best batch size of the convergence model is 2048; times 4 it is 8192, and
// the oracle moves from 8192 to 16384 on the V100.
struct Scenario {
  WorkloadTrace before = builtin_trace("v100", paper_workload("movielens-1m"));
  std::shared_ptr<const WorkloadTrace> after = std::make_shared<const WorkloadTrace>(
      builtin_trace("v100", paper_workload("movielens-1m"), ConvergenceShift{4.0}));
  SimulationConfig config(int window = 0) const {
    SimulationConfig config;
    config.window_size = window;
    config.drift = Drift{40, after};
    return config;
  }
};

std::vector<std::uint64_t> seeds(int count) {
  std::vector<std::uint64_t> list;
  for (int seed = 1; seed <= count; ++seed) {
    list.push_back(static_cast<std::uint64_t>(seed));
  }
  return list;
}

TEST(Drift, MovesTheOracle) {
  const Scenario scenario;
  const auto before = zeus::sim::compute_oracle(scenario.before, 0.5);
  const auto after = zeus::sim::compute_oracle(*scenario.after, 0.5);
  EXPECT_EQ(before.batch_size, 8192);
  EXPECT_EQ(after.batch_size, 16384);
  // Only the epochs to target change.
  for (std::size_t i = 0; i < scenario.before.batch_sizes.size(); ++i) {
    EXPECT_EQ(scenario.before.batch_sizes[i].power.size(),
              scenario.after->batch_sizes[i].power.size());
  }
  expect_error([] { builtin_trace("v100", paper_workload("squad"), ConvergenceShift{0.0}); },
               ErrorKind::kInvalidArgument, {"factor 0", "outside"});
}

TEST(Drift, TheOracleSwitchesAtTheDriftAndDefaultNeverSettles) {
  const Scenario scenario;
  const SimulationConfig config = scenario.config();
  const auto oracle = zeus::sim::simulate_recurring(scenario.before, PolicyKind::kOracle, config);
  for (const auto& record : oracle.history) {
    EXPECT_EQ(record.batch_size, record.recurrence < 40 ? 8192 : 16384) << record.recurrence;
  }
  const auto cell = zeus::sim::run_cell(scenario.before, PolicyKind::kOracle, config, seeds(5), 1);
  ASSERT_TRUE(cell.drift.has_value());
  EXPECT_EQ(cell.drift->at_recurrence, 40);
  EXPECT_EQ(cell.drift->old_oracle_batch_size, 8192);
  EXPECT_EQ(cell.drift->new_oracle_batch_size, 16384);
  EXPECT_EQ(cell.oracle_batch_size, 16384);  // the main oracle is the one after the drift
  EXPECT_EQ(cell.drift->settled_seeds, 5);
  EXPECT_EQ(cell.drift->settle_recurrences_mean, 0.0);
  EXPECT_EQ(cell.final_batch_size, 16384);
  // Regret against the oracle of each phase: only the luck of the sampled runs.
  EXPECT_LT(std::fabs(cell.cum_regret_mean), 0.05 * cell.drift->new_oracle_expected_cost * 154);

  const auto fixed =
      zeus::sim::run_cell(scenario.before, PolicyKind::kDefault, config, seeds(3), 1);
  EXPECT_EQ(fixed.drift->unsettled_seeds, 3);
  EXPECT_TRUE(std::isnan(fixed.drift->settle_recurrences_mean));
  EXPECT_GT(fixed.drift->regret_after_mean, 0.0);
}

// The paper's claim for windowed Thompson Sampling, on this scenario (docs/simulator.md,
// "Drift"): with all observations the bandit stays on 8192 in many seeds, since its many cheap
// observations from before the drift outweigh the new ones; a window of 10 forgets them, and
// every seed settles on 16384.
TEST(Drift, WindowedThompsonSamplingReconvergesWhereTheUnwindowedDoesNot) {
  const Scenario scenario;
  const auto all =
      zeus::sim::run_cell(scenario.before, PolicyKind::kZeus, scenario.config(0), seeds(50));
  const auto windowed =
      zeus::sim::run_cell(scenario.before, PolicyKind::kZeus, scenario.config(10), seeds(50));
  ASSERT_TRUE(all.drift && windowed.drift);
  EXPECT_GE(all.drift->unsettled_seeds, 10);  // 20 of 50 when written
  EXPECT_EQ(windowed.drift->unsettled_seeds, 0);
  EXPECT_LT(windowed.drift->settle_recurrences_mean, 20.0);  // 10.9 when written
  EXPECT_LT(windowed.drift->regret_after_mean, 0.5 * all.drift->regret_after_mean);
}

TEST(Drift, BadDriftsAreRefused) {
  const Scenario scenario;
  SimulationConfig config = scenario.config();
  config.drift->at_recurrence = 154;  // the default recurrences: 2 x 11 x 7
  expect_error([&] { zeus::sim::simulate_recurring(scenario.before, PolicyKind::kZeus, config); },
               ErrorKind::kInvalidArgument, {"between 1 and 153"});
  config.drift->at_recurrence = 0;
  expect_error([&] { zeus::sim::run_cell(scenario.before, PolicyKind::kZeus, config, {1}); },
               ErrorKind::kInvalidArgument, {"between 1 and 153"});
  // Another workload's trace: other batch sizes.
  config = scenario.config();
  config.drift->trace =
      std::make_shared<const WorkloadTrace>(builtin_trace("v100", paper_workload("cifar100")));
  expect_error([&] { zeus::sim::simulate_recurring(scenario.before, PolicyKind::kZeus, config); },
               ErrorKind::kInvalidArgument, {"same batch sizes"});
  // Other power points: another GPU.
  config.drift->trace = std::make_shared<const WorkloadTrace>(
      builtin_trace("a40", paper_workload("movielens-1m"), ConvergenceShift{4.0}));
  expect_error([&] { zeus::sim::simulate_recurring(scenario.before, PolicyKind::kZeus, config); },
               ErrorKind::kInvalidArgument, {"power points"});
  // Replayed arrivals have no recurrences to drift at.
  config = scenario.config();
  config.arrivals = {{0.0, 1.0, 1.0}, {1.0, 2.0, 1.0}};
  expect_error([&] { zeus::sim::run_cell(scenario.before, PolicyKind::kZeus, config, {1}); },
               ErrorKind::kInvalidArgument, {"not to replayed job arrivals"});
}

}  // namespace
