#include "zeus/device/sensor_gpu.hpp"
#include "simulated_spec_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/load_profile.hpp"
#include "zeus/device/sensor.hpp"

namespace {

using zeus::ManualClock;
using zeus::device::LoadProfile;
using zeus::device::SensorGpu;
using zeus::device::SensorParameters;
using zeus::device::SimulatedGpu;

constexpr std::int64_t kMs = 1'000'000;

// An H100 (70 W idle, 700 W at full load) on a manual clock at 0, read through `parameters`.
struct Rig {
  explicit Rig(const SensorParameters& parameters)
      : clock(std::make_shared<ManualClock>()),
        truth(std::make_shared<SimulatedGpu>(zeus::device::simulated_gpu_model("h100"), 0, clock)),
        sensor(truth, parameters) {}
  void at_ms(std::int64_t t_ms) { clock->advance_ns(t_ms * kMs - clock->now_ns()); }
  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<SimulatedGpu> truth;
  SensorGpu sensor;
};

SensorParameters ideal() {
  return SensorParameters{};
}

SensorParameters h100() {
  return *zeus::device::published_sensor_parameters("NVIDIA H100 80GB HBM3");
}

TEST(SensorParameters, PublishedForTheSimulatedModelsWithTheirSources) {
  for (const char* name : {"Tesla V100-PCIE-32GB", "NVIDIA A40", "NVIDIA A100-SXM4-80GB",
                           "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 PCIe"}) {
    const auto parameters = zeus::device::published_sensor_parameters(name);
    ASSERT_TRUE(parameters.has_value()) << name;
    EXPECT_NE(parameters->source.find("estimate"), std::string::npos) << name;
    EXPECT_GT(parameters->counter_refresh_s, 0.0) << name;
  }
  // Yang et al.: 25 ms of every 100 ms on A100 and H100; NVML: a 1 s average except on GA100.
  const auto a100 = *zeus::device::published_sensor_parameters("NVIDIA A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(a100.power_sample_window_s, 0.025);
  EXPECT_DOUBLE_EQ(a100.power_sample_period_s, 0.1);
  EXPECT_DOUBLE_EQ(a100.average_power_window_s, 0.0);
  EXPECT_DOUBLE_EQ(h100().average_power_window_s, 1.0);
  EXPECT_NE(h100().source.find("Yang"), std::string::npos);
  // Whole words only, any case; nobody characterised these.
  EXPECT_FALSE(zeus::device::published_sensor_parameters("Tesla P100-PCIE-16GB"));
  EXPECT_FALSE(zeus::device::published_sensor_parameters("NVIDIA GH200 480GB"));
  EXPECT_TRUE(zeus::device::published_sensor_parameters("nvidia h200 nvl"));
}

TEST(SensorGpu, CounterStepsOncePerRefreshPeriod) {
  SensorParameters parameters = ideal();
  parameters.counter_refresh_s = 0.1;
  Rig rig(parameters);
  rig.truth->set_utilization(1.0);  // 700 W
  rig.at_ms(50);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 0u);
  EXPECT_NEAR(rig.truth->exact_energy_j(), 35.0, 1e-9);
  rig.at_ms(99);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 0u);
  rig.at_ms(100);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 70'000u);
  rig.at_ms(199);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 70'000u);
  rig.at_ms(200);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 140'000u);
}

TEST(SensorGpu, CounterCountsInUnitsOfItsResolution) {
  SensorParameters parameters = ideal();
  parameters.counter_resolution_mj = 1000.0;  // a 1 J counter
  Rig rig(parameters);                        // idle: 70 W
  rig.at_ms(10);                              // 700 mJ
  EXPECT_EQ(rig.sensor.total_energy_mj(), 0u);
  rig.at_ms(15);  // 1050 mJ
  EXPECT_EQ(rig.sensor.total_energy_mj(), 1000u);
  rig.at_ms(100);  // 7000 mJ
  EXPECT_EQ(rig.sensor.total_energy_mj(), 7000u);
}

TEST(SensorGpu, PartTimeSamplingMissesABurstBetweenWindows) {
  Rig rig(h100());  // sampled in [0, 25) ms of every 100 ms
  rig.truth->set_load_profile(LoadProfile::bursts({{30 * kMs, 50 * kMs}}, 1.0, 0.0));
  rig.at_ms(200);
  // Truth: 70 W for 0.2 s plus 630 W more for 50 ms; the sensor saw only idle windows.
  EXPECT_NEAR(rig.truth->exact_energy_j(), 14.0 + 31.5, 1e-9);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 14'000u);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 70'000u);
  EXPECT_EQ(rig.sensor.average_power_mw(), 70'000u);
}

