#include "zeus/device/simulated_gpu.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"

namespace {

using zeus::ErrorKind;
using zeus::ManualClock;
using zeus::device::SimulatedGpu;

std::shared_ptr<ManualClock> make_clock() {
  return std::make_shared<ManualClock>();
}

SimulatedGpu make_gpu(const std::shared_ptr<ManualClock>& clock, const char* key = "a100") {
  return SimulatedGpu(zeus::device::simulated_gpu_model(key), 0, clock);
}

TEST(SimulatedGpuModels, HaveTheRealPowerLimitRanges) {
  const std::map<std::string, std::pair<std::uint32_t, std::uint32_t>> expected = {
      {"v100", {100'000, 250'000}},
      {"a40", {100'000, 300'000}},
      {"a100", {100'000, 400'000}},
      {"h100", {200'000, 700'000}},
      {"h200", {200'000, 700'000}}};
  for (const auto& [key, range] : expected) {
    const auto& model = zeus::device::simulated_gpu_model(key);
    EXPECT_EQ(model.min_power_limit_mw, range.first) << key;
    EXPECT_EQ(model.max_power_limit_mw, range.second) << key;
    EXPECT_LE(model.idle_power_mw, model.min_power_limit_mw) << key;
  }
  EXPECT_EQ(zeus::device::simulated_gpu_model("H200").name, "NVIDIA H200");
}

TEST(SimulatedGpuModels, UnknownModelListsTheKnownOnes) {
  try {
    zeus::device::simulated_gpu_model("rtx9090");
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("h200"), std::string::npos);
  }
}

TEST(SimulatedGpu, IdleEnergyIsIdlePowerTimesTime) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock);
  clock->advance_s(10.0);
  EXPECT_EQ(gpu.total_energy_mj(), 55'000u * 10u);  // 55 W for 10 s = 550 J
  EXPECT_EQ(gpu.instant_power_mw(), 55'000u);
}

TEST(SimulatedGpu, EnergyIsTheIntegralOfPiecewiseConstantPower) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock);
  gpu.set_utilization(1.0);         // 400 W
  clock->advance_s(2.0);            // 800 J
  gpu.set_power_limit_mw(250'000);  // capped at 250 W
  clock->advance_s(4.0);            // 1000 J
  gpu.set_utilization(0.5);         // demand 55 + 0.5 * 345 = 227.5 W, under the cap
  clock->advance_s(2.0);            // 455 J
  gpu.set_utilization(0.0);         // idle 55 W
  clock->advance_s(1.0);            // 55 J
  EXPECT_DOUBLE_EQ(gpu.exact_energy_j(), 800.0 + 1000.0 + 455.0 + 55.0);
  EXPECT_EQ(gpu.total_energy_mj(), 2'310'000u);
}

