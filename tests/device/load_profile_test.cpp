#include "zeus/device/load_profile.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace {

using zeus::device::LoadProfile;

constexpr std::int64_t kMs = 1'000'000;

TEST(LoadProfile, SquareWaveCountsTimeAtTheHighLevelExactly) {
  // 10 ms period, 30 % duty: high in [0, 3) ms of every period, also before the origin.
  const LoadProfile wave = LoadProfile::square_wave(0.010, 0.3, 0.8, 0.1);
  EXPECT_EQ(wave.high_ns(0, 10 * kMs), 3 * kMs);
  EXPECT_EQ(wave.high_ns(2 * kMs, 12 * kMs), 3 * kMs);
  EXPECT_EQ(wave.high_ns(-10 * kMs, 0), 3 * kMs);
  EXPECT_EQ(wave.high_ns(-7 * kMs, 25 * kMs), 3 * kMs * 3);  // [-7, 25): three whole highs
  EXPECT_EQ(wave.high_ns(5 * kMs, 5 * kMs), 0);
  EXPECT_DOUBLE_EQ(wave.utilization_at(1 * kMs), 0.8);
  EXPECT_DOUBLE_EQ(wave.utilization_at(3 * kMs), 0.1);
  EXPECT_DOUBLE_EQ(wave.utilization_at(-9 * kMs), 0.8);
  EXPECT_EQ(wave.next_change_ns(0), 3 * kMs);
  EXPECT_EQ(wave.next_change_ns(3 * kMs), 10 * kMs);
  EXPECT_EQ(wave.next_change_ns(-1 * kMs), 0);
  // A start shifts the phase.
  const LoadProfile shifted = LoadProfile::square_wave(0.010, 0.5, 1.0, 0.0, 4 * kMs);
  EXPECT_EQ(shifted.high_ns(0, 4 * kMs), 0);
  EXPECT_EQ(shifted.high_ns(4 * kMs, 9 * kMs), 5 * kMs);
}

TEST(LoadProfile, BurstsMergeAndCount) {
  const LoadProfile bursts = LoadProfile::bursts(
      {{50 * kMs, 10 * kMs}, {0, 5 * kMs}, {55 * kMs, 10 * kMs}, {100 * kMs, 0}}, 1.0, 0.25);
  EXPECT_EQ(bursts.high_ns(0, 1000 * kMs), 5 * kMs + 15 * kMs);
  EXPECT_EQ(bursts.high_ns(3 * kMs, 60 * kMs), 2 * kMs + 10 * kMs);
  EXPECT_DOUBLE_EQ(bursts.utilization_at(64 * kMs), 1.0);
  EXPECT_DOUBLE_EQ(bursts.utilization_at(65 * kMs), 0.25);
  EXPECT_EQ(bursts.next_change_ns(10 * kMs), 50 * kMs);
  EXPECT_EQ(bursts.next_change_ns(50 * kMs), 65 * kMs);
  EXPECT_EQ(bursts.next_change_ns(65 * kMs), std::numeric_limits<std::int64_t>::max());
}

TEST(LoadProfile, RejectsNonsense) {
  for (const auto& make :
       {+[] { LoadProfile::square_wave(0.0, 0.5); }, +[] { LoadProfile::square_wave(0.01, 1.5); },
        +[] { LoadProfile::square_wave(0.01, -0.1); },
        +[] {
          LoadProfile::bursts({{0, -1}});
        }}) {
    EXPECT_THROW(make(), zeus::Error);
  }
  // Levels are clamped like set_utilization.
  EXPECT_DOUBLE_EQ(LoadProfile::constant(7.0).high(), 1.0);
  EXPECT_DOUBLE_EQ(LoadProfile::constant(std::numeric_limits<double>::quiet_NaN()).low(), 0.0);
}

TEST(SimulatedGpuLoadProfile, EnergyIsExactUnderASquareWaveFasterThanAnyReading) {
  auto clock = std::make_shared<zeus::ManualClock>();
  zeus::device::SimulatedGpu gpu(zeus::device::simulated_gpu_model("h100"), 0, clock);
  // 70 W idle, 700 W at full load: 1 ms on, 1 ms off.
  gpu.set_load_profile(LoadProfile::square_wave(0.002, 0.5));
  clock->advance_s(1.0);
  EXPECT_NEAR(gpu.exact_energy_j(), 0.5 * 700.0 + 0.5 * 70.0, 1e-9);
  EXPECT_EQ(gpu.total_energy_mj(), 385'000u);
  // The past is exact too: [0, 1.5 ms) is 1 ms at 700 W and 0.5 ms at 70 W.
  EXPECT_NEAR(gpu.energy_at_mj(3 * kMs / 2), 700.0 + 35.0, 1e-9);
  EXPECT_DOUBLE_EQ(gpu.draw_at_mw(kMs / 2), 700'000.0);
  EXPECT_DOUBLE_EQ(gpu.draw_at_mw(3 * kMs / 2), 70'000.0);
  EXPECT_EQ(gpu.average_power_mw(), 385'000u);
  clock->advance_ns(kMs / 2);  // in the "on" half
  EXPECT_EQ(gpu.instant_power_mw(), 700'000u);
  EXPECT_DOUBLE_EQ(gpu.utilization(), 1.0);
  // A power limit applies to the profile's levels from now on; the past keeps its draw.
  const double before_j = gpu.exact_energy_j();
  gpu.set_power_limit_mw(400'000);
  clock->advance_s(1.0);
  EXPECT_NEAR(gpu.exact_energy_j() - before_j, 0.5 * 400.0 + 0.5 * 70.0, 1e-9);
  EXPECT_NEAR(gpu.energy_at_mj(3 * kMs / 2), 735.0, 1e-9);
}

TEST(SimulatedGpuLoadProfile, ThermalModelFollowsTheProfile) {
  auto clock = std::make_shared<zeus::ManualClock>();
  auto model = zeus::device::simulated_gpu_model("h100");
  model.thermal_enabled = true;
  zeus::device::SimulatedGpu gpu(model, 0, clock);
  zeus::device::SimulatedGpu reference(model, 1, clock);
  gpu.set_load_profile(LoadProfile::square_wave(0.2, 0.5, 0.8, 0.0));  // below the limit
  reference.set_utilization(0.4);
  clock->advance_s(60.0);
  // Half the time at 0.8 heats the die like a steady 0.4 (the model is linear below the limit):
  // the same energy but for the temperature's small ripple over 0.1 s half-periods.
  EXPECT_NEAR(gpu.exact_energy_j() / reference.exact_energy_j(), 1.0, 1e-3);
  EXPECT_GT(gpu.exact_temperature_c(), 35.0);
}

}  // namespace
