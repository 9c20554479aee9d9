#include "zeus/sim/simulator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "zeus/common/error.hpp"

namespace {

using zeus::sim::PolicyKind;
using zeus::sim::SimulationConfig;
using zeus::sim::WorkloadTrace;

// A small hand-made trace. Batch size 64 at 150 W is the cheapest in expectation.
WorkloadTrace tiny_trace() {
  WorkloadTrace trace;
  trace.workload = {"toy", "net", "sgd", 0.9, 10, 32, true};
  trace.gpu = "v100";
  trace.max_power_w = 200.0;
  trace.power_limits_w = {100, 150, 200};
  trace.source = "test";
  // epochs to target per run, time per epoch at 200 W, power at 200 W
  struct Row {
    int batch_size;
    std::vector<std::optional<int>> epochs;
    double time_s;
    double power_w;
  };
  const std::vector<Row> rows = {
      {16, {8, 9, 8, 9}, 100.0, 150.0},
      {32, {6, 6, 7, 6}, 60.0, 180.0},
      {64, {5, 5, 5, 6}, 40.0, 195.0},
      {128, {std::nullopt, 11, std::nullopt, std::nullopt}, 30.0, 200.0},
  };
  for (const Row& row : rows) {
    zeus::sim::BatchSizeTrace batch;
    batch.batch_size = row.batch_size;
    batch.target_epochs = row.epochs;
    // 150 W: 10% slower at 80% of the power; 100 W: 40% slower at 55%.
    batch.power = {{100, row.time_s * 1.4, row.power_w * 0.55},
                   {150, row.time_s * 1.1, row.power_w * 0.8},
                   {200, row.time_s, row.power_w}};
    trace.batch_sizes.push_back(batch);
  }
  return trace;
}

TEST(Oracle, IsTheBestExpectedCostIncludingRetries) {
  const WorkloadTrace trace = tiny_trace();
  const zeus::sim::Oracle oracle = zeus::sim::compute_oracle(trace, 0.5);
  EXPECT_EQ(oracle.batch_size, 64);
  EXPECT_EQ(oracle.power_limit_w, 150);
  // 64 at 150 W: 5.25 epochs of 44 s at 156 W.
  const double epochs = 5.25;
  EXPECT_NEAR(oracle.expected_time_s, epochs * 44.0, 1e-9);
  EXPECT_NEAR(oracle.expected_energy_j, epochs * 44.0 * 156.0, 1e-6);
  EXPECT_NEAR(oracle.expected_cost,
              0.5 * oracle.expected_energy_j + 0.5 * 200.0 * oracle.expected_time_s, 1e-6);
}

TEST(Simulator, DefaultRunsB0AtMaxPowerEveryTime) {
  const WorkloadTrace trace = tiny_trace();
  SimulationConfig config;
  config.seed = 3;
  const auto result = zeus::sim::simulate_recurring(trace, PolicyKind::kDefault, config);
  EXPECT_EQ(result.history.size(), 2u * 4u * 3u);
  for (const auto& record : result.history) {
    EXPECT_EQ(record.batch_size, 32);
    EXPECT_EQ(record.power_limit_w, 200);
    EXPECT_EQ(record.tries, 1);
    const double epochs = record.time_s / 60.0;
    EXPECT_TRUE(epochs == 6.0 || epochs == 7.0) << epochs;
    EXPECT_NEAR(record.energy_j, record.time_s * 180.0, 1e-6);
  }
}

TEST(Simulator, ZeusConvergesToTheOracleAndSavesEnergy) {
  const WorkloadTrace trace = tiny_trace();
  SimulationConfig config;
  config.recurrences = 60;
  const auto cell =
      zeus::sim::run_cell(trace, PolicyKind::kZeus, config, {1, 2, 3, 4, 5, 6, 7, 8}, 2);
  EXPECT_EQ(cell.final_batch_size, 64);
  EXPECT_EQ(cell.final_power_limit_w, 150);
  EXPECT_GE(cell.final_matches_oracle_pct, 75.0);
  EXPECT_GT(cell.energy_saving_last10_pct_mean, cell.energy_saving_pct_mean - 50.0);
  EXPECT_GT(cell.energy_saving_last10_pct_mean, 10.0);
  EXPECT_GT(cell.cost_saving_pct_mean, 0.0);
  EXPECT_EQ(cell.runs.size(), 8u);
  // Batch size 128 rarely converges: pruning must stop there, and early stopping cut failures.
  EXPECT_GT(cell.failed_runs_mean, 0.0);
}

// A record shows its last try; a batch size is profiled on its first try only, never again.
TEST(Simulator, ProfilingIsChargedOncePerBatchSize) {
  const WorkloadTrace trace = tiny_trace();
  SimulationConfig config;
  config.recurrences = 30;
  const auto result = zeus::sim::simulate_recurring(trace, PolicyKind::kZeus, config);
  std::set<int> profiled;
  for (const auto& record : result.history) {
    if (record.profiled) {
      EXPECT_TRUE(profiled.insert(record.batch_size).second) << record.batch_size;
    }
  }
  EXPECT_GE(profiled.size(), 2u);
}

TEST(Simulator, SameSeedSameHistory) {
  const WorkloadTrace trace = tiny_trace();
  SimulationConfig config;
  config.seed = 9;
  const auto a = zeus::sim::simulate_recurring(trace, PolicyKind::kZeus, config);
  const auto b = zeus::sim::simulate_recurring(trace, PolicyKind::kZeus, config);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (std::size_t i = 0; i < a.history.size(); ++i) {
    EXPECT_EQ(a.history[i].batch_size, b.history[i].batch_size);
    EXPECT_EQ(a.history[i].energy_j, b.history[i].energy_j);
  }
}

TEST(Simulator, GridTriesEveryConfigurationThenKeepsTheBest) {
  WorkloadTrace trace = tiny_trace();
  trace.batch_sizes.pop_back();  // drop 128, which rarely converges
  SimulationConfig config;
  config.recurrences = 12;
  config.beta = 0.0;  // no early stopping: every configuration converges, one per recurrence
  const auto result = zeus::sim::simulate_recurring(trace, PolicyKind::kGrid, config);
  EXPECT_EQ(result.history.front().batch_size, 32);  // b0 at the maximum power limit first
  EXPECT_EQ(result.history.front().power_limit_w, 200);
  std::set<std::pair<int, int>> seen;
  for (int i = 0; i < 9; ++i) {
    seen.insert({result.history[i].batch_size, result.history[i].power_limit_w});
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_EQ(result.history.back().batch_size, 64);
}

TEST(Simulator, OracleAndDefaultSavings) {
  const WorkloadTrace trace = tiny_trace();
  SimulationConfig config;
  const auto base = zeus::sim::run_cell(trace, PolicyKind::kDefault, config, {1, 2});
  EXPECT_EQ(base.energy_saving_pct_mean, 0.0);
  const auto oracle = zeus::sim::run_cell(trace, PolicyKind::kOracle, config, {1, 2});
  EXPECT_GT(oracle.energy_saving_pct_mean, 30.0);
  EXPECT_NEAR(oracle.cum_regret_mean, 0.0, 0.05 * oracle.recurrences * 30000.0);
}

TEST(Simulator, ConcurrentSubmissionsUseTheBestKnownWhileExploring) {
  const WorkloadTrace trace = tiny_trace();
  std::vector<zeus::sim::JobArrival> arrivals;
  for (int i = 0; i < 30; ++i) {
    arrivals.push_back({i * 100.0, i * 100.0 + 250.0, 1.0});  // about 3 in flight at once
  }
  SimulationConfig config;
  const auto result = zeus::sim::simulate_concurrent(trace, PolicyKind::kZeus, config, arrivals);
  ASSERT_EQ(result.history.size(), 30u);
  for (const auto& record : result.history) {
    EXPECT_GE(record.tries, 1);
    EXPECT_GT(record.energy_j, 0.0);
  }
  // Jobs 2 and 3 start while job 1's exploration of b0 is in flight: they run b0 as well.
  EXPECT_EQ(result.history[1].batch_size, 32);
}

TEST(Simulator, RegretOfScaledJobsIsAgainstTheOracleScaledAlike) {
  // One job at a time, each 2x as long as the trace's runs: every cost doubles, and so must the
  // regret (it was 2 x the regret plus one oracle cost per job against an unscaled oracle).
  const WorkloadTrace trace = tiny_trace();
  const auto regret = [&](double ratio) {
    SimulationConfig config;
    for (int i = 0; i < 20; ++i) {
      config.arrivals.push_back({i * 1000.0, i * 1000.0 + 10.0, ratio});
    }
    return zeus::sim::run_cell(trace, PolicyKind::kOracle, config, {1, 2, 3}, 1).cum_regret_mean;
  };
  const double oracle = zeus::sim::compute_oracle(trace, 0.5).expected_cost;
  EXPECT_NEAR(regret(2.0), 2.0 * regret(1.0), 1e-9 * oracle * 20.0) << "oracle cost " << oracle;
}

TEST(Simulator, AFailedSeedIsReportedAndTheCellGoesOn) {
  // b0 misses the target in one run of four (the other batch size, 64, never does) and a
  // recurrence gets one try: about half the seeds fail (which ones depends on their draws), for
  // every policy.
  WorkloadTrace trace = tiny_trace();
  trace.batch_sizes[1].target_epochs = {6, 6, 7, std::nullopt};
  trace.batch_sizes = {trace.batch_sizes[1], trace.batch_sizes[2]};
  SimulationConfig config;
  config.recurrences = 2;
  config.max_tries = 1;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    seeds.push_back(seed);
  }
  for (const PolicyKind& policy :
       {PolicyKind::kDefault, PolicyKind::kZeus, PolicyKind::kLowRegret, PolicyKind::kOracle}) {
    const auto cell = zeus::sim::run_cell(trace, policy, config, seeds, 2);
    SCOPED_TRACE(std::string(zeus::sim::policy_name(policy)));
    EXPECT_EQ(cell.seeds, 20);
    ASSERT_GE(cell.failed_seeds.size(), 1u);
    ASSERT_LT(cell.failed_seeds.size(), 20u);
    std::uint64_t previous = 0;
    for (const auto& failed : cell.failed_seeds) {
      EXPECT_GT(failed.seed, previous);  // in the order given, each once
      previous = failed.seed;
      EXPECT_NE(failed.error.find("1 tries"), std::string::npos) << failed.error;
      EXPECT_TRUE(cell.runs[failed.seed - 1].history.empty());
    }
    EXPECT_TRUE(std::isfinite(cell.cum_regret_mean));
    EXPECT_GT(cell.final_batch_size, 0);
  }
  // Every seed failing fails the cell, with the first seed's error.
  trace.batch_sizes[0].target_epochs = {6, std::nullopt, std::nullopt, std::nullopt};
  config.recurrences = 40;
  try {
    zeus::sim::run_cell(trace, PolicyKind::kDefault, config, seeds, 2);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("every seed failed (20); seed 1:"), std::string::npos)
        << error.what();
  }
}

