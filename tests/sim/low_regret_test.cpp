// The low-regret policy against the paper's, both driven by the simulator on the same seeds: the
// targets of issue 17 on the paper's 24 cells, the same on accuracy targets that are not the
// paper's (held out: the policy's constants were chosen on the paper's targets), and on the
// built-in models, which need no data.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "support/shared_data.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

using zeus::sim::PolicyKind;

std::filesystem::path trace_dir() {
  return zeus::testing::shared_data_dir() / "zeus-nsdi23-traces";
}

std::vector<std::uint64_t> seeds(int count) {
  std::vector<std::uint64_t> list(static_cast<std::size_t>(count));
  std::iota(list.begin(), list.end(), 1);
  return list;
}

struct Comparison {
  double paper_regret = 0.0;  // summed over cells, each in units of its oracle run's cost
  double low_regret = 0.0;
  double worst_cell_ratio = 0.0;
  std::string worst_cell;
  int cells = 0;
  std::vector<std::string> worse_final;  // low-regret's final configuration costs > 0.5% more
};

// Both policies on one cell; a cell the paper's policy cannot finish in every seed (its pruning
// finds nothing that converges, as on imagenet/p100 at 0.6 in 12 of 50 seeds) is left out of the
// sums.
void compare(const zeus::sim::WorkloadTrace& trace, const std::vector<std::uint64_t>& list,
             Comparison& out, const zeus::sim::SimulationConfig& config = {}) {
  zeus::sim::CellSummary paper;
  try {
    paper = zeus::sim::run_cell(trace, PolicyKind::kZeus, config, list, 2);
  } catch (const zeus::Error&) {
    return;
  }
  if (!paper.failed_seeds.empty()) {
    return;  // some of its seeds failed (issue 30: the cell reports the others): not comparable
  }
  const zeus::sim::CellSummary low =
      zeus::sim::run_cell(trace, PolicyKind::kLowRegret, config, list, 2);
  const double oracle = zeus::sim::compute_oracle(trace, config.eta).expected_cost;
  const std::string cell = trace.workload.dataset + "/" + trace.gpu;
  const double paper_units = paper.cum_regret_mean / oracle;
  const double low_units = low.cum_regret_mean / oracle;
  out.paper_regret += paper_units;
  out.low_regret += low_units;
  ++out.cells;
  if (low_units / paper_units > out.worst_cell_ratio) {
    out.worst_cell_ratio = low_units / paper_units;
    out.worst_cell = cell;
  }
  if (low.final_expected_cost > 1.005 * paper.final_expected_cost) {
    out.worse_final.push_back(cell);
  }
}

// Both policies on the paper's 24 cells at their own targets.
Comparison compare_paper_cells(const zeus::sim::TraceDirectory& traces,
                               const std::vector<std::uint64_t>& list,
                               const zeus::sim::SimulationConfig& config = {}) {
  Comparison result;
  for (const auto& workload : zeus::sim::paper_workloads()) {
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      compare(traces.load(gpu, workload), list, result, config);
    }
  }
  return result;
}

// Issue 30's targets with overlapping jobs: total regret at most 0.75x the paper policy's, no
// cell above 1.25x.
void expect_overlap_targets(const zeus::sim::TraceDirectory& traces,
                            const std::vector<std::uint64_t>& list,
                            const zeus::sim::SimulationConfig& config) {
  const Comparison result = compare_paper_cells(traces, list, config);
  ASSERT_EQ(result.cells, 24);
  EXPECT_LE(result.low_regret, 0.75 * result.paper_regret)
      << result.low_regret << " vs " << result.paper_regret;
  EXPECT_LE(result.worst_cell_ratio, 1.25) << result.worst_cell;
}

class LowRegretOnTraces : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(trace_dir() / "summary_train.csv")) {
      GTEST_SKIP() << "../shared/data/zeus-nsdi23-traces is absent; skipping the comparison on "
                      "the paper's traces";
    }
  }
};

TEST_F(LowRegretOnTraces, AboutHalfThePaperPolicysRegretOnThePapersCells) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  const Comparison result = compare_paper_cells(traces, seeds(50));
  ASSERT_EQ(result.cells, 24);
  // Issue 30's target. Measured 0.491x with the worst cell at 1.04x (docs/reproduction.md;
  // 0.590x before the walk took cost against batch size as unimodal, 0.520x before a steep rise
  // of the per-epoch cost ended a side, 0.494x before the whole-epochs draw, 0.496x before each
  // batch size's spread trusted its own runs more).
  EXPECT_LE(result.low_regret, 0.50 * result.paper_regret)
      << result.low_regret << " vs " << result.paper_regret;
  EXPECT_LE(result.worst_cell_ratio, 1.10) << result.worst_cell;
  EXPECT_TRUE(result.worse_final.empty()) << result.worse_final.front();
}

