// Simulator speed: one simulated recurring job, and the paper's whole grid (6 workloads x 4 GPUs x
// 50 seeds, Zeus compared with Default). Uses the real traces when ../shared/data has them, else
// the built-in workload models. Run: ./build/release/bench/zeus_sim_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <numeric>
#include <string>

#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

std::filesystem::path trace_dir() {
  return std::filesystem::path(ZEUS_SOURCE_DIR) / ".." / "shared" / "data" / "zeus-nsdi23-traces";
}

std::vector<zeus::sim::WorkloadTrace> all_cells(bool real) {
  std::vector<zeus::sim::WorkloadTrace> cells;
  std::optional<zeus::sim::TraceDirectory> directory;
  if (real) {
    directory.emplace(trace_dir());
  }
  for (const auto& workload : zeus::sim::paper_workloads()) {
    for (const auto& gpu : zeus::sim::trace_gpus()) {
      cells.push_back(real ? directory->load(gpu, workload)
                           : zeus::sim::builtin_trace(gpu, workload));
    }
  }
  return cells;
}

bool have_real_traces() {
  return std::filesystem::exists(trace_dir() / "summary_train.csv");
}

// The policy a benchmark's second argument names: 0 the paper's, 1 low-regret.
zeus::sim::PolicyKind policy_of(const benchmark::State& state) {
  return state.range(1) == 1 ? zeus::sim::PolicyKind::kLowRegret : zeus::sim::PolicyKind::kZeus;
}

std::string label(bool real, const benchmark::State& state) {
  return std::string(real ? "real traces, " : "built-in model, ") +
         std::string(zeus::sim::policy_name(policy_of(state)));
}

// One recurring job of a policy (librispeech on V100: 2 x |B| x |P| recurrences).
void BM_OneRecurringJob(benchmark::State& state) {
  const bool real = state.range(0) == 1;
  if (real && !have_real_traces()) {
    state.SkipWithError("../shared/data/zeus-nsdi23-traces is absent");
    return;
  }
  const auto trace =
      real ? zeus::sim::TraceDirectory(trace_dir())
                 .load("v100", zeus::sim::paper_workload("librispeech"))
           : zeus::sim::builtin_trace("v100", zeus::sim::paper_workload("librispeech"));
  zeus::sim::SimulationConfig config;
  std::uint64_t seed = 1;
  for (auto _ : state) {
    config.seed = seed++;
    benchmark::DoNotOptimize(zeus::sim::simulate_recurring(trace, policy_of(state), config));
  }
  state.SetLabel(label(real, state));
}
BENCHMARK(BM_OneRecurringJob)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond);

// The whole grid: 24 cells x 50 seeds, each seed simulating the policy and Default (2 threads).
void BM_WholeGrid(benchmark::State& state) {
  const bool real = state.range(0) == 1;
  if (real && !have_real_traces()) {
    state.SkipWithError("../shared/data/zeus-nsdi23-traces is absent");
    return;
  }
  std::vector<std::uint64_t> seeds(50);
  std::iota(seeds.begin(), seeds.end(), 1);
  for (auto _ : state) {
    const auto cells = all_cells(real);  // loading is part of the run
    for (const auto& cell : cells) {
      benchmark::DoNotOptimize(zeus::sim::run_cell(cell, policy_of(state), {}, seeds, 2));
    }
  }
  state.SetLabel(label(real, state));
}
BENCHMARK(BM_WholeGrid)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
