// The AMD SMI backend against the fake libamd_smi.so (tests/device/amdsmi/fake_amdsmi.cpp),
// loaded through the real dlopen path. The test dlopens the same file to script it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "amdsmi_test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using zeus::ErrorKind;
using namespace zeus::testing::amdsmi;

// ---- Loading ----

TEST_F(AmdSmiTest, OpensThroughDlopenAndReportsLibraryDetails) {
  auto provider = open(script_of({device("AMD Instinct MI300X"), device("AMD Instinct MI300X")}));
  EXPECT_EQ(provider->backend(), zeus::device::GpuBackend::kAmdSmi);
  EXPECT_EQ(provider->device_count(), 2);
  EXPECT_EQ(provider->library_path(), full_fake().path());
  EXPECT_EQ(provider->library_version(), "26.1.0");
  EXPECT_EQ(provider->driver_version(), "6.8.5");
  EXPECT_EQ(full_fake().state().at("init_count"), 1);
}

TEST_F(AmdSmiTest, ShutsDownAfterTheLastUser) {
  auto provider = open(script_of({device("AMD Instinct MI300X")}));
  auto gpu = provider->open_gpu(0);
  provider.reset();
  EXPECT_EQ(full_fake().state().at("shutdown_calls"), 0);
  EXPECT_EQ(gpu->name(), "AMD Instinct MI300X");
  gpu.reset();
  EXPECT_EQ(full_fake().state().at("shutdown_calls"), 1);
  EXPECT_EQ(full_fake().state().at("init_count"), 0);
}

TEST_F(AmdSmiTest, MissingLibraryIsLibraryNotFound) {
  const std::string message =
      expect_error([] { zeus::device::open_amdsmi("/nonexistent/zeus-test/libamd_smi.so"); },
                   ErrorKind::kLibraryNotFound);
  EXPECT_THAT(message, HasSubstr("/nonexistent/zeus-test/libamd_smi.so"));
}

TEST_F(AmdSmiTest, DefaultNameSearchesAmdSmiLibDir) {
  full_fake().configure(script_of({device("AMD Instinct MI300X")}));
  auto opts = options(full_fake());
  opts.env = env_of(
      {{"AMDSMI_LIB_DIR", std::filesystem::path(full_fake().path()).parent_path().string() + "/"}});
  auto provider = zeus::device::open_amdsmi_with_options(zeus::device::kDefaultAmdSmiLibrary, opts);
  EXPECT_EQ(provider->library_path(), full_fake().path());
  EXPECT_EQ(provider->device_count(), 1);
}

TEST_F(AmdSmiTest, DefaultNameSearchesRocmPathLib) {
  const auto root =
      std::filesystem::temp_directory_path() / ("zeus-amdsmi-rocm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "lib");
  std::filesystem::remove(root / "lib" / "libamd_smi.so");
  std::filesystem::create_symlink(full_fake().path(), root / "lib" / "libamd_smi.so");
  full_fake().configure(script_of({device("AMD Instinct MI300X"), device("AMD Instinct MI300X")}));
  auto opts = options(full_fake());
  opts.env = env_of({{"AMDSMI_LIB_DIR", "/nonexistent/zeus-test"}, {"ROCM_PATH", root.string()}});
  auto provider = zeus::device::open_amdsmi_with_options(zeus::device::kDefaultAmdSmiLibrary, opts);
  EXPECT_EQ(provider->device_count(), 2);  // the scripted fake, reached through the symlink
  provider.reset();
  std::filesystem::remove_all(root);
}

TEST_F(AmdSmiTest, DefaultNameWithNothingInstalledListsWhatWasTried) {
  if (void* system_library = dlopen("libamd_smi.so", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(system_library);
    GTEST_SKIP() << "this machine has a real libamd_smi.so";
  }
  if (std::filesystem::exists("/opt/rocm/lib/libamd_smi.so")) {
    GTEST_SKIP() << "this machine has /opt/rocm/lib/libamd_smi.so";
  }
  auto opts = options(full_fake());
  opts.env = env_of({{"AMDSMI_LIB_DIR", "/nonexistent/zeus-hint"}});
  const std::string message = expect_error(
      [&] { zeus::device::open_amdsmi_with_options(zeus::device::kDefaultAmdSmiLibrary, opts); },
      ErrorKind::kLibraryNotFound);
  EXPECT_THAT(message, HasSubstr("/nonexistent/zeus-hint/libamd_smi.so"));
  EXPECT_THAT(message, HasSubstr("/opt/rocm/lib/libamd_smi.so"));
  EXPECT_THAT(message, HasSubstr("ZEUS_AMDSMI_LIBRARY"));
}

TEST_F(AmdSmiTest, MissingRequiredSymbolIsFunctionNotFound) {
  const std::string message = expect_error([] { zeus::device::open_amdsmi(broken_fake_path()); },
                                           ErrorKind::kFunctionNotFound);
  EXPECT_THAT(message, HasSubstr("amdsmi_get_power_info"));
}

// Python and other callers tell GPU errors from CPU errors by Error::subject().
TEST_F(AmdSmiTest, ErrorsAreAboutAGpu) {
  full_fake().configure(
      script_of({device("AMD Instinct MI300X")}, status_override("amdsmi_init", 34)));
  try {
    zeus::device::open_amdsmi_with_options(full_fake().path(), options(full_fake()));
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kGpu);
  }
  try {
    zeus::device::open_amdsmi("/nonexistent/zeus-test/libamd_smi.so");
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kGpu);
  }
  auto gpu = open(script_of({device("X")}))->open_gpu(0);
  try {
    gpu->set_persistence_mode(true);
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotSupported);
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kGpu);
  }
}

