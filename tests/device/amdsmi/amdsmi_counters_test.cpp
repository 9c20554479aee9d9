// The AMD SMI backend against the fake libamd_smi.so: the energy counter's validation, the
// optional symbols and the mapping of status codes (amdsmi_test.cpp: loading, identity, units and
// setters).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "amdsmi_test_support.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using zeus::ErrorKind;
using namespace zeus::testing::amdsmi;

// ---- Energy counter validation ----

TEST_F(AmdSmiTest, ValidationWaitsOneWindowForAllDevices) {
  auto provider = open(script_of({device("X"), device("Y"), device("Z")}));
  EXPECT_THAT(sleeps_s_, ElementsAre(0.5));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(provider->open_gpu(i)->supports_energy_counter()) << i;
  }
}

struct CounterCase {
  double counter_power_w;  // what the counter accumulates while power reads 300 W
  bool accepted;
};

void PrintTo(const CounterCase& c, std::ostream* out) {
  *out << "counter at " << c.counter_power_w << " W, " << (c.accepted ? "accepted" : "rejected");
}

class EnergyCounterValidationTest : public AmdSmiTest,
                                    public ::testing::WithParamInterface<CounterCase> {};

TEST_P(EnergyCounterValidationTest, AcceptsOnlyWithinAFactorOfTen) {
  const CounterCase c = GetParam();
  auto provider = open(script_of({device("X", {{"average_socket_power_w", 300},
                                               {"energy_resolution_uj", 16.0},
                                               {"counter_power_w", c.counter_power_w}})}));
  auto gpu = provider->open_gpu(0);
  EXPECT_EQ(gpu->supports_energy_counter(), c.accepted);
  if (!c.accepted) {
    EXPECT_THAT(expect_error([&] { gpu->total_energy_mj(); }, ErrorKind::kNotSupported),
                HasSubstr("disagrees"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ratios, EnergyCounterValidationTest,
    ::testing::Values(CounterCase{300, true}, CounterCase{31, true}, CounterCase{2900, true},
                      CounterCase{30, false}, CounterCase{3000, false}, CounterCase{0, false}),
    [](const ::testing::TestParamInfo<CounterCase>& param_info) {
      return "CounterAt" + std::to_string(static_cast<int>(param_info.param.counter_power_w)) + "W";
    });

TEST_F(AmdSmiTest, EnergyCounterDisabledWhenPowerReadsZero) {
  auto provider = open(script_of({device(
      "X",
      {{"current_socket_power_w", 0}, {"average_socket_power_w", 0}, {"counter_power_w", 50}})}));
  auto gpu = provider->open_gpu(0);
  EXPECT_FALSE(gpu->supports_energy_counter());
  EXPECT_THAT(expect_error([&] { gpu->total_energy_mj(); }, ErrorKind::kNotSupported),
              HasSubstr("power reads zero"));
}

TEST_F(AmdSmiTest, EnergyCounterFailureAtOpenDisablesIt) {
  auto provider = open(script_of({device("X")}, status_override("amdsmi_get_energy_count", 2)));
  EXPECT_FALSE(provider->open_gpu(0)->supports_energy_counter());
  EXPECT_TRUE(sleeps_s_.empty());
}

TEST_F(AmdSmiTest, ValidationWithTheRealClockAndSleep) {
  full_fake().configure(script_of({device("X")}));
  zeus::device::AmdSmiOptions opts;
  opts.validation_window_s = 0.01;
  opts.env = env_of({});
  const auto start = std::chrono::steady_clock::now();
  auto provider = zeus::device::open_amdsmi_with_options(full_fake().path(), opts);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Fake time did not move, so the counter stood still while power read 100 W.
  EXPECT_FALSE(provider->open_gpu(0)->supports_energy_counter());
}

TEST_F(AmdSmiTest, Mi250OddChipletHasNoPowerOfItsOwn) {
  auto provider =
      open(script_of({device("AMD Instinct MI250X", {{"socket", 0},
                                                     {"current_socket_power_w", nullptr},
                                                     {"average_socket_power_w", 400}}),
                      device("AMD Instinct MI250X", {{"socket", 0},
                                                     {"current_socket_power_w", nullptr},
                                                     {"average_socket_power_w", 0},
                                                     {"counter_power_w", 0}})}));
  auto even = provider->open_gpu(0);
  auto odd = provider->open_gpu(1);
  EXPECT_EQ(even->average_power_mw(), 400'000U);
  EXPECT_TRUE(even->supports_energy_counter());
  EXPECT_EQ(odd->name(), "AMD Instinct MI250X");
  EXPECT_FALSE(odd->supports_energy_counter());
  for (const auto& message :
       {expect_error([&] { odd->average_power_mw(); }, ErrorKind::kNotSupported),
        expect_error([&] { odd->instant_power_mw(); }, ErrorKind::kNotSupported),
        expect_error([&] { odd->total_energy_mj(); }, ErrorKind::kNotSupported)}) {
    EXPECT_THAT(message, HasSubstr("GPU 0"));
    EXPECT_THAT(message, HasSubstr("MI250"));
  }
  EXPECT_EQ(odd->temperature_c(), 40);
}

TEST_F(AmdSmiTest, Mi250WithPowerOnBothDiesIsNotAnOddChiplet) {
  auto provider = open(script_of({device("AMD Instinct MI250X"), device("AMD Instinct MI250X")}));
  EXPECT_EQ(provider->open_gpu(1)->average_power_mw(), 100'000U);
  EXPECT_TRUE(provider->open_gpu(1)->supports_energy_counter());
}

// ---- Optional symbols ----

TEST_F(AmdSmiTest, MissingOptionalSymbolsAreNotSupported) {
  auto provider = open(script_of({device("X"), device("Y")}), minimal_fake());
  auto gpu = provider->open_gpu(0);
  EXPECT_TRUE(sleeps_s_.empty());
  EXPECT_FALSE(gpu->supports_energy_counter());
  EXPECT_THAT(expect_error([&] { gpu->total_energy_mj(); }, ErrorKind::kNotSupported),
              HasSubstr("amdsmi_get_energy_count"));
  EXPECT_THAT(expect_error([&] { gpu->supported_memory_clocks_mhz(); }, ErrorKind::kNotSupported),
              HasSubstr("amdsmi_get_clk_freq"));
  expect_error([&] { gpu->supported_graphics_clocks_mhz(std::nullopt); }, ErrorKind::kNotSupported);
  expect_error([&] { gpu->set_gpu_locked_clocks_mhz(500, 1000); }, ErrorKind::kNotSupported);
  expect_error([&] { gpu->reset_locked_clocks(); }, ErrorKind::kNotSupported);
  EXPECT_EQ(provider->driver_version(), "");
  // What the required symbols give still works.
  EXPECT_EQ(gpu->average_power_mw(), 100'000U);
  EXPECT_EQ(gpu->temperature_c(), 40);
  gpu->set_power_limit_mw(500'000);
  EXPECT_EQ(minimal_fake().device_state(0).at("power_cap_uw"), 500'000'000);
}

// ---- Status codes ----

struct StatusCase {
  std::uint32_t code;
  ErrorKind kind;
  const char* name;
};

void PrintTo(const StatusCase& c, std::ostream* out) {
  *out << c.name << " (" << c.code << ")";
}

class StatusMappingTest : public AmdSmiTest, public ::testing::WithParamInterface<StatusCase> {};

TEST_P(StatusMappingTest, MapsToErrorKindAndKeepsTheCode) {
  const StatusCase c = GetParam();
  EXPECT_EQ(zeus::device::amdsmi::error_kind_for_status(c.code), c.kind);
  EXPECT_EQ(zeus::device::amdsmi::status_name(c.code), c.name);
  auto provider = open(script_of({device("X")}));
  full_fake().set_status("amdsmi_get_temp_metric", c.code);
  try {
    provider->open_gpu(0)->temperature_c();
    FAIL() << "no error";
  } catch (const zeus::VendorError& error) {
    EXPECT_EQ(error.kind(), c.kind);
    EXPECT_EQ(error.vendor(), "amdsmi");
    EXPECT_EQ(error.call(), "amdsmi_get_temp_metric");
    EXPECT_EQ(error.vendor_code(), static_cast<long long>(c.code));
    EXPECT_THAT(error.what(), HasSubstr(c.name));
    EXPECT_THAT(error.what(), HasSubstr("hotspot temperature on GPU 0"));
    EXPECT_EQ(std::string(error.what()).find(zeus::permission_hint()) != std::string::npos,
              c.kind == ErrorKind::kNoPermission);
  }
}

INSTANTIATE_TEST_SUITE_P(
    ReferenceTable, StatusMappingTest,
    ::testing::Values(
        StatusCase{1, ErrorKind::kInvalidArgument, "AMDSMI_STATUS_INVAL"},
        StatusCase{2, ErrorKind::kNotSupported, "AMDSMI_STATUS_NOT_SUPPORTED"},
        StatusCase{8, ErrorKind::kTimeout, "AMDSMI_STATUS_TIMEOUT"},
        StatusCase{10, ErrorKind::kNoPermission, "AMDSMI_STATUS_NO_PERM"},
        StatusCase{15, ErrorKind::kMemory, "AMDSMI_STATUS_OUT_OF_RESOURCES"},
        StatusCase{18, ErrorKind::kInitError, "AMDSMI_STATUS_INIT_ERROR"},
        StatusCase{31, ErrorKind::kNotFound, "AMDSMI_STATUS_NOT_FOUND"},
        StatusCase{32, ErrorKind::kUninitialized, "AMDSMI_STATUS_NOT_INIT"},
        StatusCase{34, ErrorKind::kDriverNotLoaded, "AMDSMI_STATUS_DRIVER_NOT_LOADED"},
        StatusCase{41, ErrorKind::kInsufficientSize, "AMDSMI_STATUS_INSUFFICIENT_SIZE"},
        StatusCase{45, ErrorKind::kDriverNotLoaded, "AMDSMI_STATUS_NO_ENERGY_DRV"},
        StatusCase{46, ErrorKind::kDriverNotLoaded, "AMDSMI_STATUS_NO_MSR_DRV"},
        StatusCase{47, ErrorKind::kDriverNotLoaded, "AMDSMI_STATUS_NO_HSMP_DRV"},
        StatusCase{48, ErrorKind::kNotSupported, "AMDSMI_STATUS_NO_HSMP_SUP"},
        StatusCase{49, ErrorKind::kNotSupported, "AMDSMI_STATUS_NO_HSMP_MSG_SUP"},
        StatusCase{50, ErrorKind::kTimeout, "AMDSMI_STATUS_HSMP_TIMEOUT"},
        StatusCase{51, ErrorKind::kDriverNotLoaded, "AMDSMI_STATUS_NO_DRV"},
        StatusCase{52, ErrorKind::kLibraryNotFound, "AMDSMI_STATUS_FILE_NOT_FOUND"},
        StatusCase{53, ErrorKind::kInvalidArgument, "AMDSMI_STATUS_ARG_PTR_NULL"},
        StatusCase{0xFFFFFFFFu, ErrorKind::kUnknown, "AMDSMI_STATUS_UNKNOWN_ERROR"},
        StatusCase{7, ErrorKind::kUnknown, "AMDSMI_STATUS_API_FAILED"},
        StatusCase{77, ErrorKind::kUnknown, "AMDSMI_STATUS_77"}),
    [](const ::testing::TestParamInfo<StatusCase>& param_info) {
      return "Status" + std::to_string(param_info.param.code);
    });

}  // namespace