TEST(Simulator, ArrivalsFileErrorsNameTheLine) {
  const auto path = std::filesystem::temp_directory_path() / "zeus-arrivals-test.csv";
  std::ofstream(path) << "start_time,end_time\n0,10\n5,x\n";
  try {
    zeus::sim::load_arrivals(path);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find(":3:"), std::string::npos) << error.what();
  }
  std::ofstream(path, std::ios::trunc) << "start_time,end_time,runtime_ratio\n0,10,0.5\n";
  EXPECT_EQ(zeus::sim::load_arrivals(path).front().runtime_ratio, 0.5);
  std::filesystem::remove(path);
}

TEST(Simulator, BadInputIsClear) {
  WorkloadTrace trace = tiny_trace();
  trace.batch_sizes[1].target_epochs = {std::nullopt, 12};  // b0 = 32 never within 10 epochs
  SimulationConfig config;
  try {
    zeus::sim::simulate_recurring(trace, PolicyKind::kZeus, config);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("never reaches the target"), std::string::npos);
  }
  config.eta = 1.5;
  EXPECT_THROW(zeus::sim::simulate_recurring(tiny_trace(), PolicyKind::kZeus, config), zeus::Error);
  EXPECT_THROW(zeus::sim::parse_policy("random"), zeus::Error);
  EXPECT_EQ(zeus::sim::parse_policy("grid"), PolicyKind::kGrid);
}

}  // namespace