TEST_F(AmdSmiTest, InitFailureIsVendorError) {
  full_fake().configure(
      script_of({device("AMD Instinct MI300X")}, status_override("amdsmi_init", 34)));
  try {
    zeus::device::open_amdsmi_with_options(full_fake().path(), options(full_fake()));
    FAIL() << "no error";
  } catch (const zeus::VendorError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kDriverNotLoaded);
    EXPECT_EQ(error.vendor(), "amdsmi");
    EXPECT_EQ(error.call(), "amdsmi_init");
    EXPECT_EQ(error.vendor_code(), 34);
    EXPECT_THAT(error.what(), HasSubstr("AMDSMI_STATUS_DRIVER_NOT_LOADED"));
  }
  EXPECT_EQ(full_fake().state().at("shutdown_calls"), 0);
}

TEST_F(AmdSmiTest, ScriptFromEnvironmentIsLoadedAtInit) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("zeus-amdsmi-script-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream file(path);
    file << script_of({device("AMD Instinct MI210"), device("AMD Instinct MI210"),
                       device("AMD Instinct MI210")})
                .dump();
  }
  ::setenv("ZEUS_FAKE_AMDSMI_CONFIG", path.c_str(), 1);
  auto provider = zeus::device::open_amdsmi_with_options(full_fake().path(), options(full_fake()));
  ::unsetenv("ZEUS_FAKE_AMDSMI_CONFIG");
  std::filesystem::remove(path);
  ASSERT_EQ(provider->device_count(), 3);
  EXPECT_EQ(provider->open_gpu(2)->name(), "AMD Instinct MI210");
}

TEST_F(AmdSmiTest, NoDevicesNoValidationWait) {
  auto provider = open(script_of({}));
  EXPECT_EQ(provider->device_count(), 0);
  EXPECT_TRUE(sleeps_s_.empty());
  EXPECT_EQ(provider->driver_version(), "");
}

TEST_F(AmdSmiTest, OpenGpuOutOfRangeIsNotFound) {
  auto provider = open(script_of({device("AMD Instinct MI300X")}));
  expect_error([&] { provider->open_gpu(1); }, ErrorKind::kNotFound);
  expect_error([&] { provider->open_gpu(-1); }, ErrorKind::kNotFound);
  expect_error([&] { provider->device_uuid(7); }, ErrorKind::kNotFound);
}

// ---- Identity and ordering ----

TEST_F(AmdSmiTest, NamesUuidsAndPciBusIds) {
  auto provider = open(
      script_of({device("AMD Instinct MI300X", {{"uuid", "a1ff74a1-0000-1000-80e3-7a8f9c2b4d10"},
                                                {"bdf", "0000:c1:00.0"}}),
                 device("AMD Radeon RX 7900 XTX", {{"bdf", "0001:3b:1f.7"}}), device(""),
                 device("AMD Instinct MI250X"), device("Mystery Accelerator")}));
  auto first = provider->open_gpu(0);
  EXPECT_EQ(first->name(), "AMD Instinct MI300X");
  EXPECT_EQ(first->uuid(), "a1ff74a1-0000-1000-80e3-7a8f9c2b4d10");
  EXPECT_EQ(provider->device_uuid(0), "a1ff74a1-0000-1000-80e3-7a8f9c2b4d10");
  EXPECT_EQ(first->pci_bus_id(), "00000000:C1:00.0");
  EXPECT_EQ(first->architecture(), "cdna3");
  EXPECT_EQ(first->backend(), zeus::device::GpuBackend::kAmdSmi);
  EXPECT_EQ(provider->open_gpu(1)->pci_bus_id(), "00000001:3B:1F.7");
  EXPECT_EQ(provider->open_gpu(1)->architecture(), "rdna3");
  EXPECT_EQ(provider->open_gpu(2)->name(), "AMD GPU");
  EXPECT_EQ(provider->open_gpu(3)->architecture(), "cdna2");
  EXPECT_EQ(provider->open_gpu(4)->architecture(), "unknown");
}

