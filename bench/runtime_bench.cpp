// Cost of the power-limit optimizer's per-step hook outside state changes.
// Run: ./build/release/bench/zeus_runtime_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace {

struct Rig {
  std::shared_ptr<zeus::ManualClock> clock = std::make_shared<zeus::ManualClock>();
  std::shared_ptr<zeus::device::SimulatedGpu> gpu = std::make_shared<zeus::device::SimulatedGpu>(
      zeus::device::simulated_gpu_model("h100"), 0, clock);
  zeus::device::Gpus gpus{{gpu}, {0}};
  std::shared_ptr<zeus::monitor::ZeusMonitor> monitor =
      std::make_shared<zeus::monitor::ZeusMonitor>(
          gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, [this] {
            zeus::monitor::ZeusMonitorOptions options;
            options.clock = clock;
            return options;
          }());
};

// Inside a long warm-up or profiling window: the hook only counts down.
void BM_OnStepBeginWhileProfiling(benchmark::State& state) {
  Rig rig;
  zeus::runtime::PowerLimitOptimizerOptions options;
  options.warmup_steps = 0;
  options.profile_steps = 1 << 30;
  options.restore_on_signal = false;
  zeus::runtime::PowerLimitOptimizer optimizer(rig.monitor, rig.gpus, options);
  optimizer.on_step_begin();
  optimizer.on_step_begin();  // now profiling the maximum limit
  for (auto _ : state) {
    optimizer.on_step_begin();
  }
}
BENCHMARK(BM_OnStepBeginWhileProfiling);

// After profiling (a loaded profile): the hook does nothing.
void BM_OnStepBeginDone(benchmark::State& state) {
  Rig rig;
  const auto profile = std::filesystem::temp_directory_path() /
                       ("zeus-runtime-bench-" + std::to_string(getpid()) + ".json");
  zeus::runtime::save_power_limit_profile(profile, {{{700, 100.0, 1.0}, {600, 90.0, 1.1}}});
  zeus::runtime::PowerLimitOptimizerOptions options;
  options.profile_path = profile;
  options.restore_on_signal = false;
  zeus::runtime::PowerLimitOptimizer optimizer(rig.monitor, rig.gpus, options);
  for (auto _ : state) {
    optimizer.on_step_begin();
  }
  std::filesystem::remove(profile);
}
BENCHMARK(BM_OnStepBeginDone);

}  // namespace

BENCHMARK_MAIN();
