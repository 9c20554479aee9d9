// The NVML backend, exercised through the real dlopen path against the fake libnvidia-ml.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace {

using nlohmann::json;
using zeus::ErrorKind;

json h100(int index) {
  const std::string suffix = std::to_string(index);
  return {{"name", "NVIDIA H100 80GB HBM3"},
          {"uuid", "GPU-aaaaaaa" + suffix + "-0000-4000-8000-00000000000" + suffix},
          {"pci_bus_id", "00000000:1" + suffix + ":00.0"},
          {"architecture", 9},
          {"power_limit_min_mw", 200000},
          {"power_limit_max_mw", 700000},
          {"power_limit_default_mw", 700000},
          {"power_limit_mw", 700000},
          {"power_usage_mw", 111000},
          {"power_fields", {{"186:0", 123000}, {"185:0", 120000}, {"185:2", 40000}}},
          {"energy_mj", 5000},
          {"energy_step_mj", 250},
          {"temperature_c", 41},
          {"persistence_mode", 0},
          {"memory_clocks_mhz", {2619, 1593}},
          {"graphics_clocks_mhz", {{"2619", {1980, 1965, 1950}}, {"1593", {1500, 1485}}}}};
}

class FakeNvml {
 public:
  // `path` is the fake library built next to this test.
  explicit FakeNvml(const char* path) : path_(path) {
    handle_ = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      throw std::runtime_error(dlerror());
    }
    configure_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle_, "fake_nvml_configure"));
    state_ = reinterpret_cast<const char* (*)()>(dlsym(handle_, "fake_nvml_state"));
  }
  ~FakeNvml() { dlclose(handle_); }
  void configure(const json& config) const { ASSERT_EQ(configure_(config.dump().c_str()), 0); }
  json state() const { return json::parse(state_()); }
  int calls(const std::string& function) const { return state()["calls"].value(function, 0); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_;
  int (*configure_)(const char*);
  const char* (*state_)();
};

class NvmlTest : public ::testing::Test {
 protected:
  FakeNvml fake_{ZEUS_FAKE_NVML_PATH};
  std::shared_ptr<zeus::device::GpuProvider> open(const json& config) {
    fake_.configure(config);
    return zeus::device::open_nvml(fake_.path());
  }
};

template <typename Fn>
zeus::VendorError vendor_error(Fn fn) {
  try {
    fn();
  } catch (const zeus::VendorError& error) {
    return error;
  }
  throw std::runtime_error("expected a VendorError");
}

TEST_F(NvmlTest, EnumeratesDevicesAndVersions) {
  auto nvml = open({{"driver_version", "560.35.03"},
                    {"nvml_version", "12.560.35.03"},
                    {"devices", {h100(0), h100(1)}}});
  EXPECT_EQ(nvml->backend(), zeus::device::GpuBackend::kNvml);
  EXPECT_EQ(nvml->device_count(), 2);
  EXPECT_EQ(nvml->driver_version(), "560.35.03");
  EXPECT_EQ(nvml->library_version(), "12.560.35.03");
  EXPECT_NE(nvml->library_path().find("libnvidia-ml.so"), std::string::npos);
  auto gpu = nvml->open_gpu(1);
  EXPECT_EQ(gpu->name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu->uuid(), "GPU-aaaaaaa1-0000-4000-8000-000000000001");
  EXPECT_EQ(gpu->pci_bus_id(), "00000000:11:00.0");
  EXPECT_EQ(gpu->architecture(), "hopper");
  EXPECT_EQ(gpu->temperature_c(), 41);
}

TEST_F(NvmlTest, ShutsDownWhenTheLastUserIsGone) {
  {
    auto nvml = open({{"devices", {h100(0)}}});
    auto gpu = nvml->open_gpu(0);
    nvml.reset();
    EXPECT_EQ(fake_.state()["init_count"], 1);  // the GPU keeps the library alive
    EXPECT_EQ(gpu->power_limit_mw(), 700000u);
  }
  EXPECT_EQ(fake_.state()["init_count"], 0);
}