TEST_F(AmdSmiTest, OrdersDevicesByHipIndex) {
  // AMD SMI enumerates A, B, C; HIP numbers them B, C, A; KFD node ids would say A, C, B.
  auto provider = open(script_of({device("A", {{"hip_id", 2}, {"node_id", 1}}),
                                  device("B", {{"hip_id", 0}, {"node_id", 3}}),
                                  device("C", {{"hip_id", 1}, {"node_id", 2}})}));
  ASSERT_EQ(provider->device_count(), 3);
  EXPECT_EQ(provider->open_gpu(0)->name(), "B");
  EXPECT_EQ(provider->open_gpu(1)->name(), "C");
  EXPECT_EQ(provider->open_gpu(2)->name(), "A");
}

TEST_F(AmdSmiTest, OrdersByKfdNodeIdWithoutEnumerationInfo) {
  auto provider = open(script_of({device("A", {{"hip_id", 2}, {"node_id", 1}}),
                                  device("B", {{"hip_id", 0}, {"node_id", 3}}),
                                  device("C", {{"hip_id", 1}, {"node_id", 2}})}),
                       minimal_fake());
  ASSERT_EQ(provider->device_count(), 3);
  EXPECT_EQ(provider->open_gpu(0)->name(), "A");
  EXPECT_EQ(provider->open_gpu(1)->name(), "C");
  EXPECT_EQ(provider->open_gpu(2)->name(), "B");
}

TEST_F(AmdSmiTest, FallsBackToKfdWhenEnumerationInfoFails) {
  auto provider = open(script_of(
      {device("A", {{"hip_id", 2}, {"node_id", 1}}), device("B", {{"hip_id", 0}, {"node_id", 3}})},
      status_override("amdsmi_get_gpu_enumeration_info", 2)));
  EXPECT_EQ(provider->open_gpu(0)->name(), "A");
  EXPECT_EQ(provider->open_gpu(1)->name(), "B");
}

TEST_F(AmdSmiTest, DevicesSharingASocketAreAllListed) {
  auto provider = open(script_of({device("A", {{"socket", 0}, {"hip_id", 1}}),
                                  device("B", {{"socket", 0}, {"hip_id", 0}}),
                                  device("C", {{"socket", 1}, {"hip_id", 2}})}));
  ASSERT_EQ(provider->device_count(), 3);
  EXPECT_EQ(provider->open_gpu(0)->name(), "B");
  EXPECT_EQ(provider->open_gpu(2)->name(), "C");
}

// ---- Units ----

