// The simulated GPU's opt-in thermal model: first-order temperature response and leakage.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "simulated_spec_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace {

using zeus::ManualClock;
using zeus::device::SimulatedGpu;
using zeus::device::SimulatedGpuModel;

SimulatedGpuModel thermal_model(const char* key = "h200", std::optional<double> leakage = {}) {
  SimulatedGpuModel model = zeus::device::simulated_gpu_model(key);
  model.thermal_enabled = true;
  if (leakage) {
    model.thermal.leakage_per_c = *leakage;
  }
  return model;
}

// Steady temperature above ambient at a constant demand (mW) below the power limit.
double steady_rise_c(const SimulatedGpuModel& model, double demand_mw) {
  const double r_c_per_mw = model.thermal.thermal_resistance_c_per_w / 1000.0;
  const double a_mw_per_c = model.idle_power_mw * model.thermal.leakage_per_c;
  return r_c_per_mw * demand_mw / (1.0 - r_c_per_mw * a_mw_per_c);
}

TEST(SimulatedGpuThermal, IsOffByDefaultInEveryModel) {
  for (const SimulatedGpuModel& model : zeus::device::simulated_gpu_models()) {
    EXPECT_FALSE(model.thermal_enabled) << model.key;
    EXPECT_GT(model.thermal.thermal_resistance_c_per_w, 0.0) << model.key;
    EXPECT_GT(model.thermal.time_constant_s, 0.0) << model.key;
    // Full load settles at 85 C without leakage, where the instantaneous model puts it.
    EXPECT_NEAR(model.thermal.ambient_c +
                    model.thermal.thermal_resistance_c_per_w * model.peak_power_mw / 1000.0,
                85.0, 0.1)
        << model.key;
  }
}

