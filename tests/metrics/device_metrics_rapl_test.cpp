// The exporter's CPU counters stay exact when its interval is longer than a RAPL counter takes to
// wrap: DeviceMetrics keeps its CPUs tracked while it lives (docs/rapl.md).
#include <gtest/gtest.h>

#include <string>

#include "device/rapl_test_support.hpp"
#include "exposition_check.hpp"
#include "zeus/metrics/device_metrics.hpp"

namespace zeus::metrics {
namespace {

using namespace zeus::testing::rapl;

class DeviceMetricsRapl : public TrackedRaplTest {};

TEST_F(DeviceMetricsRapl, IntervalOfAnHourStillCountsEveryWrap) {
  WrappingRig rig(root_);
  {
    DeviceMetricsOptions options;
    options.clock = clock_;
    options.start_thread = false;
    options.interval_s = 3600.0;
    DeviceMetrics metrics(device::Gpus(), discover(), options);
    EXPECT_EQ(tracker_->tracked_zones(), 2u);
    metrics.sample_once();
    run(rig, 95);
    metrics.sample_once();
    std::string text;
    metrics.render(text);
    EXPECT_EQ(*sample(text, R"(zeus_cpu_energy_joules_total{index="0"})"), 9500.0);
    EXPECT_EQ(*sample(text, R"(zeus_dram_energy_joules_total{index="0"})"), 2375.0);
  }
  EXPECT_EQ(tracker_->tracked_zones(), 0u);
}

}  // namespace
}  // namespace zeus::metrics
