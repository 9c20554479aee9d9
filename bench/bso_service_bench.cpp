// The batch-size-optimizer service without HTTP: one trial cycle (dispatch a trial, report its
// final result, end it) on a SQLite store, in the bandit stage and during pruning, plus the
// policy core's own share (restore + decide + save).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "bso_cycle.hpp"
#include "server/service.hpp"
#include "server/store.hpp"
#include "zeus/optimizer/batch_size_policy.hpp"

namespace {

using namespace zeus;

bso::JobSpec spec(const std::string& id) {
  bso::JobSpec s;
  s.max_power_w = 700;
  s.number_of_gpus = 1;
  s.gpu_model = "NVIDIA H200";
  s.job_id = id;
  s.job_id_prefix = "peer";
  s.batch_sizes = {16, 32, 64, 128, 256, 512, 1024};
  s.default_batch_size = 128;
  s.mab_seed = 1;
  return s;
}

std::filesystem::path temp_db() {
  std::random_device random;
  return std::filesystem::temp_directory_path() /
         ("zeus-bso-bench-" + std::to_string(random()) + ".db");
}

void cycle(server::BsoService& service, const std::string& job, int i) {
  bench::trial_cycle(service, job, i);
}

void BM_ServiceCycleSqlite(benchmark::State& state) {
  const auto path = temp_db();
  {
    auto store = server::open_store("sqlite:///" + path.string());
    server::BsoService service(*store);
    service.register_job(spec("peer-bench"));
    int i = 0;
    for (int warm = 0; warm < 30; ++warm) {  // through pruning, into the bandit
      cycle(service, "peer-bench", i++);
    }
    for (auto _ : state) {
      cycle(service, "peer-bench", i++);
    }
    state.SetItemsProcessed(state.iterations());
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path.string() + suffix);
  }
}
BENCHMARK(BM_ServiceCycleSqlite)->Unit(benchmark::kMicrosecond);

void BM_PolicyRestoreDecideSave(benchmark::State& state) {
  optimizer::BatchSizePolicyConfig config;
  config.batch_sizes = {16, 32, 64, 128, 256, 512, 1024};
  config.default_batch_size = 128;
  optimizer::BatchSizePolicy policy(config);
  for (int i = 0; i < 30; ++i) {
    const auto decision = policy.next();
    policy.report(decision.trial_id, 1000.0 + i % 7, true);
  }
  std::string saved = policy.save();
  for (auto _ : state) {
    auto restored = optimizer::BatchSizePolicy::restore(saved);
    const auto decision = restored.next();
    restored.report(decision.trial_id, 1003.0, true);
    saved = restored.save();
    benchmark::DoNotOptimize(saved.data());
  }
}
BENCHMARK(BM_PolicyRestoreDecideSave)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