TEST_F(LowRegretOnTraces, GeneralisesToTargetsItWasNotTunedOn) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  const std::map<std::string, double> targets = {{"librispeech", 45.0},   {"squad", 83.5},
                                                 {"sentiment140", 0.835}, {"imagenet", 0.6},
                                                 {"cifar100", 0.55},      {"movielens-1m", 0.4}};
  Comparison result;
  for (zeus::sim::Workload workload : zeus::sim::paper_workloads()) {
    workload.target_metric = targets.at(workload.dataset);
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      compare(traces.load(gpu, workload), seeds(50), result);
    }
  }
  EXPECT_GE(result.cells, 23);  // imagenet/p100 at 0.6 defeats the paper's pruning
  // Measured 0.518x, worst cell 0.93x (0.610x before the walk took cost as unimodal, 0.537x
  // before a steep rise of the per-epoch cost ended a side, 0.523x before the whole-epochs draw,
  // 0.527x before each batch size's spread trusted its own runs more).
  EXPECT_LE(result.low_regret, 0.54 * result.paper_regret)
      << result.low_regret << " vs " << result.paper_regret;
  EXPECT_LE(result.worst_cell_ratio, 1.15) << result.worst_cell;
  EXPECT_TRUE(result.worse_final.empty()) << result.worse_final.front();
}

// The second held-out set (issue 30): easier targets, where every batch size converges and the
// first walk dominates the regret. squad keeps the paper's target (84.5 is out of reach on three
// GPUs).
TEST_F(LowRegretOnTraces, GeneralisesToEasierTargets) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  const std::map<std::string, double> targets = {{"librispeech", 50.0},   {"squad", 84.0},
                                                 {"sentiment140", 0.845}, {"imagenet", 0.55},
                                                 {"cifar100", 0.5},       {"movielens-1m", 0.35}};
  Comparison result;
  for (zeus::sim::Workload workload : zeus::sim::paper_workloads()) {
    workload.target_metric = targets.at(workload.dataset);
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      compare(traces.load(gpu, workload), seeds(50), result);
    }
  }
  EXPECT_GE(result.cells, 23);  // imagenet/p100 at 0.55 defeats the paper's pruning
  // Issue 30's target. Measured 0.574x, worst cell 1.04x (0.707x and 1.04x before the walk took
  // cost as unimodal, 0.640x before a steep rise of the per-epoch cost ended a side, 0.617x
  // before a Thompson draw allowed for the whole epochs of a batch size seen once, 0.581x before
  // each batch size's spread trusted its own runs more).
  EXPECT_LE(result.low_regret, 0.60 * result.paper_regret)
      << result.low_regret << " vs " << result.paper_regret;
  EXPECT_LE(result.worst_cell_ratio, 1.10) << result.worst_cell;
}

TEST(LowRegretOnBuiltinModels, LessRegretThanThePaperPolicy) {
  Comparison result;
  for (const auto& workload : zeus::sim::paper_workloads()) {
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      compare(zeus::sim::builtin_trace(gpu, workload), seeds(20), result);
    }
  }
  ASSERT_EQ(result.cells, 24);
  // Measured 0.634x (0.77x before the walk took cost against batch size as unimodal); the
  // built-in models' sentiment140 has a batch size whose runs straddle two epoch counts, where
  // low-regret sometimes settles on the runner-up (3-6% dearer).
  EXPECT_LE(result.low_regret, 0.70 * result.paper_regret)
      << result.low_regret << " vs " << result.paper_regret;
}