TEST_F(AmdSmiTest, ConvertsPowerCapsFromMicrowatts) {
  auto provider = open(script_of({device("X", {{"min_power_cap_uw", 100'000'000},
                                               {"max_power_cap_uw", 300'000'000},
                                               {"default_power_cap_uw", 300'000'000},
                                               {"power_cap_uw", 250'000'000}})}));
  auto gpu = provider->open_gpu(0);
  const auto constraints = gpu->power_limit_constraints_mw();
  EXPECT_EQ(constraints.min_mw, 100'000U);
  EXPECT_EQ(constraints.max_mw, 300'000U);
  EXPECT_EQ(gpu->default_power_limit_mw(), 300'000U);
  EXPECT_EQ(gpu->power_limit_mw(), 250'000U);
  EXPECT_EQ(gpu->enforced_power_limit_mw(), 250'000U);
}

TEST_F(AmdSmiTest, InexactMicrowattsRoundTheRangeInward) {
  auto provider = open(script_of({device("X", {{"min_power_cap_uw", 100'000'500},
                                               {"max_power_cap_uw", 299'999'500},
                                               {"power_cap_uw", 200'000'700}})}));
  auto gpu = provider->open_gpu(0);
  const auto constraints = gpu->power_limit_constraints_mw();
  EXPECT_EQ(constraints.min_mw, 100'001U);
  EXPECT_EQ(constraints.max_mw, 299'999U);
  EXPECT_EQ(gpu->power_limit_mw(), 200'000U);
}

TEST_F(AmdSmiTest, ConvertsSocketPowerFromWatts) {
  auto provider = open(
      script_of({device("X", {{"current_socket_power_w", 312}, {"average_socket_power_w", 298}})}));
  auto gpu = provider->open_gpu(0);
  EXPECT_EQ(gpu->instant_power_mw(), 312'000U);
  EXPECT_EQ(gpu->average_power_mw(), 298'000U);
}

TEST_F(AmdSmiTest, ReadsTheOldPowerInfoLayout) {
  auto provider = open(script_of(
      {device("X", {{"current_socket_power_w", 250}, {"average_socket_power_w", nullptr}})},
      {{"version", {24, 7, 1, 0}}}));
  EXPECT_EQ(provider->library_version(), "24.7.1.0");
  auto gpu = provider->open_gpu(0);
  EXPECT_EQ(gpu->instant_power_mw(), 250'000U);
  expect_error([&] { gpu->average_power_mw(); }, ErrorKind::kNotSupported);
  EXPECT_TRUE(gpu->supports_energy_counter());  // validated against the instant power
}

TEST_F(AmdSmiTest, UnreportedPowerFieldIsNotSupported) {
  auto provider = open(script_of(
      {device("X", {{"current_socket_power_w", nullptr}, {"average_socket_power_w", 120}})}));
  auto gpu = provider->open_gpu(0);
  const std::string message =
      expect_error([&] { gpu->instant_power_mw(); }, ErrorKind::kNotSupported);
  EXPECT_THAT(message, HasSubstr("average_power_mw"));
  EXPECT_EQ(gpu->average_power_mw(), 120'000U);
  expect_error([&] { gpu->average_memory_power_mw(); }, ErrorKind::kNotSupported);
}

TEST_F(AmdSmiTest, EnergyIsAccumulatorTimesResolution) {
  auto provider = open(script_of({device("X", {{"average_socket_power_w", 300},
                                               {"energy_accumulator", 1'000'000},
                                               {"energy_resolution_uj", 16.0}})}));
  auto gpu = provider->open_gpu(0);
  ASSERT_TRUE(gpu->supports_energy_counter());
  // 16 J at start, plus 300 W over the 0.5 s validation window.
  EXPECT_EQ(gpu->total_energy_mj(), 166'000U);
  full_fake().advance_time_s(1.0);
  EXPECT_EQ(gpu->total_energy_mj(), 466'000U);
}

TEST_F(AmdSmiTest, TemperatureIsHotspotInCelsius) {
  auto provider = open(
      script_of({device("X", {{"temperature_c", 67}}), device("Y", {{"temperature_c", 71'000}})}));
  EXPECT_EQ(provider->open_gpu(0)->temperature_c(), 67);
  EXPECT_EQ(provider->open_gpu(1)->temperature_c(), 71);  // a millidegree library
}

TEST_F(AmdSmiTest, SupportedClocksAreTheFullListsInMegahertz) {
  auto provider = open(script_of({device(
      "X", {{"gfx_clocks_mhz", {500, 1700, 2100, 1700, 1300}}, {"mem_clocks_mhz", {900, 1300}}})}));
  auto gpu = provider->open_gpu(0);
  EXPECT_THAT(gpu->supported_memory_clocks_mhz(), ElementsAre(1300U, 900U));
  EXPECT_THAT(gpu->supported_graphics_clocks_mhz(std::nullopt),
              ElementsAre(2100U, 1700U, 1300U, 500U));
  EXPECT_THAT(gpu->supported_graphics_clocks_mhz(900U), ElementsAre(2100U, 1700U, 1300U, 500U));
  expect_error([&] { gpu->supported_graphics_clocks_mhz(1000U); }, ErrorKind::kInvalidArgument);
}

// ---- Setters ----

TEST_F(AmdSmiTest, SetPowerLimitInRange) {
  auto provider = open(script_of(
      {device("X", {{"min_power_cap_uw", 100'000'000}, {"max_power_cap_uw", 300'000'000}})}));
  provider->open_gpu(0)->set_power_limit_mw(250'000);
  EXPECT_EQ(full_fake().device_state(0).at("power_cap_uw"), 250'000'000);
  EXPECT_EQ(full_fake().device_state(0).at("set_power_cap_calls"), 1);
  EXPECT_EQ(provider->open_gpu(0)->power_limit_mw(), 250'000U);
}

TEST_F(AmdSmiTest, SetPowerLimitOutOfRangeNamesTheRange) {
  auto provider = open(script_of(
      {device("X", {{"min_power_cap_uw", 100'000'000}, {"max_power_cap_uw", 300'000'000}})}));
  auto gpu = provider->open_gpu(0);
  EXPECT_THAT(expect_error([&] { gpu->set_power_limit_mw(350'000); }, ErrorKind::kInvalidArgument),
              HasSubstr("[100000, 300000] mW"));
  expect_error([&] { gpu->set_power_limit_mw(99'999); }, ErrorKind::kInvalidArgument);
  EXPECT_EQ(full_fake().device_state(0).at("set_power_cap_calls"), 0);
}

TEST_F(AmdSmiTest, SetPowerLimitIsANoOpWhenEqual) {
  auto provider = open(script_of({device("X", {{"power_cap_uw", 200'000'000}})}));
  provider->open_gpu(0)->set_power_limit_mw(200'000);
  EXPECT_EQ(full_fake().device_state(0).at("set_power_cap_calls"), 0);
}

TEST_F(AmdSmiTest, SetPowerLimitPermissionDeniedKeepsVendorDetails) {
  auto provider = open(script_of({device("X", {{"power_cap_uw", 200'000'000}})}));
  full_fake().set_status("amdsmi_set_power_cap", 10);
  try {
    provider->open_gpu(0)->set_power_limit_mw(150'000);
    FAIL() << "no error";
  } catch (const zeus::VendorError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_EQ(error.vendor(), "amdsmi");
    EXPECT_EQ(error.call(), "amdsmi_set_power_cap");
    EXPECT_EQ(error.vendor_code(), 10);
    EXPECT_THAT(error.what(), HasSubstr("AMDSMI_STATUS_NO_PERM"));
    EXPECT_THAT(error.what(), HasSubstr("150000 mW"));
    EXPECT_THAT(error.what(), HasSubstr(std::string(zeus::permission_hint())));
  }
}

TEST_F(AmdSmiTest, ResetPowerLimitRestoresTheDefaultOnce) {
  auto provider = open(script_of(
      {device("X", {{"default_power_cap_uw", 300'000'000}, {"power_cap_uw", 200'000'000}})}));
  auto gpu = provider->open_gpu(0);
  gpu->reset_power_limit();
  EXPECT_EQ(full_fake().device_state(0).at("power_cap_uw"), 300'000'000);
  gpu->reset_power_limit();
  EXPECT_EQ(full_fake().device_state(0).at("set_power_cap_calls"), 1);
}

TEST_F(AmdSmiTest, LockedClocksAndResetToAuto) {
  auto provider = open(script_of({device("X")}));
  auto gpu = provider->open_gpu(0);
  gpu->set_gpu_locked_clocks_mhz(500, 1700);
  gpu->set_memory_locked_clocks_mhz(900, 1300);
  EXPECT_EQ(full_fake().device_state(0).at("gfx_range_mhz"), nlohmann::json({500, 1700}));
  EXPECT_EQ(full_fake().device_state(0).at("mem_range_mhz"), nlohmann::json({900, 1300}));
  expect_error([&] { gpu->set_gpu_locked_clocks_mhz(1700, 500); }, ErrorKind::kInvalidArgument);
  gpu->reset_locked_clocks();
  EXPECT_EQ(full_fake().device_state(0).at("perf_level"), 0);  // AUTO
  EXPECT_EQ(full_fake().device_state(0).at("perf_level_calls"), 1);
  EXPECT_TRUE(full_fake().device_state(0).at("gfx_range_mhz").is_null());
}

TEST_F(AmdSmiTest, UnsupportedControlsAreNotSupported) {
  auto provider = open(script_of({device("X")}));
  auto gpu = provider->open_gpu(0);
  expect_error([&] { gpu->persistence_mode(); }, ErrorKind::kNotSupported);
  expect_error([&] { gpu->set_persistence_mode(true); }, ErrorKind::kNotSupported);
  EXPECT_THAT(expect_error([&] { gpu->reset_gpu_locked_clocks(); }, ErrorKind::kNotSupported),
              HasSubstr("reset_locked_clocks"));
  expect_error([&] { gpu->reset_memory_locked_clocks(); }, ErrorKind::kNotSupported);
  expect_error([&] { gpu->average_memory_power_mw(); }, ErrorKind::kNotSupported);
  EXPECT_EQ(full_fake().device_state(0).at("perf_level_calls"), 0);
}

}  // namespace
