// The exporter's SoC rails: power and energy per rail, and a rail that disappears counted as a
// read error with its power held (fake Jetson tree, manual clock).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "exposition_check.hpp"
#include "support/temp_jetson_tree.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/metrics/device_metrics.hpp"

namespace zeus::metrics {
namespace {

TEST(DeviceMetricsSoc, ExportsEveryRailsPowerAndEnergy) {
  testing::TempJetsonTree tree;
  const std::filesystem::path hwmon =
      tree.add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}, 5000, 400);
  const device::SocDiscovery found = device::discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  auto clock = std::make_shared<ManualClock>(1'000'000'000);
  DeviceMetricsOptions options;
  options.clock = clock;
  options.start_thread = false;
  options.interval_s = 0.5;
  options.soc = found.soc;
  DeviceMetrics metrics(device::Gpus(), {}, options);
  clock->advance_s(2.0);
  metrics.sample_once();
  std::string text;
  metrics.render(text);
  expect_valid_exposition(text);
  EXPECT_EQ(*sample(text, R"(zeus_soc_rail_power_watts{rail="VDD_GPU_SOC",kind="gpu"})"), 2.0);
  EXPECT_EQ(*sample(text, R"(zeus_soc_rail_energy_joules_total{rail="VDD_GPU_SOC",kind="gpu"})"),
            4.0);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="soc_rail_VDD_GPU_SOC"})"), 0.0);

  std::filesystem::remove(hwmon / "in1_input");  // the GPU rail goes away: held, counted
  clock->advance_s(1.0);
  metrics.sample_once();
  text.clear();
  metrics.render(text);
  EXPECT_EQ(*sample(text, R"(zeus_soc_rail_energy_joules_total{rail="VDD_GPU_SOC",kind="gpu"})"),
            6.0);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="soc_rail_VDD_GPU_SOC"})"), 1.0);
  EXPECT_EQ(*sample(text, R"(zeus_device_read_errors_total{device="soc_rail_VDD_CPU_CV"})"), 0.0);
}

TEST(DeviceMetricsSoc, WithoutASocThereAreNoSocSeries) {
  DeviceMetricsOptions options;
  options.start_thread = false;
  DeviceMetrics metrics(device::Gpus(), {}, options);
  std::string text;
  metrics.render(text);
  EXPECT_EQ(text.find("zeus_soc_rail"), std::string::npos);
}

}  // namespace
}  // namespace zeus::metrics