// Drift (docs/reproduction.md): on the built-in movielens-1m/V100 whose best batch size moves at
// recurrence 40 (`--drift 40:best*4`), low-regret handles the move at least as well as the
// paper's Thompson Sampling: without a window most seeds settle on the new oracle (the paper's
// policy leaves 20 of 50 unsettled), and with the paper's window of 10 every seed settles, sooner
// and for less regret after the drift.
TEST(LowRegretOnBuiltinModels, HandlesDriftAtLeastAsWellAsWindowedThompsonSampling) {
  const zeus::sim::WorkloadTrace before =
      zeus::sim::builtin_trace("v100", zeus::sim::paper_workload("movielens-1m"));
  const auto after = std::make_shared<const zeus::sim::WorkloadTrace>(zeus::sim::builtin_trace(
      "v100", zeus::sim::paper_workload("movielens-1m"), zeus::sim::ConvergenceShift{4.0}));
  const auto cell = [&](PolicyKind policy, int window) {
    zeus::sim::SimulationConfig config;
    config.window_size = window;
    config.drift = zeus::sim::Drift{40, after};
    const auto summary = zeus::sim::run_cell(before, policy, config, seeds(50), 2);
    EXPECT_TRUE(summary.drift.has_value());
    return *summary.drift;
  };
  const auto paper_all = cell(PolicyKind::kZeus, 0);
  const auto paper_windowed = cell(PolicyKind::kZeus, 10);
  const auto low_all = cell(PolicyKind::kLowRegret, 0);
  const auto low_windowed = cell(PolicyKind::kLowRegret, 10);
  // Measured: unsettled 20 (zeus) vs 3 (low-regret) without a window; with a window of 10, all
  // settle after 10.9 (zeus) and 6.1 (low-regret) recurrences.
  EXPECT_LT(low_all.unsettled_seeds, paper_all.unsettled_seeds);
  EXPECT_LT(low_all.regret_after_mean, paper_all.regret_after_mean);
  EXPECT_EQ(low_windowed.unsettled_seeds, 0);
  EXPECT_LE(low_windowed.settle_recurrences_mean, paper_windowed.settle_recurrences_mean);
  EXPECT_LE(low_windowed.regret_after_mean, paper_windowed.regret_after_mean);
}

// Issue 30's overlapping jobs: 100 jobs, each overlapping the next k - 1 (k = 2, 3, 5, 8), on the
// paper's cells: total regret at most 0.75x the paper policy's, no cell above 1.25x.
TEST_F(LowRegretOnTraces, OverlappingJobs) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  for (const int overlap : {2, 3, 5, 8}) {
    SCOPED_TRACE(std::to_string(overlap) + " overlapping");
    zeus::sim::SimulationConfig config;
    for (int i = 0; i < 100; ++i) {
      config.arrivals.push_back({i * 10.0, i * 10.0 + 10.0 * overlap - 1.0, 1.0});
    }
    // Measured 0.58x-0.68x, worst cell 0.87x-0.94x (docs/reproduction.md).
    expect_overlap_targets(traces, seeds(50), config);
  }
}

// Issue 30's overlap targets with irregular arrivals (exponential gaps, durations of 5k-15k s,
// each job's runtime ratio 0.9-1.1; tests/sim/data), on two blocks of seeds: squad/a40, where b0 is
// the oracle and the others cost 0.4-7% more, was 1.40x on seeds 51-150 at k = 8 while Thompson
// draws made with trials in flight used half the posterior spread.
TEST_F(LowRegretOnTraces, IrregularOverlappingJobs) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  std::vector<std::uint64_t> later(100);
  std::iota(later.begin(), later.end(), 51);
  for (const int overlap : {2, 3, 5, 8}) {
    zeus::sim::SimulationConfig config;
    config.arrivals =
        zeus::sim::load_arrivals(std::filesystem::path(ZEUS_SOURCE_DIR) / "tests/sim/data" /
                                 ("irregular_arrivals_" + std::to_string(overlap) + ".csv"));
    for (const auto& list : {seeds(50), later}) {
      SCOPED_TRACE(std::to_string(overlap) + " overlapping, seeds from " +
                   std::to_string(list.front()));
      // Measured 0.64x-0.70x, worst cell 0.86x-1.23x (docs/reproduction.md).
      expect_overlap_targets(traces, list, config);
    }
  }
}

// Two more target sets that no constant was chosen on (issue 30: no cell above 1.25x there):
// squad/p100 at 82.5 and librispeech/p100 at 55 were 1.42x and 1.29x while each batch size's own
// spread had the pooled one as a prior worth two runs (the pooled spread is mostly the
// straddling batch sizes', and the batch sizes whose runs never vary kept it).
TEST_F(LowRegretOnTraces, NoCellFarAboveThePaperPolicyOnOtherTargets) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  const std::vector<std::map<std::string, double>> sets = {{{"librispeech", 55.0},
                                                            {"squad", 83.0},
                                                            {"sentiment140", 0.83},
                                                            {"imagenet", 0.5},
                                                            {"cifar100", 0.45},
                                                            {"movielens-1m", 0.375}},
                                                           {{"librispeech", 60.0},
                                                            {"squad", 82.5},
                                                            {"sentiment140", 0.825},
                                                            {"imagenet", 0.45},
                                                            {"cifar100", 0.4},
                                                            {"movielens-1m", 0.3}}};
  for (const auto& targets : sets) {
    SCOPED_TRACE("librispeech at " + std::to_string(targets.at("librispeech")));
    Comparison result;
    for (zeus::sim::Workload workload : zeus::sim::paper_workloads()) {
      workload.target_metric = targets.at(workload.dataset);
      for (const auto& gpu : zeus::sim::trace_gpus()) {
        compare(traces.load(gpu, workload), seeds(50), result);
      }
    }
    EXPECT_GE(result.cells, 22);
    // Measured 0.560x (worst 1.20x, librispeech/p100) and 0.514x (1.24x, squad/p100).
    EXPECT_LE(result.low_regret, 0.60 * result.paper_regret)
        << result.low_regret << " vs " << result.paper_regret;
    EXPECT_LE(result.worst_cell_ratio, 1.25) << result.worst_cell;
  }
}

