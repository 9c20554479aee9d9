// Runs the power-limit optimizer on the NVML library given as argv[1] until it is profiling a
// limit below the maximum, prints "profiling <mW>", then keeps "training" until killed.
#include <chrono>
#include <cstdio>
#include <thread>

#include "zeus/device/gpu_provider.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: plo_signal_child LIBNVIDIA-ML\n");
    return 2;
  }
  auto nvml = zeus::device::open_nvml(argv[1]);
  zeus::device::Gpus gpus({nvml->open_gpu(0)}, {0});
  auto monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
      gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, zeus::monitor::ZeusMonitorOptions{});
  zeus::runtime::PowerLimitOptimizerOptions options;
  options.warmup_steps = 1;
  options.profile_steps = 2;
  zeus::runtime::PowerLimitOptimizer optimizer(monitor, gpus, options);
  bool announced = false;
  while (true) {
    optimizer.on_step_begin();
    const auto* profiling = std::get_if<zeus::runtime::plo_state::Profiling>(&optimizer.state());
    if (!announced && profiling != nullptr &&
        profiling->power_limit_mw < optimizer.power_limits_mw().front()) {
      std::printf("profiling %u\n", profiling->power_limit_mw);
      std::fflush(stdout);
      announced = true;
    }
    if (announced) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a long training step
    }
  }
}
