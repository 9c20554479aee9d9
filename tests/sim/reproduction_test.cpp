// The paper's evaluation on the public traces, pinned with tolerances derived from the traces
// themselves: per cell, the expected per-recurrence cost of Default (b0 at the maximum power
// limit) and of the oracle (the best fixed configuration) bound what Zeus may do.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "support/shared_data.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

std::filesystem::path trace_dir() {
  return zeus::testing::shared_data_dir() / "zeus-nsdi23-traces";
}

class Reproduction : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(trace_dir() / "summary_train.csv")) {
      GTEST_SKIP() << "../shared/data/zeus-nsdi23-traces is absent; skipping the reproduction";
    }
  }
};

TEST_F(Reproduction, ZeusConvergesNearTheOracleOnEveryCell) {
  const zeus::sim::TraceDirectory traces(trace_dir());
  std::vector<std::uint64_t> seeds(20);
  std::iota(seeds.begin(), seeds.end(), 1);
  const zeus::sim::SimulationConfig config;  // eta 0.5, beta 2, 2 x |B| x |P| recurrences
  int cells = 0;
  int cells_at_oracle = 0;
  for (const auto& workload : zeus::sim::paper_workloads()) {
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      const zeus::sim::WorkloadTrace trace = traces.load(gpu, workload);
      const std::string cell = workload.dataset + "/" + gpu;
      const zeus::sim::Oracle oracle = zeus::sim::compute_oracle(trace, config.eta);
      const auto& b0 = trace.at_batch_size(trace.workload.default_batch_size);
      const zeus::sim::Oracle fallback = zeus::sim::expected_fixed(
          trace, b0.batch_size, b0.power.back().power_limit_w, config.eta);
      const auto summary =
          zeus::sim::run_cell(trace, zeus::sim::PolicyKind::kZeus, config, seeds, 2);
      ++cells;
      cells_at_oracle += summary.final_batch_size == oracle.batch_size ? 1 : 0;

      // Over the last 10 recurrences of each seed, Zeus pays at most the oracle's expected cost
      // plus half of the gap to Default's, plus the sampling noise of 10 recurrences (15%).
      double last10_cost = 0.0;
      for (const auto& run : summary.runs) {
        for (std::size_t i = run.history.size() - 10; i < run.history.size(); ++i) {
          last10_cost += run.history[i].cost;
        }
      }
      last10_cost /= 10.0 * static_cast<double>(summary.runs.size());
      const double gap = std::max(0.0, fallback.expected_cost - oracle.expected_cost);
      EXPECT_LE(last10_cost, oracle.expected_cost + 0.5 * gap + 0.15 * oracle.expected_cost)
          << cell << ": oracle " << oracle.expected_cost << ", default " << fallback.expected_cost;

      // Energy saved over the last 10 recurrences is within 10 points of what the oracle's
      // configuration saves in expectation.
      const double oracle_saving_pct =
          100.0 * (1.0 - oracle.expected_energy_j / fallback.expected_energy_j);
      EXPECT_GE(summary.energy_saving_last10_pct_mean, oracle_saving_pct - 10.0) << cell;
      EXPECT_LE(summary.energy_saving_last10_pct_mean, oracle_saving_pct + 10.0) << cell;
    }
  }
  EXPECT_EQ(cells, 24);
  // "Converges to the optimal configuration in most cells."
  EXPECT_GE(cells_at_oracle, 20) << cells_at_oracle << " of 24 cells end at the oracle";
}

}  // namespace