TEST(SimulatedGpu, PowerLimitCapsDrawAndSlowsByTheCubeRootLaw) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock, "v100");  // idle 25 W, peak 250 W
  gpu.set_utilization(1.0);
  EXPECT_EQ(gpu.instant_power_mw(), 250'000u);
  EXPECT_DOUBLE_EQ(gpu.relative_speed(), 1.0);
  gpu.set_power_limit_mw(137'500);  // dynamic part halved
  EXPECT_EQ(gpu.instant_power_mw(), 137'500u);
  EXPECT_NEAR(gpu.relative_speed(), std::cbrt(0.5), 1e-12);
  gpu.reset_power_limit();
  EXPECT_EQ(gpu.power_limit_mw(), 250'000u);
}

TEST(SimulatedGpu, OutOfRangeLimitIsRejectedWithTheRange) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock, "h200");
  try {
    gpu.set_power_limit_mw(100'000);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("[200000, 700000] mW"), std::string::npos);
  }
  EXPECT_EQ(gpu.power_limit_mw(), 700'000u);
}

TEST(SimulatedGpu, AveragePowerCoversTheLastSecond) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock);  // idle 55 W, peak 400 W
  clock->advance_s(5.0);
  gpu.set_utilization(1.0);
  clock->advance_s(0.25);
  // Last second: 0.75 s at 55 W and 0.25 s at 400 W.
  EXPECT_EQ(gpu.average_power_mw(), static_cast<std::uint32_t>(0.75 * 55'000 + 0.25 * 400'000));
  clock->advance_s(3.0);
  EXPECT_EQ(gpu.average_power_mw(), 400'000u);
  EXPECT_EQ(gpu.instant_power_mw(), 400'000u);
}

TEST(SimulatedGpu, LockedClocksReducePowerAndSpeed) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock);
  gpu.set_utilization(1.0);
  gpu.set_gpu_locked_clocks_mhz(210, 705);  // half the 1410 MHz maximum
  EXPECT_NEAR(gpu.relative_speed(), 0.5, 1e-12);
  EXPECT_EQ(gpu.instant_power_mw(), static_cast<std::uint32_t>(55'000 + 345'000 / 8.0));
  gpu.reset_locked_clocks();
  EXPECT_EQ(gpu.instant_power_mw(), 400'000u);
  EXPECT_THROW(gpu.set_gpu_locked_clocks_mhz(900, 800), zeus::Error);
}

TEST(SimulatedGpu, LockedClockRangesSnapToSupportedClocksAsTheDriverDoes) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock, "h200");  // 345-1980 MHz in 15 MHz steps; memory 3201
  EXPECT_FALSE(gpu.locked_graphics_clocks_mhz().has_value());
  gpu.set_gpu_locked_clocks_mhz(1000, 1500);  // 1000 is not listed: nearest is 1005
  EXPECT_EQ(gpu.locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{1005}, std::uint32_t{1500}));
  gpu.set_gpu_locked_clocks_mhz(997, 998);  // nearest 1005 and 990: ties and rounding stay ordered
  const auto narrow = gpu.locked_graphics_clocks_mhz();
  ASSERT_TRUE(narrow.has_value());
  EXPECT_LE(narrow->first, narrow->second);
  EXPECT_EQ(narrow->first, 990u);
  EXPECT_EQ(narrow->second, 1005u);
  gpu.set_gpu_locked_clocks_mhz(0, 100000);  // clamped to the span
  EXPECT_EQ(gpu.locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{345}, std::uint32_t{1980}));
  // Wholly outside: refused with the span, and the lock in force stays.
  try {
    gpu.set_gpu_locked_clocks_mhz(100, 200);
    ADD_FAILURE() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("supported range 345-1980 MHz"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(gpu.locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{345}, std::uint32_t{1980}));
  EXPECT_THROW(gpu.set_memory_locked_clocks_mhz(3300, 3400), zeus::Error);
  EXPECT_THROW(gpu.set_memory_locked_clocks_mhz(3300, 3200), zeus::Error);
  gpu.set_memory_locked_clocks_mhz(3000, 3300);
  EXPECT_EQ(gpu.locked_memory_clocks_mhz(),
            std::make_pair(std::uint32_t{3201}, std::uint32_t{3201}));
  gpu.reset_locked_clocks();
  EXPECT_FALSE(gpu.locked_graphics_clocks_mhz().has_value());
  EXPECT_FALSE(gpu.locked_memory_clocks_mhz().has_value());
}

TEST(SimulatedGpu, ClockListsAreConsistent) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock, "a40");
  const auto memory = gpu.supported_memory_clocks_mhz();
  ASSERT_FALSE(memory.empty());
  const auto graphics = gpu.supported_graphics_clocks_mhz(std::nullopt);
  ASSERT_FALSE(graphics.empty());
  EXPECT_EQ(graphics.front(), 1740u);
  EXPECT_GE(graphics.back(), 210u);
  EXPECT_EQ(gpu.supported_graphics_clocks_mhz(memory.back()), graphics);
  EXPECT_THROW(gpu.supported_graphics_clocks_mhz(1), zeus::Error);
}

TEST(SimulatedGpu, PascalHasNoEnergyCounter) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock, "p100");
  EXPECT_FALSE(gpu.supports_energy_counter());
  try {
    gpu.total_energy_mj();
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotSupported);
  }
  EXPECT_EQ(gpu.instant_power_mw(), 26'000u);
}

TEST(SimulatedGpu, PersistenceModeAndTemperature) {
  auto clock = make_clock();
  SimulatedGpu gpu = make_gpu(clock);
  EXPECT_FALSE(gpu.persistence_mode());
  gpu.set_persistence_mode(true);
  EXPECT_TRUE(gpu.persistence_mode());
  const int idle_temperature = gpu.temperature_c();
  gpu.set_utilization(1.0);
  EXPECT_GT(gpu.temperature_c(), idle_temperature);
}