// Issue 30's drift targets, in both directions: low-regret's final configuration within 2% of the
// paper policy's cost (or 1% of the oracle's), and its regret after the drift at most 1.25x the
// paper policy's plus 2 oracle runs, with and without a window.
struct DriftScenario {
  std::string name;
  zeus::sim::WorkloadTrace before;
  std::shared_ptr<const zeus::sim::WorkloadTrace> after;
  int at = 0;
};

void expect_drift_targets(const DriftScenario& scenario) {
  for (const int window : {0, 10}) {
    SCOPED_TRACE(scenario.name + ", window " + std::to_string(window));
    zeus::sim::SimulationConfig config;
    config.window_size = window;
    config.drift = zeus::sim::Drift{scenario.at, scenario.after};
    const auto paper =
        zeus::sim::run_cell(scenario.before, PolicyKind::kZeus, config, seeds(50), 2);
    const auto low =
        zeus::sim::run_cell(scenario.before, PolicyKind::kLowRegret, config, seeds(50), 2);
    ASSERT_TRUE(paper.drift && low.drift);
    const double oracle = low.drift->new_oracle_expected_cost;
    EXPECT_TRUE(low.final_expected_cost_mean <= 1.02 * paper.final_expected_cost_mean ||
                low.final_expected_cost_mean <= 1.01 * oracle)
        << low.final_expected_cost_mean / oracle << " vs "
        << paper.final_expected_cost_mean / oracle << " oracle costs";
    EXPECT_LE(low.drift->regret_after_mean, 1.25 * paper.drift->regret_after_mean + 2.0 * oracle)
        << low.drift->regret_after_mean / oracle << " vs "
        << paper.drift->regret_after_mean / oracle << " oracle runs";
  }
}

TEST(LowRegretOnBuiltinModels, DriftTargetsInBothDirections) {
  const auto scenario = [](const std::string& gpu, const std::string& dataset, double factor,
                           int at) {
    const zeus::sim::Workload workload = zeus::sim::paper_workload(dataset);
    return DriftScenario{dataset + "/" + gpu + " best x " + std::to_string(factor),
                         zeus::sim::builtin_trace(gpu, workload),
                         std::make_shared<const zeus::sim::WorkloadTrace>(zeus::sim::builtin_trace(
                             gpu, workload, zeus::sim::ConvergenceShift{factor})),
                         at};
  };
  expect_drift_targets(scenario("v100", "movielens-1m", 4.0, 40));  // the best moves up
  expect_drift_targets(scenario("a40", "imagenet", 0.5, 40));       // and down
  expect_drift_targets(scenario("v100", "librispeech", 4.0, 80));
  expect_drift_targets(scenario("a40", "cifar100", 2.0, 40));
}

TEST_F(LowRegretOnTraces, DriftTargetsWhenTheTargetGetsEasierOrHarder) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  const auto scenario = [&](const std::string& gpu, const std::string& dataset, double from,
                            double to, int at) {
    zeus::sim::Workload workload = zeus::sim::paper_workload(dataset);
    if (from > 0.0) {
      workload.target_metric = from;
    }
    zeus::sim::Workload changed = workload;
    changed.target_metric = to;
    return DriftScenario{
        dataset + "/" + gpu + " target " + std::to_string(to), traces.load(gpu, workload),
        std::make_shared<const zeus::sim::WorkloadTrace>(traces.load(gpu, changed)), at};
  };
  // Every batch size gets cheaper (the example of issue 30: low-regret left the optimum in 50 of
  // 50 seeds, 55.7 oracle runs of regret after the drift against 0).
  expect_drift_targets(scenario("a40", "librispeech", 0.0, 60.0, 50));
  expect_drift_targets(scenario("v100", "cifar100", 0.0, 0.5, 50));
  expect_drift_targets(scenario("a40", "imagenet", 0.0, 0.55, 40));
  // Dearer.
  expect_drift_targets(scenario("a40", "librispeech", 45.0, 40.0, 50));
  expect_drift_targets(scenario("v100", "cifar100", 0.55, 0.6, 50));
  expect_drift_targets(scenario("a40", "imagenet", 0.6, 0.65, 40));
}

}  // namespace