TEST_F(NvmlTest, PowerLimits) {
  auto gpu = open({{"devices", {h100(0)}}})->open_gpu(0);
  const auto range = gpu->power_limit_constraints_mw();
  EXPECT_EQ(range.min_mw, 200000u);
  EXPECT_EQ(range.max_mw, 700000u);
  EXPECT_EQ(gpu->default_power_limit_mw(), 700000u);
  gpu->set_power_limit_mw(450000);
  EXPECT_EQ(gpu->power_limit_mw(), 450000u);
  EXPECT_EQ(gpu->enforced_power_limit_mw(), 450000u);
  EXPECT_EQ(fake_.calls("nvmlDeviceSetPowerManagementLimit"), 1);
  gpu->set_power_limit_mw(450000);  // already in force: no call
  EXPECT_EQ(fake_.calls("nvmlDeviceSetPowerManagementLimit"), 1);
  gpu->reset_power_limit();
  EXPECT_EQ(gpu->power_limit_mw(), 700000u);
  EXPECT_EQ(fake_.calls("nvmlDeviceSetPowerManagementLimit"), 2);
}

TEST_F(NvmlTest, OutOfRangeLimitNamesTheRange) {
  auto gpu = open({{"devices", {h100(0)}}})->open_gpu(0);
  try {
    gpu->set_power_limit_mw(150000);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("[200000, 700000] mW"), std::string::npos);
  }
  EXPECT_EQ(fake_.calls("nvmlDeviceSetPowerManagementLimit"), 0);
}

TEST_F(NvmlTest, PermissionDeniedSaysHowToGetTheRight) {
  auto gpu = open({{"devices", {h100(0)}}, {"fail", {{"nvmlDeviceSetPowerManagementLimit", 4}}}})
                 ->open_gpu(0);
  const zeus::VendorError error = vendor_error([&] { gpu->set_power_limit_mw(300000); });
  EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
  EXPECT_EQ(error.vendor(), "nvml");
  EXPECT_EQ(error.call(), "nvmlDeviceSetPowerManagementLimit");
  EXPECT_EQ(error.vendor_code(), 4);
  const std::string message = error.what();
  EXPECT_NE(message.find("NVML_ERROR_NO_PERMISSION"), std::string::npos);
  EXPECT_NE(message.find("Insufficient Permissions"), std::string::npos);
  EXPECT_NE(message.find("CAP_SYS_ADMIN"), std::string::npos);
  EXPECT_NE(message.find("zeusd"), std::string::npos);
}

TEST_F(NvmlTest, EveryReturnCodeMapsToATypedError) {
  const std::map<int, ErrorKind> expected = {{1, ErrorKind::kUninitialized},
                                             {2, ErrorKind::kInvalidArgument},
                                             {3, ErrorKind::kNotSupported},
                                             {4, ErrorKind::kNoPermission},
                                             {5, ErrorKind::kAlreadyInitialized},
                                             {6, ErrorKind::kNotFound},
                                             {7, ErrorKind::kInsufficientSize},
                                             {8, ErrorKind::kInsufficientPower},
                                             {9, ErrorKind::kDriverNotLoaded},
                                             {10, ErrorKind::kTimeout},
                                             {11, ErrorKind::kIrqIssue},
                                             {12, ErrorKind::kLibraryNotFound},
                                             {13, ErrorKind::kFunctionNotFound},
                                             {14, ErrorKind::kCorruptedInfoRom},
                                             {15, ErrorKind::kGpuLost},
                                             {16, ErrorKind::kResetRequired},
                                             {17, ErrorKind::kOperatingSystem},
                                             {18, ErrorKind::kLibRmVersionMismatch},
                                             {20, ErrorKind::kMemory},
                                             {28, ErrorKind::kNotFound},
                                             {999, ErrorKind::kUnknown},
                                             {12345, ErrorKind::kUnknown}};
  for (const auto& [code, kind] : expected) {
    auto gpu =
        open({{"devices", {h100(0)}}, {"fail", {{"nvmlDeviceGetPowerManagementLimit", code}}}})
            ->open_gpu(0);
    const zeus::VendorError error = vendor_error([&] { gpu->power_limit_mw(); });
    EXPECT_EQ(error.kind(), kind) << "code " << code;
    EXPECT_EQ(error.vendor_code(), code);
    EXPECT_EQ(error.call(), "nvmlDeviceGetPowerManagementLimit");
    EXPECT_NE(std::string(error.what()).find("GPU 0"), std::string::npos);
  }
}