TEST(SimulatedGpusSpec, ParsesCountAndModel) {
  EXPECT_EQ(zeus::device::parse_simulated_gpus_spec("4:h200").count, 4);
  EXPECT_EQ(zeus::device::parse_simulated_gpus_spec("4:H200").model_key, "h200");
  EXPECT_EQ(zeus::device::parse_simulated_gpus_spec("2").model_key, "a100");
  for (const char* bad : {"", "x", "-1", "0", "4:", "4:tpu", "99999", "2:a100:1"}) {
    try {
      zeus::device::parse_simulated_gpus_spec(bad);
      FAIL() << bad;
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << bad;
      EXPECT_NE(std::string(error.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << error.what();
    }
  }
}

// ":module" labels a simulated GPU's figures module scope, as a Grace superchip's (and only
// labels them: the draw is the same model).
TEST(SimulatedGpusSpec, ModuleOptionLabelsTheFiguresModuleScope) {
  using zeus::device::MeasuredScope;
  const auto spec = zeus::device::parse_simulated_gpus_spec("2:H200:Module");
  EXPECT_TRUE(spec.module);
  EXPECT_EQ(spec.model().scope, MeasuredScope::kModule);
  EXPECT_EQ(zeus::device::parse_simulated_gpus_spec("2:h200").model().scope, MeasuredScope::kGpu);
  auto clock = make_clock();
  // With the sensor-faithful wrapper too, which forwards the scope.
  for (const char* text : {"1:h200:module", "1:h200:sensor:module"}) {
    const auto provider = zeus::device::make_simulated_provider(
        1, zeus::device::parse_simulated_gpus_spec(text).model(), clock);
    const auto gpu = provider->open_gpu(0);
    EXPECT_EQ(gpu->power_scope(), MeasuredScope::kModule) << text;
    EXPECT_EQ(gpu->energy_scope(), MeasuredScope::kModule) << text;
  }
  SimulatedGpu plain = make_gpu(clock, "h200");
  EXPECT_EQ(plain.energy_scope(), MeasuredScope::kGpu);
  for (const char* bad : {"2:h200:module:module", "2:h200:modules"}) {
    try {
      zeus::device::parse_simulated_gpus_spec(bad);
      FAIL() << bad;
    } catch (const zeus::Error& error) {
      EXPECT_NE(std::string(error.what()).find("\"module\""), std::string::npos) << error.what();
    }
  }
}

zeus::EnvLookup fake_env(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    if (found == values.end()) {
      return std::nullopt;
    }
    return found->second;
  };
}

TEST(Discovery, SimulatedGpusAreUsedOnlyWhenAsked) {
  zeus::device::DiscoveryOptions options;
  options.env = fake_env({{"ZEUS_SIMULATED_GPUS", "4:h200"}, {"CUDA_VISIBLE_DEVICES", "3,1"}});
  auto clock = make_clock();
  options.clock = clock;
  const zeus::device::GpuDiscovery found = zeus::device::discover_gpus(options);
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(found.backend, zeus::device::GpuBackend::kSimulated);
  EXPECT_EQ(found.gpus.physical_index(0), 3);
  EXPECT_EQ(found.gpus.physical_index(1), 1);
  EXPECT_EQ(found.gpus.at(0).name(), "NVIDIA H200");
  EXPECT_NE(found.gpus.at(0).uuid(), found.gpus.at(1).uuid());
  clock->advance_s(1.0);
  EXPECT_EQ(found.gpus.at(0).total_energy_mj(), 75'000u);
  EXPECT_NO_THROW(found.gpus.ensure_homogeneous());

  try {
    found.gpus.at(2);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("valid indices are 0..1"), std::string::npos);
  }
}

TEST(Discovery, NoGpuGivesAClearMessageNotACrash) {
  zeus::device::DiscoveryOptions options;
  options.env = fake_env({});
  options.nvml_library_path = "libzeus-no-nvml-here.so.1";
  options.amdsmi_library_path = "libzeus-no-amdsmi-here.so";
  const zeus::device::GpuDiscovery found = zeus::device::discover_gpus(options);
  EXPECT_TRUE(found.gpus.empty());
  EXPECT_FALSE(found.backend.has_value());
  ASSERT_EQ(found.probes.size(), 3u);
  EXPECT_EQ(found.probes[1].backend, "nvml");
  EXPECT_FALSE(found.probes[1].loaded);
  EXPECT_NE(found.probes[1].message.find("libzeus-no-nvml-here.so.1"), std::string::npos);
  EXPECT_NE(found.message.find("ZEUS_SIMULATED_GPUS"), std::string::npos);
  try {
    found.gpus.at(0);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("no GPU is available"), std::string::npos);
  }
}

TEST(Discovery, MalformedSimulatedSpecIsTheUsersError) {
  zeus::device::DiscoveryOptions options;
  options.env = fake_env({{"ZEUS_SIMULATED_GPUS", "lots"}});
  EXPECT_THROW(zeus::device::discover_gpus(options), zeus::Error);
}

}  // namespace
