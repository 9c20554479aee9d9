// Which optimizer restores a GPU's power limit when several manage it (a notebook cell re-run
// makes the new optimizer before the old one is collected), and whether a limit someone else set
// is left alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "runtime/power_limit_restorer.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::runtime::PowerLimitOptimizer;
using zeus::runtime::PowerLimitOptimizerOptions;
using zeus::runtime::PowerLimitRestorer;

constexpr std::uint32_t kMaxMw = 250'000;
constexpr std::uint32_t kOptimalMw = 175'000;  // what the profile below makes EnergySelector pick

struct OneGpu {
  OneGpu() {
    auto model = zeus::device::simulated_gpu_model("v100");
    model.max_power_limit_mw = kMaxMw;
    model.default_power_limit_mw = kMaxMw;
    model.min_power_limit_mw = 100'000;
    gpu = std::make_shared<zeus::device::SimulatedGpu>(model, 0, clock);
    gpus = std::make_unique<zeus::device::Gpus>(
        std::vector<std::shared_ptr<zeus::device::Gpu>>{gpu}, std::vector<int>{0});
    zeus::monitor::ZeusMonitorOptions monitor_options;
    monitor_options.clock = clock;
    monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
        *gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, monitor_options);
    profile =
        fs::temp_directory_path() / ("zeus-plo-ownership-" + std::to_string(getpid()) + ".json");
    zeus::runtime::save_power_limit_profile(
        profile, {{{250, 100.0, 1.0}, {175, 50.0, 1.2}, {100, 80.0, 2.0}}});
    options.selector = std::make_shared<zeus::optimizer::EnergySelector>();
    options.profile_path = profile;
    options.restore_on_signal = false;
  }
  ~OneGpu() { fs::remove(profile); }
  std::unique_ptr<PowerLimitOptimizer> make() {
    return std::make_unique<PowerLimitOptimizer>(monitor, *gpus, options);
  }

  std::shared_ptr<zeus::ManualClock> clock = std::make_shared<zeus::ManualClock>();
  std::shared_ptr<zeus::device::SimulatedGpu> gpu;
  std::unique_ptr<zeus::device::Gpus> gpus;
  std::shared_ptr<zeus::monitor::ZeusMonitor> monitor;
  fs::path profile;
  PowerLimitOptimizerOptions options;
};

// plo = Optimizer(...) run twice: the second exists before the first goes away.
TEST(PowerLimitOwnership, RebindingKeepsTheNewOptimizersLimit) {
  OneGpu setup;
  auto first = setup.make();
  ASSERT_EQ(first->optimal_power_limit_mw(), kOptimalMw);
  auto second = setup.make();
  first.reset();
  EXPECT_EQ(second->optimal_power_limit_mw(), kOptimalMw);
  EXPECT_EQ(setup.gpu->power_limit_mw(), kOptimalMw);  // was reset to 250000
  second.reset();
  EXPECT_EQ(setup.gpu->power_limit_mw(), kMaxMw);  // the last one restores
  EXPECT_FALSE(PowerLimitRestorer::owner(*setup.gpu).has_value());
}

TEST(PowerLimitOwnership, TheNewestLiveOptimizerOwnsTheGpu) {
  OneGpu setup;
  auto first = setup.make();
  auto second = setup.make();
  const std::optional<int> owner = PowerLimitRestorer::owner(*setup.gpu);
  ASSERT_TRUE(owner.has_value());
  second.reset();  // the newest goes first: the older one still manages the GPU
  EXPECT_EQ(setup.gpu->power_limit_mw(), kOptimalMw);
  const std::optional<int> older = PowerLimitRestorer::owner(*setup.gpu);
  ASSERT_TRUE(older.has_value());
  EXPECT_LT(*older, *owner);
  first.reset();
  EXPECT_EQ(setup.gpu->power_limit_mw(), kMaxMw);
}

TEST(PowerLimitOwnership, ALimitChangedBySomeoneElseIsLeftAlone) {
  OneGpu setup;
  auto optimizer = setup.make();
  ASSERT_EQ(setup.gpu->power_limit_mw(), kOptimalMw);
  setup.gpu->set_power_limit_mw(200'000);  // nvidia-smi -pl 200, say
  optimizer.reset();
  EXPECT_EQ(setup.gpu->power_limit_mw(), 200'000u);
}

TEST(PowerLimitOwnership, AConstructorThatThrowsLeavesNoRegistration) {
  OneGpu setup;
  setup.options.wait_steps = 0;
  { std::ofstream(setup.profile) << "not json"; }
  EXPECT_THROW(setup.make(), zeus::Error);
  EXPECT_FALSE(PowerLimitRestorer::owner(*setup.gpu).has_value());
  EXPECT_EQ(setup.gpu->power_limit_mw(), kMaxMw);
}

}  // namespace
