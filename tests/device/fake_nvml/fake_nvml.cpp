// A fake libnvidia-ml.so.1 for tests and benchmarks: exports the NVML functions zeus uses, with
// values scripted in JSON. Tests reach the control functions (fake_nvml_*) by dlopen'ing the same
// file the backend loaded, so both see one state. A JSON file named by ZEUS_FAKE_NVML_CONFIG is
// loaded at nvmlInit when nothing was configured through the API (for CLI tests).
//
// Built twice: in full, and with FAKE_NVML_MINIMAL, exporting only NVML's required symbols.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nvml_api.hpp"

using nlohmann::json;
using zeus::device::nvml::Device;
using zeus::device::nvml::FieldValue;
using zeus::device::nvml::PciInfo;
using zeus::device::nvml::Return;

namespace {

struct FakeDevice {
  json spec;  // the scripted values; setters write into it
};

struct FakeState {
  std::mutex mutex;
  bool configured = false;
  json config = json::object();
  std::vector<FakeDevice> devices;
  std::map<std::string, int> calls;
  int init_count = 0;
};

FakeState& state() {
  static FakeState instance;
  return instance;
}

constexpr std::uintptr_t kHandleBase = 0x1000;

void apply_config(FakeState& s, const json& config) {
  s.config = config;
  s.devices.clear();
  for (const auto& device : config.value("devices", json::array())) {
    s.devices.push_back({device});
  }
  s.calls.clear();
  s.configured = true;
}

// With ZEUS_FAKE_NVML_STATE_FILE set, the devices' state is written to that file after every
// change and read back at nvmlInit, so that it outlives the process, as a driver's does.
void persist(const FakeState& s) {
  const char* path = std::getenv("ZEUS_FAKE_NVML_STATE_FILE");
  if (path == nullptr) {
    return;
  }
  json out = s.config;
  out["devices"] = json::array();
  for (const auto& device : s.devices) {
    out["devices"].push_back(device.spec);
  }
  const std::string temporary = std::string(path) + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << out.dump();
  }
  std::rename(temporary.c_str(), path);
}

// Common prologue: counts the call, applies a scripted failure, finds the device.
Return enter(FakeState& s, const char* function, Device device, FakeDevice** out) {
  s.calls[function]++;
  const json& fail = s.config.value("fail", json::object());
  if (fail.contains(function)) {
    return fail[function].get<int>();
  }
  if (s.init_count <= 0 && std::strcmp(function, "nvmlInit_v2") != 0) {
    return zeus::device::nvml::kErrorUninitialized;
  }
  if (out != nullptr) {
    const auto raw = reinterpret_cast<std::uintptr_t>(device);
    if (raw < kHandleBase || raw - kHandleBase >= s.devices.size()) {
      return zeus::device::nvml::kErrorInvalidArgument;
    }
    *out = &s.devices[raw - kHandleBase];
    const json& device_fail = (*out)->spec.value("fail", json::object());
    if (device_fail.contains(function)) {
      return device_fail[function].get<int>();
    }
  }
  return zeus::device::nvml::kSuccess;
}

// For functions without a device argument.
#define FAKE_ENTER_GLOBAL()                                                                   \
  FakeState& s = state();                                                                     \
  std::lock_guard lock(s.mutex);                                                              \
  if (Return rc = enter(s, __func__, nullptr, nullptr); rc != zeus::device::nvml::kSuccess) { \
    return rc;                                                                                \
  }

#define FAKE_ENTER(device)                                                              \
  FakeState& s = state();                                                               \
  std::lock_guard lock(s.mutex);                                                        \
  FakeDevice* d = nullptr;                                                              \
  if (Return rc = enter(s, __func__, device, &d); rc != zeus::device::nvml::kSuccess) { \
    return rc;                                                                          \
  }

