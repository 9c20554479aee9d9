// zeusd's power-from-energy pieces on a ManualClock: no real sleeping, exact rates.
#include "daemon/power_stream.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/gpu_writer.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::daemon {
namespace {

// A package whose counters rise by fixed steps on every read.
class SteppingCpu final : public device::Cpu {
 public:
  SteppingCpu(int index, bool dram) : index_(index), dram_(dram) {}
  int index() const override { return index_; }
  std::string name() const override { return "package-" + std::to_string(index_); }
  std::uint64_t package_energy_uj() override { return package_uj_ += 50'000; }
  bool has_dram() const override { return dram_; }
  std::uint64_t dram_energy_uj() override { return dram_uj_ += 5'000; }

 private:
  int index_;
  bool dram_;
  std::uint64_t package_uj_ = 1'000'000;
  std::uint64_t dram_uj_ = 0;
};

TEST(PowerStream, PowerBetweenCounterReadings) {
  // 1 J over 1 s is 1 W.
  EXPECT_EQ(power_mw_between(0, 1'000'000, 1'000'000'000), 1000u);
  EXPECT_EQ(power_mw_between(500, 500 + 25'000, 100'000'000), 250u);
  EXPECT_EQ(power_mw_between(10, 5, 1'000'000'000), 0u);  // the counter went back
  EXPECT_EQ(power_mw_between(0, 1000, 0), 0u);            // no time passed
}

TEST(PowerStream, CpuPowerSleepsOnePeriodOnTheInjectedClock) {
  const auto clock = std::make_shared<ManualClock>(5'000'000'000);
  const std::vector<std::shared_ptr<device::Cpu>> cpus = {std::make_shared<SteppingCpu>(0, true),
                                                          std::make_shared<SteppingCpu>(3, false)};
  const Json body = sample_cpu_power(cpus, 10.0, *clock);
  EXPECT_EQ(clock->sleeps(), 1);
  EXPECT_EQ(clock->slept_ns(), 100'000'000);
  // 50 mJ and 5 mJ in 0.1 s.
  EXPECT_EQ(body["power_mw"]["0"]["cpu_mw"], 500);
  EXPECT_EQ(body["power_mw"]["0"]["dram_mw"], 50);
  EXPECT_EQ(body["power_mw"]["3"]["cpu_mw"], 500);
  EXPECT_TRUE(body["power_mw"]["3"]["dram_mw"].is_null());
  EXPECT_TRUE(body["timestamp_ms"].is_number());
}

TEST(PowerStream, CpuStreamReportsFromTheSecondPoll) {
  const auto clock = std::make_shared<ManualClock>();
  http::Response res;
  stream_cpu_power(res, {std::make_shared<SteppingCpu>(1, true)}, 4.0, clock);
  ASSERT_TRUE(res.stream);
  EXPECT_EQ(res.stream->period.count(), 250);
  EXPECT_EQ(res.content_type, "text/event-stream");
  std::string out;
  ASSERT_TRUE(res.stream->next(out));
  EXPECT_EQ(out, "");  // the baseline only
  clock->advance_ns(500'000'000);
  ASSERT_TRUE(res.stream->next(out));
  ASSERT_EQ(out.rfind("data: ", 0), 0u) << out;
  const Json event = Json::parse(out.substr(6));
  EXPECT_EQ(event["cpu_id"], 1);
  EXPECT_EQ(event["cpu_mw"], 100);  // 50 mJ in 0.5 s
  EXPECT_EQ(event["dram_mw"], 10);
}

TEST(GpuWriters, ResetOfBothClockDomainsReportsEachSetting) {
  std::vector<std::shared_ptr<device::Gpu>> list = {std::make_shared<device::SimulatedGpu>(
      device::simulated_gpu_model("h200"), 0, steady_clock())};
  device::Gpus gpus(list, {0});
  std::vector<WriteEvent> before;
  std::vector<WriteEvent> after;
  {
    GpuWriters writers(
        gpus, [&](const WriteEvent& event) { before.push_back(event); },
        [&](const WriteEvent& event) { after.push_back(event); });
    const auto failure = writers
                             .submit(0,
                                     {"locked_clocks_mhz",
                                      {Setting::kGpuLockedClocks, Setting::kMemoryLockedClocks},
                                      std::nullopt,
                                      [](device::Gpu& gpu) { gpu.reset_locked_clocks(); }},
                                     PeerCredentials{true, 42, 1, 2})
                             .get();
    EXPECT_FALSE(failure.has_value());
    const auto limit = gpus.at(0).power_limit_constraints_mw().min_mw;
    const auto set =
        writers
            .submit(
                0, {"power_limit_mw", {Setting::kPowerLimit}, SettingValue::power_limit(limit), {}},
                PeerCredentials{})
            .get();
    EXPECT_FALSE(set.has_value());
    EXPECT_EQ(gpus.at(0).power_limit_mw(), limit);
  }
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(before.size(), 3u);
  EXPECT_EQ(after[0].setting, Setting::kGpuLockedClocks);
  EXPECT_EQ(after[1].setting, Setting::kMemoryLockedClocks);
  EXPECT_TRUE(after[0].is_reset());
  EXPECT_EQ(after[0].old_value, SettingValue::locked_clocks(std::nullopt));
  EXPECT_EQ(after[0].peer.pid, 42);
  EXPECT_FALSE(after[2].is_reset());
  EXPECT_EQ(setting_field(after[2].setting), "power_limit_mw");
}

}  // namespace
}  // namespace zeus::daemon