TEST_F(NvmlTest, InitFailureIsAVendorError) {
  fake_.configure({{"fail", {{"nvmlInit_v2", 9}}}});
  const zeus::VendorError error = vendor_error([&] { zeus::device::open_nvml(fake_.path()); });
  EXPECT_EQ(error.kind(), ErrorKind::kDriverNotLoaded);
  EXPECT_EQ(error.call(), "nvmlInit_v2");
}

TEST_F(NvmlTest, PowerFromGpuScopedFields) {
  auto gpu = open({{"devices", {h100(0)}}})->open_gpu(0);
  EXPECT_EQ(gpu->instant_power_mw(), 123000u);
  EXPECT_EQ(gpu->average_power_mw(), 120000u);
  EXPECT_EQ(gpu->average_memory_power_mw(), 40000u);
  EXPECT_EQ(fake_.calls("nvmlDeviceGetPowerUsage"), 0);
}

TEST_F(NvmlTest, PowerFallsBackToModuleScopeThenToPowerUsage) {
  json device = h100(0);
  device["power_fields"] = {{"186:1", 333000}};  // a Grace-Hopper module: only module scope
  auto gpu = open({{"devices", {device}}})->open_gpu(0);
  EXPECT_EQ(gpu->instant_power_mw(), 333000u);
  EXPECT_EQ(gpu->average_power_mw(), 111000u);  // no average field at all: nvmlDeviceGetPowerUsage
  try {
    gpu->average_memory_power_mw();
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotSupported);
  }
}

// GH200/GB200 (docs/devices.md, "Grace Hopper and Grace Blackwell: module scope").
json grace_hopper(int index) {
  json device = h100(index);
  device["name"] = "NVIDIA GH200 480GB";
  // The driver refuses GPU scope; the module's power is there.
  device["power_fields"] = {{"186:0", {{"nvml_return", 2}}},
                            {"185:0", {{"nvml_return", 2}}},
                            {"186:1", 450000},
                            {"185:1", 440000}};
  return device;
}

TEST_F(NvmlTest, DiscreteGpuMeasuresGpuScope) {
  auto gpu = open({{"devices", {h100(0)}}})->open_gpu(0);
  EXPECT_EQ(gpu->power_scope(), zeus::device::MeasuredScope::kGpu);
  EXPECT_EQ(gpu->energy_scope(), zeus::device::MeasuredScope::kGpu);
}

TEST_F(NvmlTest, GraceHopperMeasuresModuleScope) {
  auto gpu = open({{"devices", {grace_hopper(0)}}})->open_gpu(0);
  EXPECT_EQ(gpu->power_scope(), zeus::device::MeasuredScope::kModule);
  EXPECT_EQ(gpu->energy_scope(), zeus::device::MeasuredScope::kModule);
  EXPECT_EQ(gpu->instant_power_mw(), 450000u);
  EXPECT_EQ(gpu->average_power_mw(), 440000u);
  EXPECT_EQ(fake_.calls("nvmlDeviceGetPowerUsage"), 0);
}

TEST_F(NvmlTest, ModuleOnlyPowerMakesTheCounterModuleScopeWhateverTheName) {
  json device = grace_hopper(0);
  device["name"] = "NVIDIA Future Superchip";  // not a known name: the probe decides
  auto gpu = open({{"devices", {device}}})->open_gpu(0);
  EXPECT_EQ(gpu->energy_scope(), zeus::device::MeasuredScope::kModule);
  EXPECT_EQ(gpu->power_scope(), zeus::device::MeasuredScope::kModule);
}

TEST_F(NvmlTest, SuperchipCounterIsModuleScopeEvenWhenGpuPowerIsThere) {
  json device = h100(0);  // GPU-scope power fields
  device["name"] = "NVIDIA GB200";
  auto gpu = open({{"devices", {device}}})->open_gpu(0);
  EXPECT_EQ(gpu->power_scope(), zeus::device::MeasuredScope::kGpu);
  EXPECT_EQ(gpu->energy_scope(), zeus::device::MeasuredScope::kModule);
}