TEST(SensorGpu, AContinuousCounterSeesTheBurstThePowerReadingMisses) {
  // The H200 as measured: the power readings sampled part-time, the counter integrating all
  // the time.
  SensorParameters parameters = h100();
  parameters.counter_integrates_continuously = true;
  Rig rig(parameters);
  rig.truth->set_load_profile(LoadProfile::bursts({{30 * kMs, 50 * kMs}}, 1.0, 0.0));
  rig.at_ms(200);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 70'000u);  // no window saw the burst
  EXPECT_EQ(rig.sensor.total_energy_mj(), 45'500u);   // the counter did: 14 J + 31.5 J
  rig.at_ms(299);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 45'500u);  // still the refresh at 200 ms
  // Its history is kept only as far back as the readings need, however long it runs.
  rig.at_ms(3'600'000);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 45'500u + 70ull * (3'600'000 - 200));
}

TEST(SensorGpu, PartTimeSamplingExtrapolatesABurstInsideAWindow) {
  Rig rig(h100());
  rig.truth->set_load_profile(LoadProfile::bursts({{110 * kMs, 10 * kMs}}, 1.0, 0.0));
  rig.at_ms(124);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 70'000u);  // the window [100, 125) is still open
  rig.at_ms(125);
  // The window [100, 125) ms: 10 ms at 700 W, 15 ms at 70 W -> 322 W, counted for 100 ms.
  EXPECT_EQ(rig.sensor.instant_power_mw(), 322'000u);
  EXPECT_EQ(rig.sensor.average_power_mw(), (70'000u + 322'000u) / 2);
  rig.at_ms(199);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 7'000u);  // refreshed at 100 ms: the first sample
  rig.at_ms(200);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 7'000u + 32'200u);
  // Truth: 14 J idle plus 6.3 J of burst; the sensor says 39.2 J.
  EXPECT_NEAR(rig.truth->exact_energy_j(), 20.3, 1e-9);
}

TEST(SensorGpu, AveragePowerLagsTheDrawByItsWindow) {
  SensorParameters parameters = ideal();
  parameters.average_power_window_s = 1.0;
  Rig rig(parameters);
  rig.at_ms(1000);
  rig.truth->set_utilization(1.0);
  rig.at_ms(1001);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 700'000u);
  EXPECT_EQ(rig.sensor.average_power_mw(), 70'630u);  // 1 ms of 700 W in the last second
  rig.at_ms(1500);
  EXPECT_EQ(rig.sensor.average_power_mw(), 385'000u);
  rig.at_ms(2000);
  EXPECT_EQ(rig.sensor.average_power_mw(), 700'000u);
}

TEST(SensorGpu, HopperAverageIsTheMeanOfTheLastSecondsSamples) {
  Rig rig(h100());
  rig.truth->set_load_profile(LoadProfile::square_wave(0.2, 0.5));  // on in [0, 100) of 200 ms
  rig.at_ms(2000);
  // Samples alternate between fully on (k even) and fully off: the mean of ten is exact here.
  EXPECT_EQ(rig.sensor.average_power_mw(), 385'000u);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 70'000u);  // the last sample, [1900, 1925) ms: off
}

TEST(SensorGpu, EveryReadingIsDelayed) {
  SensorParameters parameters = ideal();
  parameters.reading_delay_s = 0.2;
  Rig rig(parameters);
  rig.at_ms(1000);
  rig.truth->set_utilization(1.0);
  rig.at_ms(1100);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 70'000u);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 63'000u);  // as the sensor stood at 0.9 s
  rig.at_ms(1200);
  EXPECT_EQ(rig.sensor.instant_power_mw(), 700'000u);
  EXPECT_EQ(rig.sensor.total_energy_mj(), 70'000u);
  EXPECT_NEAR(rig.truth->exact_energy_j(), 70.0 + 140.0, 1e-9);
}

TEST(SensorGpu, ALoadLockedToTheSamplingIsMisreadForever) {
  Rig rig(h100());
  // 10 ms period, on for the first 5 ms: every window [100k, 100k + 25) ms holds 15 ms on, not
  // 12.5, because 100 ms is a whole number of load periods.
  rig.truth->set_load_profile(LoadProfile::square_wave(0.010, 0.5));
  // A day unread, then one reading: each of its 864,000 samples is accrued, to the millijoule.
  rig.at_ms(86'400'000);
  EXPECT_NEAR(rig.truth->exact_energy_j(), 86'400.0 * 385.0, 1e-3);
  // (15 x 700 + 10 x 70) / 25 = 448 W in every sample: 16 % too high.
  EXPECT_EQ(rig.sensor.total_energy_mj(), 864'000ULL * 44'800ULL);
}

TEST(SensorGpu, ReadsAWarmingThermalGpu) {
  auto clock = std::make_shared<ManualClock>();
  auto model = zeus::device::simulated_gpu_model("h100");
  model.thermal_enabled = true;
  auto truth = std::make_shared<SimulatedGpu>(model, 0, clock);
  SensorGpu sensor(truth, h100());
  truth->set_utilization(0.5);
  std::uint64_t last_mj = 0;
  for (int second = 1; second <= 120; ++second) {
    clock->advance_s(1.0);
    const std::uint64_t now_mj = sensor.total_energy_mj();
    EXPECT_GE(now_mj, last_mj);
    last_mj = now_mj;
  }
  // A steady load warming slowly: the sampled quarter stands for the whole period.
  EXPECT_NEAR(static_cast<double>(last_mj) / 1000.0 / truth->exact_energy_j(), 1.0, 1e-3);
  EXPECT_NEAR(sensor.average_power_mw(), truth->draw_at_mw(clock->now_ns()), 500.0);
}

TEST(SensorGpu, RejectsImpossibleParameters) {
  auto clock = std::make_shared<ManualClock>();
  auto truth = std::make_shared<SimulatedGpu>(zeus::device::simulated_gpu_model("h100"), 0, clock);
  const auto bad = [&](auto change) {
    SensorParameters parameters = ideal();
    change(parameters);
    EXPECT_THROW(SensorGpu(truth, parameters), zeus::Error);
  };
  bad([](SensorParameters& p) { p.power_sample_window_s = 0.025; });  // no period
  bad([](SensorParameters& p) {
    p.power_sample_window_s = 0.2;
    p.power_sample_period_s = 0.1;
  });
  bad([](SensorParameters& p) { p.counter_resolution_mj = 0.0; });
  bad([](SensorParameters& p) { p.counter_refresh_s = -1.0; });
  bad([](SensorParameters& p) { p.reading_delay_s = std::nan(""); });
  auto p100 = std::make_shared<SimulatedGpu>(zeus::device::simulated_gpu_model("p100"), 0, clock);
  EXPECT_THROW(SensorGpu{p100}, zeus::Error);
  EXPECT_THROW(SensorGpu{nullptr}, zeus::Error);
}

TEST(SensorGpu, OptInThroughTheEnvironment) {
  const auto spec = zeus::device::parse_simulated_gpus_spec("2:H200:Sensor:thermal");
  EXPECT_TRUE(spec.sensor);
  EXPECT_TRUE(spec.thermal);
  EXPECT_TRUE(spec.model().sensor_faithful);
  EXPECT_FALSE(zeus::device::parse_simulated_gpus_spec("2:h200:thermal").sensor);
  for (const char* bad : {"2:p100:sensor", "2:h200:sensor:sensor", "2:h200:sensors"}) {
    zeus::testing::expect_spec_refused(bad);
  }

  auto clock = std::make_shared<ManualClock>();
  const zeus::device::GpuDiscovery found =
      zeus::testing::discover_with_spec("1:h200:sensor", clock);
  ASSERT_EQ(found.gpus.size(), 1u);
  auto& sensor = dynamic_cast<SensorGpu&>(found.gpus.at(0));
  EXPECT_EQ(sensor.name(), "NVIDIA H200");
  sensor.truth().set_utilization(1.0);
  clock->advance_ns(50 * kMs);
  EXPECT_EQ(sensor.total_energy_mj(), 0u);  // not refreshed yet; an ideal counter says 35 J
  clock->advance_ns(50 * kMs);
  EXPECT_EQ(sensor.total_energy_mj(), 0u);  // the refresh at 100 ms shows 14 ms later (H200)
  clock->advance_ns(14 * kMs);
  EXPECT_EQ(sensor.total_energy_mj(), 70'000u);
}

}  // namespace
