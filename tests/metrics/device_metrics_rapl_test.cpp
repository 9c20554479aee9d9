// The exporter's CPU counters stay exact when its interval is longer than a RAPL counter takes to
// wrap: DeviceMetrics keeps its CPUs tracked while it lives (docs/rapl.md).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "device/rapl_test_support.hpp"
#include "exposition_check.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/rapl_tracker.hpp"
#include "zeus/metrics/device_metrics.hpp"

namespace zeus::metrics {
namespace {

using namespace zeus::testing::rapl;

class DeviceMetricsRapl : public RaplTest {};

TEST_F(DeviceMetricsRapl, IntervalOfAnHourStillCountsEveryWrap) {
  WrappingRig rig(root_);
  const auto clock = std::make_shared<ManualClock>();
  const auto tracker = std::make_shared<device::RaplTracker>(
      device::RaplTrackerOptions{clock, /*start_thread=*/false});
  const device::CpuDiscovery found = device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  {
    DeviceMetricsOptions options;
    options.clock = clock;
    options.start_thread = false;
    options.interval_s = 3600.0;
    DeviceMetrics metrics(device::Gpus(), found.cpus, options);
    EXPECT_EQ(tracker->tracked_zones(), 2u);
    metrics.sample_once();
    for (int second = 0; second < 95; ++second) {
      rig.run_one_second();
      clock->advance_s(1.0);
      tracker->sweep();  // what the tracker's thread does every second here
    }
    metrics.sample_once();
    std::string text;
    metrics.render(text);
    EXPECT_EQ(*sample(text, R"(zeus_cpu_energy_joules_total{index="0"})"), 9500.0);
    EXPECT_EQ(*sample(text, R"(zeus_dram_energy_joules_total{index="0"})"), 2375.0);
  }
  EXPECT_EQ(tracker->tracked_zones(), 0u);
}

}  // namespace
}  // namespace zeus::metrics
