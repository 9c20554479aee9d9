// ZeusMonitor keeps the RAPL counters it measures tracked while it lives, so that a CPU window
// longer than a counter takes to wrap is exact (docs/rapl.md; the tracker: tests/device).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "device/rapl_test_support.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using namespace zeus::testing::rapl;
using zeus::monitor::ZeusMonitor;
using zeus::monitor::ZeusMonitorOptions;

class ZeusMonitorRapl : public TrackedRaplTest {
 protected:
  ZeusMonitorOptions options(std::optional<std::vector<int>> cpu_indices = std::nullopt) const {
    ZeusMonitorOptions result;
    result.gpu_indices = std::vector<int>{};
    result.cpu_indices = std::move(cpu_indices);
    result.clock = clock_;
    return result;
  }
};

TEST_F(ZeusMonitorRapl, WindowOverManyWrapsIsExactWhileTheMonitorTracks) {
  WrappingRig rig(root_);
  {
    ZeusMonitor monitor(zeus::device::Gpus(), discover(), options());
    EXPECT_EQ(tracker_->tracked_zones(), 2u);
    monitor.begin_window("epoch");
    run(rig, 95);
    const zeus::monitor::Measurement epoch = monitor.end_window("epoch");
    EXPECT_DOUBLE_EQ(epoch.cpu_energy_j.at(0), 9500.0);   // 9 wraps of 1 kJ
    EXPECT_DOUBLE_EQ(epoch.dram_energy_j.at(0), 2375.0);  // 23 wraps of 100 J
  }
  EXPECT_EQ(tracker_->tracked_zones(), 0u);  // nobody measures: nothing tracked
}

TEST_F(ZeusMonitorRapl, MonitorWithoutCpusTracksNothing) {
  WrappingRig rig(root_);
  ZeusMonitor monitor(zeus::device::Gpus(), discover(), options(std::vector<int>{}));
  EXPECT_EQ(tracker_->tracked_zones(), 0u);
}

}  // namespace