Return copy_string(const std::string& value, char* buffer, unsigned length) {
  if (buffer == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  if (value.size() + 1 > length) {
    return zeus::device::nvml::kErrorInsufficientSize;
  }
  std::memcpy(buffer, value.c_str(), value.size() + 1);
  return zeus::device::nvml::kSuccess;
}

Return get_uint(const FakeDevice* d, const char* key, unsigned* out) {
  if (out == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  if (!d->spec.contains(key)) {
    return zeus::device::nvml::kErrorNotSupported;
  }
  *out = d->spec[key].get<unsigned>();
  return zeus::device::nvml::kSuccess;
}

[[maybe_unused]] Return copy_clocks(const json& list, unsigned* count, unsigned* clocks) {
  if (count == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  const unsigned needed = static_cast<unsigned>(list.size());
  if (*count < needed || clocks == nullptr) {
    *count = needed;
    return zeus::device::nvml::kErrorInsufficientSize;
  }
  for (unsigned i = 0; i < needed; ++i) {
    clocks[i] = list[i].get<unsigned>();
  }
  *count = needed;
  return zeus::device::nvml::kSuccess;
}

}  // namespace

extern "C" {

// ---- Control interface for tests ----
__attribute__((visibility("default"))) int fake_nvml_configure(const char* config_json) {
  FakeState& s = state();
  std::lock_guard lock(s.mutex);
  try {
    apply_config(s, json::parse(config_json));
    return 0;
  } catch (const std::exception&) {
    return 1;
  }
}

// The current state as JSON (devices with values changed by setters, call counts). The pointer
// stays valid until the next call.
__attribute__((visibility("default"))) const char* fake_nvml_state() {
  static std::string dumped;
  FakeState& s = state();
  std::lock_guard lock(s.mutex);
  json out;
  out["devices"] = json::array();
  for (const auto& device : s.devices) {
    out["devices"].push_back(device.spec);
  }
  out["calls"] = s.calls;
  out["init_count"] = s.init_count;
  dumped = out.dump();
  return dumped.c_str();
}

// ---- NVML ----
Return nvmlInit_v2() {
  FakeState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.configured) {
    const char* state_file = std::getenv("ZEUS_FAKE_NVML_STATE_FILE");
    std::ifstream saved(state_file != nullptr ? state_file : "");
    if (saved) {
      try {
        apply_config(s, json::parse(saved));
      } catch (const std::exception&) {
        return zeus::device::nvml::kErrorUnknown;
      }
    } else if (const char* path = std::getenv("ZEUS_FAKE_NVML_CONFIG"); path != nullptr) {
      std::ifstream in(path);
      try {
        apply_config(s, json::parse(in));
      } catch (const std::exception&) {
        return zeus::device::nvml::kErrorUnknown;
      }
    }
  }
  if (Return rc = enter(s, "nvmlInit_v2", nullptr, nullptr); rc != zeus::device::nvml::kSuccess) {
    return rc;
  }
  ++s.init_count;
  return zeus::device::nvml::kSuccess;
}

Return nvmlShutdown() {
  FakeState& s = state();
  std::lock_guard lock(s.mutex);
  s.calls["nvmlShutdown"]++;
  if (s.init_count <= 0) {
    return zeus::device::nvml::kErrorUninitialized;
  }
  --s.init_count;
  return zeus::device::nvml::kSuccess;
}

const char* nvmlErrorString(Return code) {
  switch (code) {
    case zeus::device::nvml::kSuccess:
      return "Success";
    case zeus::device::nvml::kErrorNoPermission:
      return "Insufficient Permissions";
    case zeus::device::nvml::kErrorNotSupported:
      return "Not Supported";
    case zeus::device::nvml::kErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Fake NVML error";
  }
}

Return nvmlDeviceGetCount_v2(unsigned* count) {
  FAKE_ENTER_GLOBAL();
  if (count == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  *count = static_cast<unsigned>(s.devices.size());
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  FAKE_ENTER_GLOBAL();
  if (device == nullptr || index >= s.devices.size()) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  *device = reinterpret_cast<Device>(kHandleBase + index);
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetName(Device device, char* name, unsigned length) {
  FAKE_ENTER(device);
  return copy_string(d->spec.value("name", "Fake GPU"), name, length);
}

Return nvmlDeviceGetUUID(Device device, char* uuid, unsigned length) {
  FAKE_ENTER(device);
  return copy_string(d->spec.value("uuid", "GPU-00000000-0000-0000-0000-000000000000"), uuid,
                     length);
}

Return nvmlDeviceGetPowerManagementLimitConstraints(Device device, unsigned* min_mw,
                                                    unsigned* max_mw) {
  FAKE_ENTER(device);
  if (Return rc = get_uint(d, "power_limit_min_mw", min_mw); rc != zeus::device::nvml::kSuccess) {
    return rc;
  }
  return get_uint(d, "power_limit_max_mw", max_mw);
}

Return nvmlDeviceGetPowerManagementLimit(Device device, unsigned* limit_mw) {
  FAKE_ENTER(device);
  return get_uint(d, "power_limit_mw", limit_mw);
}

Return nvmlDeviceGetPowerManagementDefaultLimit(Device device, unsigned* limit_mw) {
  FAKE_ENTER(device);
  return get_uint(d, "power_limit_default_mw", limit_mw);
}

Return nvmlDeviceSetPowerManagementLimit(Device device, unsigned limit_mw) {
  FAKE_ENTER(device);
  if (limit_mw < d->spec.value("power_limit_min_mw", 0u) ||
      limit_mw > d->spec.value("power_limit_max_mw", 0u)) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  d->spec["power_limit_mw"] = limit_mw;
  d->spec["set_power_limit_history_mw"].push_back(limit_mw);
  persist(s);
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetPowerUsage(Device device, unsigned* power_mw) {
  FAKE_ENTER(device);
  return get_uint(d, "power_usage_mw", power_mw);
}

#ifndef FAKE_NVML_MINIMAL

Return nvmlSystemGetDriverVersion(char* version, unsigned length) {
  FAKE_ENTER_GLOBAL();
  return copy_string(s.config.value("driver_version", "999.99"), version, length);
}

Return nvmlSystemGetNVMLVersion(char* version, unsigned length) {
  FAKE_ENTER_GLOBAL();
  return copy_string(s.config.value("nvml_version", "12.999.99"), version, length);
}

Return nvmlDeviceGetPciInfo_v3(Device device, PciInfo* pci) {
  FAKE_ENTER(device);
  if (pci == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  std::memset(pci, 0, sizeof(*pci));
  const std::string bus_id = d->spec.value("pci_bus_id", "00000000:00:00.0");
  std::strncpy(pci->busId, bus_id.c_str(), sizeof(pci->busId) - 1);
  std::strncpy(pci->busIdLegacy, bus_id.substr(4).c_str(), sizeof(pci->busIdLegacy) - 1);
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetArchitecture(Device device, unsigned* arch) {
  FAKE_ENTER(device);
  return get_uint(d, "architecture", arch);
}

Return nvmlDeviceGetEnforcedPowerLimit(Device device, unsigned* limit_mw) {
  FAKE_ENTER(device);
  if (d->spec.contains("enforced_power_limit_mw")) {
    return get_uint(d, "enforced_power_limit_mw", limit_mw);
  }
  return get_uint(d, "power_limit_mw", limit_mw);
}

Return nvmlDeviceGetPersistenceMode(Device device, int* mode) {
  FAKE_ENTER(device);
  if (mode == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  *mode = d->spec.value("persistence_mode", 0);
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceSetPersistenceMode(Device device, int mode) {
  FAKE_ENTER(device);
  d->spec["persistence_mode"] = mode;
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetSupportedMemoryClocks(Device device, unsigned* count, unsigned* clocks) {
  FAKE_ENTER(device);
  return copy_clocks(d->spec.value("memory_clocks_mhz", json::array()), count, clocks);
}

Return nvmlDeviceGetSupportedGraphicsClocks(Device device, unsigned memory_clock_mhz,
                                            unsigned* count, unsigned* clocks) {
  FAKE_ENTER(device);
  const json& by_memory = d->spec.value("graphics_clocks_mhz", json::object());
  const std::string key = std::to_string(memory_clock_mhz);
  if (!by_memory.contains(key)) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  return copy_clocks(by_memory[key], count, clocks);
}

Return nvmlDeviceSetGpuLockedClocks(Device device, unsigned min_mhz, unsigned max_mhz) {
  FAKE_ENTER(device);
  d->spec["locked_gpu_clocks_mhz"] = {min_mhz, max_mhz};
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceResetGpuLockedClocks(Device device) {
  FAKE_ENTER(device);
  d->spec.erase("locked_gpu_clocks_mhz");
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceSetMemoryLockedClocks(Device device, unsigned min_mhz, unsigned max_mhz) {
  FAKE_ENTER(device);
  d->spec["locked_memory_clocks_mhz"] = {min_mhz, max_mhz};
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceResetMemoryLockedClocks(Device device) {
  FAKE_ENTER(device);
  d->spec.erase("locked_memory_clocks_mhz");
  return zeus::device::nvml::kSuccess;
}

// Power fields: spec "power_fields" maps "<fieldId>:<scope>" to milliwatts, or to
// {"nvml_return": code} for a field whose read fails with that code (a Grace superchip's driver
// refusing GPU scope); absent = not supported.
Return nvmlDeviceGetFieldValues(Device device, int count, FieldValue* values) {
  FAKE_ENTER(device);
  if (values == nullptr || count <= 0) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  const json& fields = d->spec.value("power_fields", json::object());
  for (int i = 0; i < count; ++i) {
    FieldValue& value = values[i];
    const std::string key = std::to_string(value.fieldId) + ":" + std::to_string(value.scopeId);
    if (fields.contains(key) && fields[key].is_object()) {
      value.nvmlReturn = static_cast<Return>(fields[key].value("nvml_return", 999));
    } else if (fields.contains(key)) {
      value.nvmlReturn = zeus::device::nvml::kSuccess;
      value.valueType = zeus::device::nvml::kValueUnsignedInt;
      value.value.uiVal = fields[key].get<unsigned>();
    } else {
      value.nvmlReturn = zeus::device::nvml::kErrorNotSupported;
    }
  }
  return zeus::device::nvml::kSuccess;
}

// Energy: "energy_mj" grows by "energy_step_mj" at every read.
Return nvmlDeviceGetTotalEnergyConsumption(Device device, unsigned long long* energy_mj) {
  FAKE_ENTER(device);
  if (energy_mj == nullptr) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  if (!d->spec.contains("energy_mj")) {
    return zeus::device::nvml::kErrorNotSupported;
  }
  const auto current = d->spec["energy_mj"].get<unsigned long long>();
  *energy_mj = current;
  d->spec["energy_mj"] = current + d->spec.value("energy_step_mj", 0ULL);
  return zeus::device::nvml::kSuccess;
}

Return nvmlDeviceGetTemperature(Device device, unsigned sensor, unsigned* celsius) {
  FAKE_ENTER(device);
  if (sensor != zeus::device::nvml::kTemperatureGpu) {
    return zeus::device::nvml::kErrorInvalidArgument;
  }
  return get_uint(d, "temperature_c", celsius);
}

#endif  // FAKE_NVML_MINIMAL

}  // extern "C"