TEST_F(NvmlTest, PowerUsageFallbackIsModuleScopeOnlyOnASuperchip) {
  json discrete = h100(0);
  discrete.erase("power_fields");
  json superchip = h100(1);
  superchip.erase("power_fields");
  superchip["name"] = "NVIDIA GH200 120GB";
  auto nvml = open({{"devices", {discrete, superchip}}});
  EXPECT_EQ(nvml->open_gpu(0)->power_scope(), zeus::device::MeasuredScope::kGpu);
  EXPECT_EQ(nvml->open_gpu(1)->power_scope(), zeus::device::MeasuredScope::kModule);
  EXPECT_EQ(nvml->open_gpu(1)->energy_scope(), zeus::device::MeasuredScope::kModule);
}

TEST(GpuScope, SuperchipNamesAndScopeNames) {
  EXPECT_TRUE(zeus::device::is_grace_superchip_name("NVIDIA GH200 480GB"));
  EXPECT_TRUE(zeus::device::is_grace_superchip_name("nvidia gb200"));
  EXPECT_TRUE(zeus::device::is_grace_superchip_name("NVIDIA GB300"));
  EXPECT_FALSE(zeus::device::is_grace_superchip_name("NVIDIA H200"));
  EXPECT_FALSE(zeus::device::is_grace_superchip_name("NVIDIA H100 80GB HBM3"));
  EXPECT_EQ(zeus::device::measured_scope_name(zeus::device::MeasuredScope::kGpu), "gpu");
  EXPECT_EQ(zeus::device::measured_scope_name(zeus::device::MeasuredScope::kModule), "module");
  EXPECT_EQ(zeus::device::measured_scope_name(zeus::device::MeasuredScope::kUnknown), "unknown");
}

TEST_F(NvmlTest, EnergyCounterFromVoltaOn) {
  json pascal = h100(1);
  pascal["architecture"] = 4;
  auto nvml = open({{"devices", {h100(0), pascal}}});
  auto hopper_gpu = nvml->open_gpu(0);
  EXPECT_TRUE(hopper_gpu->supports_energy_counter());
  EXPECT_EQ(hopper_gpu->total_energy_mj(), 5000u);
  EXPECT_EQ(hopper_gpu->total_energy_mj(), 5250u);
  auto pascal_gpu = nvml->open_gpu(1);
  EXPECT_FALSE(pascal_gpu->supports_energy_counter());
  try {
    pascal_gpu->total_energy_mj();
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotSupported);
    EXPECT_NE(std::string(error.what()).find("Volta"), std::string::npos);
  }
}

TEST_F(NvmlTest, ClocksAndPersistenceMode) {
  auto gpu = open({{"devices", {h100(0)}}})->open_gpu(0);
  EXPECT_EQ(gpu->supported_memory_clocks_mhz(), (std::vector<std::uint32_t>{2619, 1593}));
  // Without a memory clock, the highest one is used (never a null argument).
  EXPECT_EQ(gpu->supported_graphics_clocks_mhz(std::nullopt),
            (std::vector<std::uint32_t>{1980, 1965, 1950}));
  EXPECT_EQ(gpu->supported_graphics_clocks_mhz(1593), (std::vector<std::uint32_t>{1500, 1485}));
  gpu->set_gpu_locked_clocks_mhz(1500, 1800);
  gpu->set_memory_locked_clocks_mhz(1593, 1593);
  EXPECT_EQ(fake_.state()["devices"][0]["locked_gpu_clocks_mhz"], json({1500, 1800}));
  gpu->reset_locked_clocks();
  EXPECT_FALSE(fake_.state()["devices"][0].contains("locked_gpu_clocks_mhz"));
  EXPECT_FALSE(fake_.state()["devices"][0].contains("locked_memory_clocks_mhz"));
  EXPECT_THROW(gpu->set_gpu_locked_clocks_mhz(1800, 1500), zeus::Error);

  EXPECT_FALSE(gpu->persistence_mode());
  gpu->set_persistence_mode(true);
  EXPECT_TRUE(gpu->persistence_mode());
  gpu->set_persistence_mode(true);
  EXPECT_EQ(fake_.calls("nvmlDeviceSetPersistenceMode"), 1);
}

TEST_F(NvmlTest, LostGpuIsReportedAsSuch) {
  json device = h100(0);
  device["fail"] = {{"nvmlDeviceGetTotalEnergyConsumption", 15}};
  auto gpu = open({{"devices", {device}}})->open_gpu(0);
  const zeus::VendorError error = vendor_error([&] { gpu->total_energy_mj(); });
  EXPECT_EQ(error.kind(), ErrorKind::kGpuLost);
}