TEST(SimulatedGpuThermal, RisesTowardAmbientPlusRTimesPowerWithTheTimeConstant) {
  auto clock = std::make_shared<ManualClock>();
  const SimulatedGpuModel model = thermal_model("h200", 0.0);  // no leakage: plain first order
  SimulatedGpu gpu(model, 0, clock);
  EXPECT_DOUBLE_EQ(gpu.exact_temperature_c(), 30.0);  // starts cold, at ambient
  gpu.set_utilization(0.5);
  const double power_w = (75.0 + 0.5 * (700.0 - 75.0));
  const double rise_c = model.thermal.thermal_resistance_c_per_w * power_w;
  const double tau_s = model.thermal.time_constant_s;
  clock->advance_s(tau_s);
  EXPECT_NEAR(gpu.exact_temperature_c(), 30.0 + rise_c * (1.0 - std::exp(-1.0)), 1e-6);
  clock->advance_s(4.0 * tau_s);
  EXPECT_NEAR(gpu.exact_temperature_c(), 30.0 + rise_c * (1.0 - std::exp(-5.0)), 1e-6);
  clock->advance_s(30.0 * tau_s);
  EXPECT_NEAR(gpu.exact_temperature_c(), 30.0 + rise_c, 1e-6);
  EXPECT_EQ(gpu.temperature_c(), static_cast<int>(std::lround(30.0 + rise_c)));
  // Without leakage the power is the plain model's.
  EXPECT_EQ(gpu.instant_power_mw(), 387'500u);
}

TEST(SimulatedGpuThermal, CoolsWhenIdle) {
  auto clock = std::make_shared<ManualClock>();
  const SimulatedGpuModel model = thermal_model("a100");
  SimulatedGpu gpu(model, 0, clock);
  gpu.set_utilization(1.0);
  clock->advance_s(300.0);
  const double hot_c = gpu.exact_temperature_c();
  EXPECT_GT(hot_c, 80.0);
  gpu.set_utilization(0.0);
  double previous_c = hot_c;
  for (int i = 0; i < 20; ++i) {
    clock->advance_s(10.0);
    const double now_c = gpu.exact_temperature_c();
    EXPECT_LT(now_c, previous_c) << i;
    previous_c = now_c;
  }
  clock->advance_s(1000.0);
  EXPECT_NEAR(gpu.exact_temperature_c(),
              model.thermal.ambient_c + steady_rise_c(model, model.idle_power_mw), 1e-6);
}

TEST(SimulatedGpuThermal, LeakageMakesEnergyPerIterationDriftUpWhileWarming) {
  auto clock = std::make_shared<ManualClock>();
  const SimulatedGpuModel model = thermal_model("h200");
  SimulatedGpu gpu(model, 0, clock);
  gpu.set_utilization(0.8);  // 575 W demand, below the 700 W limit even with leakage
  std::vector<double> energies_j;
  for (int i = 0; i < 400; ++i) {
    const double before_j = gpu.exact_energy_j();
    clock->advance_s(0.5);
    energies_j.push_back(gpu.exact_energy_j() - before_j);
  }
  for (std::size_t i = 1; i < energies_j.size(); ++i) {
    EXPECT_GT(energies_j[i], energies_j[i - 1] - 1e-9) << i;
  }
  const double demand_mw = 75'000.0 + 0.8 * (700'000.0 - 75'000.0);
  // The first iteration is at the cold power; after 200 s (> 6 tau) it is close to steady.
  EXPECT_NEAR(energies_j.front(), 0.5 * demand_mw / 1000.0, 0.5);
  const double steady_w = (demand_mw + model.idle_power_mw * model.thermal.leakage_per_c *
                                           steady_rise_c(model, demand_mw)) /
                          1000.0;
  EXPECT_GT(energies_j.back() / energies_j.front(), 1.03);  // a drift of several percent
  EXPECT_NEAR(energies_j.back(), 0.5 * steady_w, 0.5 * steady_w * 0.01);
}

TEST(SimulatedGpuThermal, ReachesSteadyState) {
  auto clock = std::make_shared<ManualClock>();
  const SimulatedGpuModel model = thermal_model("v100");
  SimulatedGpu gpu(model, 0, clock);
  gpu.set_utilization(0.6);
  clock->advance_s(40.0 * model.thermal.time_constant_s);
  const double demand_mw = 25'000.0 + 0.6 * (250'000.0 - 25'000.0);
  const double rise_c = steady_rise_c(model, demand_mw);
  EXPECT_NEAR(gpu.exact_temperature_c(), model.thermal.ambient_c + rise_c, 1e-6);
  const double steady_mw = demand_mw + model.idle_power_mw * model.thermal.leakage_per_c * rise_c;
  EXPECT_EQ(gpu.instant_power_mw(), static_cast<std::uint32_t>(std::lround(steady_mw)));
  const double before_j = gpu.exact_energy_j();
  clock->advance_s(100.0);
  EXPECT_NEAR(gpu.exact_energy_j() - before_j, 100.0 * steady_mw / 1000.0, 1e-3);
  EXPECT_NEAR(gpu.exact_temperature_c(), model.thermal.ambient_c + rise_c, 1e-6);
  // Energy is integrated on the same clock: the counter agrees with the exact value.
  EXPECT_NEAR(static_cast<double>(gpu.total_energy_mj()), gpu.exact_energy_j() * 1000.0, 1.0);
}

TEST(SimulatedGpuThermal, AveragePowerFollowsTheWarmingDraw) {
  auto clock = std::make_shared<ManualClock>();
  SimulatedGpu gpu(thermal_model("h200"), 0, clock);
  gpu.set_utilization(0.8);
  clock->advance_s(60.0);  // one long step: still warming, the draw rising
  const double instant_mw = gpu.instant_power_mw();
  const double cold_mw = 75'000.0 + 0.8 * (700'000.0 - 75'000.0);
  EXPECT_GT(instant_mw, cold_mw + 10'000.0);
  // Over the last second, not over the whole minute since the last control change.
  EXPECT_NEAR(gpu.average_power_mw(), instant_mw, 0.002 * instant_mw);
}

TEST(SimulatedGpuThermal, PowerLimitCapsLeakageAndAWarmGpuIsSlower) {
  auto clock = std::make_shared<ManualClock>();
  SimulatedGpu gpu(thermal_model("h200"), 0, clock);
  gpu.set_power_limit_mw(400'000);
  gpu.set_utilization(1.0);
  const double cold_speed = gpu.relative_speed();
  clock->advance_s(300.0);
  EXPECT_EQ(gpu.instant_power_mw(), 400'000u);
  EXPECT_LT(gpu.relative_speed(), cold_speed);
  // At the limit the draw is constant, so the GPU settles at ambient + R * limit.
  clock->advance_s(1000.0);
  EXPECT_NEAR(gpu.exact_temperature_c(), 30.0 + 0.0786 * 400.0, 1e-3);
}

TEST(SimulatedGpuThermal, SpecSuffixTurnsItOn) {
  const auto spec = zeus::device::parse_simulated_gpus_spec("2:H200:Thermal");
  EXPECT_EQ(spec.count, 2);
  EXPECT_EQ(spec.model_key, "h200");
  EXPECT_TRUE(spec.thermal);
  EXPECT_TRUE(spec.model().thermal_enabled);
  EXPECT_FALSE(zeus::device::parse_simulated_gpus_spec("2:h200").model().thermal_enabled);
  for (const char* bad : {"2:h200:cold", "2:h200:", "2::thermal", "2:h200:thermal:x"}) {
    zeus::testing::expect_spec_refused(bad);
  }

  auto clock = std::make_shared<ManualClock>();
  const zeus::device::GpuDiscovery found =
      zeus::testing::discover_with_spec("1:h200:thermal", clock);
  ASSERT_EQ(found.gpus.size(), 1u);
  auto& gpu = dynamic_cast<SimulatedGpu&>(found.gpus.at(0));
  EXPECT_TRUE(gpu.model().thermal_enabled);
  gpu.set_utilization(1.0);
  EXPECT_EQ(gpu.temperature_c(), 30);  // no instantaneous jump
  clock->advance_s(30.0);
  EXPECT_GT(gpu.temperature_c(), 60);
}

}  // namespace
