// SoC (Jetson) energy through the SocSampler and ZeusMonitor, on fake sysfs trees and a
// ManualClock: every figure is an exact sample-and-hold integral.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "support/temp_jetson_tree.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/monitor/soc_sampler.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::device::RailKind;
using zeus::monitor::Measurement;
using zeus::monitor::SocEnergy;
using zeus::monitor::ZeusMonitor;
using zeus::monitor::ZeusMonitorOptions;

class SocMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Orin: GPU 5 V x 0.4 A = 2 W, CPU 5 V x 0.2 A = 1 W, input 5 V x 1 A = 5 W.
    hwmon_ = tree_.add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}, 5000, 400);
    set("curr2_input", "200");
    set("curr3_input", "1000");
    const zeus::device::SocDiscovery found = zeus::device::discover_jetson(tree_.root());
    ASSERT_TRUE(found.soc) << found.message;
    soc_ = found.soc;
  }

  void set(const std::string& file, const std::string& value) {
    tree_.write(hwmon_.lexically_relative(tree_.root()) / file, value + "\n");
  }

  std::unique_ptr<ZeusMonitor> monitor() {
    ZeusMonitorOptions options;
    options.clock = clock_;
    options.start_sampler_thread = false;
    options.soc = soc_;
    options.soc_period_s = 0.1;
    return std::make_unique<ZeusMonitor>(zeus::device::Gpus(),
                                         std::vector<std::shared_ptr<zeus::device::Cpu>>{},
                                         std::move(options));
  }

  zeus::testing::TempJetsonTree tree_;
  fs::path hwmon_;
  std::shared_ptr<zeus::device::JetsonSoc> soc_;
  std::shared_ptr<zeus::ManualClock> clock_ = std::make_shared<zeus::ManualClock>(1'000'000'000);
};

TEST_F(SocMonitorTest, AWindowMeasuresEveryRailAsHeldPower) {
  auto zeus_monitor = monitor();
  ASSERT_NE(zeus_monitor->soc_sampler(), nullptr);
  zeus_monitor->begin_window("step");
  clock_->advance_s(1.0);
  zeus_monitor->soc_sampler()->sample_once();
  set("curr1_input", "800");  // the GPU rail doubles to 4 W
  clock_->advance_s(0.5);
  zeus_monitor->soc_sampler()->sample_once();
  clock_->advance_s(0.5);
  const Measurement measured = zeus_monitor->end_window("step");
  ASSERT_TRUE(measured.soc_energy);
  const SocEnergy& soc = *measured.soc_energy;
  ASSERT_EQ(soc.rails.size(), 3u);
  EXPECT_EQ(soc.rails[0].name, "VDD_GPU_SOC");
  EXPECT_DOUBLE_EQ(soc.rails[0].energy_j, 2.0 * 1.5 + 4.0 * 0.5);
  EXPECT_DOUBLE_EQ(soc.energy_j(RailKind::kGpu).value(), 5.0);
  EXPECT_DOUBLE_EQ(soc.energy_j(RailKind::kCpu).value(), 2.0);
  EXPECT_DOUBLE_EQ(soc.energy_j(RailKind::kTotal).value(), 10.0);
  EXPECT_FALSE(soc.energy_j(RailKind::kSoc).has_value());
  EXPECT_EQ(soc.skipped_reads, 0u);
  EXPECT_TRUE(measured.gpu_energy_j.empty());
}

TEST_F(SocMonitorTest, ARailThatDisappearsIsSkippedCountedAndHeld) {
  auto zeus_monitor = monitor();
  zeus_monitor->begin_window("step");
  fs::remove(hwmon_ / "in3_input");  // the input rail goes away mid-run
  for (int i = 0; i < 4; ++i) {
    clock_->advance_s(0.25);
    zeus_monitor->soc_sampler()->sample_once();  // must not throw
  }
  const Measurement measured = zeus_monitor->end_window("step");
  ASSERT_TRUE(measured.soc_energy);
  EXPECT_EQ(measured.soc_energy->skipped_reads, 4u);
  EXPECT_DOUBLE_EQ(measured.soc_energy->energy_j(RailKind::kTotal).value(), 5.0);  // held
  EXPECT_DOUBLE_EQ(measured.soc_energy->energy_j(RailKind::kGpu).value(), 2.0);
  EXPECT_EQ(zeus_monitor->soc_sampler()->skipped(2), 4u);
  EXPECT_EQ(zeus_monitor->soc_sampler()->skipped(0), 0u);
  // The next window, with the rail back, says nothing was skipped in it.
  set("in3_input", "5000");
  zeus_monitor->begin_window("next");
  clock_->advance_s(1.0);
  zeus_monitor->soc_sampler()->sample_once();
  const Measurement next = zeus_monitor->end_window("next");
  EXPECT_EQ(next.soc_energy->skipped_reads, 0u);
}

TEST_F(SocMonitorTest, AValueThatIsNoNumberIsSkippedAndCounted) {
  auto zeus_monitor = monitor();
  zeus_monitor->begin_window("step");
  set("curr2_input", "garbage");
  clock_->advance_s(0.5);
  zeus_monitor->soc_sampler()->sample_once();
  clock_->advance_s(0.5);
  const Measurement measured = zeus_monitor->end_window("step");
  EXPECT_EQ(measured.soc_energy->skipped_reads, 1u);
  EXPECT_DOUBLE_EQ(measured.soc_energy->energy_j(RailKind::kCpu).value(), 1.0);
}

TEST_F(SocMonitorTest, ACancelledWindowHasZeroSocEnergy) {
  auto zeus_monitor = monitor();
  zeus_monitor->begin_window("step");
  clock_->advance_s(1.0);
  const Measurement measured = zeus_monitor->end_window("step", {.cancel = true});
  ASSERT_TRUE(measured.soc_energy);
  EXPECT_DOUBLE_EQ(measured.soc_energy->energy_j(RailKind::kGpu).value(), 0.0);
}

TEST_F(SocMonitorTest, WithoutASocThereIsNoSocEnergy) {
  ZeusMonitorOptions options;
  options.clock = clock_;
  options.start_sampler_thread = false;
  ZeusMonitor zeus_monitor(zeus::device::Gpus(), {}, std::move(options));
  EXPECT_EQ(zeus_monitor.soc_sampler(), nullptr);
  zeus_monitor.begin_window("step");
  clock_->advance_s(1.0);
  EXPECT_FALSE(zeus_monitor.end_window("step").soc_energy.has_value());
}

TEST_F(SocMonitorTest, TheSamplerThreadPollsTheRails) {
  zeus::monitor::SocSamplerOptions options;
  options.period_s = 0.005;
  zeus::monitor::SocSampler sampler(soc_, options);
  EXPECT_DOUBLE_EQ(sampler.power_w(0).value(), 2.0);
  zeus::monitor::SocReading start;
  sampler.read(zeus::steady_clock()->now_ns(), start);
  zeus::steady_clock()->sleep_for_ns(50'000'000);
  sampler.stop();
  EXPECT_GT(sampler.energy_j(0), 0.0);
  EXPECT_EQ(sampler.skipped(0), 0u);
}

}  // namespace