TEST(NvmlLoading, MissingLibraryIsNotAvailable) {
  try {
    zeus::device::open_nvml("/nonexistent/libnvidia-ml.so.1");
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kLibraryNotFound);
    EXPECT_NE(std::string(error.what()).find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  }
}

TEST(NvmlLoading, LibraryWithoutNvmlSymbolsIsRejected) {
  try {
    zeus::device::open_nvml("libm.so.6");
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kFunctionNotFound);
    EXPECT_NE(std::string(error.what()).find("nvmlInit_v2"), std::string::npos);
  }
}

TEST(NvmlMinimal, MissingOptionalSymbolsMeanNotSupported) {
  FakeNvml fake(ZEUS_FAKE_NVML_MINIMAL_PATH);
  fake.configure({{"devices", {h100(0)}}});
  auto nvml = zeus::device::open_nvml(fake.path());
  EXPECT_EQ(nvml->driver_version(), "");
  auto gpu = nvml->open_gpu(0);
  EXPECT_EQ(gpu->name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu->architecture(), "unknown");
  EXPECT_FALSE(gpu->supports_energy_counter());
  EXPECT_EQ(gpu->instant_power_mw(), 111000u);  // nvmlDeviceGetPowerUsage
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { gpu->pci_bus_id(); }, [&] { gpu->temperature_c(); },
           [&] { gpu->total_energy_mj(); }, [&] { gpu->average_memory_power_mw(); },
           [&] { gpu->persistence_mode(); }, [&] { gpu->supported_memory_clocks_mhz(); }}) {
    try {
      call();
      ADD_FAILURE() << "expected kNotSupported";
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kNotSupported) << error.what();
    }
  }
}

zeus::EnvLookup fake_env(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    return found == values.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
}

TEST_F(NvmlTest, DiscoveryHonoursCudaVisibleDevices) {
  fake_.configure({{"devices", {h100(0), h100(1), h100(2)}}});
  zeus::device::DiscoveryOptions options;
  options.nvml_library_path = fake_.path();
  options.env = fake_env({{"CUDA_VISIBLE_DEVICES", "GPU-aaaaaaa2,0"}});
  zeus::device::GpuDiscovery found = zeus::device::discover_gpus(options);
  EXPECT_EQ(found.backend, zeus::device::GpuBackend::kNvml);
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(found.gpus.physical_index(0), 2);
  EXPECT_EQ(found.gpus.at(0).uuid(), "GPU-aaaaaaa2-0000-4000-8000-000000000002");
  EXPECT_EQ(found.gpus.physical_index(1), 0);

  options.env = fake_env({{"CUDA_VISIBLE_DEVICES", "MIG-aaaa"}});
  EXPECT_THROW(zeus::device::discover_gpus(options), zeus::Error);

  options.env = fake_env({{"CUDA_VISIBLE_DEVICES", ""}});
  found = zeus::device::discover_gpus(options);
  EXPECT_TRUE(found.gpus.empty());
  EXPECT_NE(found.message.find("hides all of them"), std::string::npos);
}

TEST_F(NvmlTest, DiscoveryReadsTheLibraryPathFromTheEnvironment) {
  fake_.configure({{"devices", {h100(0)}}});
  zeus::device::DiscoveryOptions options;
  options.env = fake_env({{"ZEUS_NVML_LIBRARY", fake_.path()}});
  const zeus::device::GpuDiscovery found = zeus::device::discover_gpus(options);
  ASSERT_EQ(found.gpus.size(), 1u);
  EXPECT_TRUE(found.probes[1].loaded);
  EXPECT_EQ(found.probes[1].backend, "nvml");
  EXPECT_EQ(found.probes[1].device_count, 1);
}

}  // namespace

// Python and other callers tell GPU errors from CPU errors by Error::subject().
TEST_F(NvmlTest, ErrorsAreAboutAGpu) {
  auto gpu = open({{"devices", {h100(0)}}, {"fail", {{"nvmlDeviceSetPowerManagementLimit", 4}}}})
                 ->open_gpu(0);
  const zeus::VendorError vendor = vendor_error([&] { gpu->set_power_limit_mw(300000); });
  EXPECT_EQ(vendor.subject(), zeus::ErrorSubject::kGpu);
  try {
    gpu->set_power_limit_mw(150000);
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kGpu);
  }
}
