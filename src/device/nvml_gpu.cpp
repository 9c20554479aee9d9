// The NVIDIA backend's Gpu: each call is one NVML call (or a field-value query) on a device
// handle from nvml::Library, with power in milliwatts, energy in millijoules and clocks in
// megahertz as NVML itself reports them. Which power source (board or GPU module) a reading
// comes from is probed once per device and remembered; power_scope() and energy_scope() say it.
#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "nvml_api.hpp"
#include "nvml_library.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device {
namespace {

using nvml::Device;
using nvml::FieldValue;
using nvml::PciInfo;
using nvml::Return;

std::string arch_name(unsigned arch) {
  switch (arch) {
    case nvml::kArchKepler:
      return "kepler";
    case nvml::kArchMaxwell:
      return "maxwell";
    case nvml::kArchPascal:
      return "pascal";
    case nvml::kArchVolta:
      return "volta";
    case nvml::kArchTuring:
      return "turing";
    case nvml::kArchAmpere:
      return "ampere";
    case nvml::kArchAda:
      return "ada";
    case nvml::kArchHopper:
      return "hopper";
    case nvml::kArchBlackwell:
      return "blackwell";
    default:
      return "unknown";
  }
}

// Calls an NVML function from the table, throwing on failure.
#define ZEUS_NVML_CALL(function, ...)                                               \
  do {                                                                              \
    nvml_->require(reinterpret_cast<const void*>(nvml_->fn().function), #function); \
    nvml_->check(nvml_->fn().function(__VA_ARGS__), #function, physical_index_);    \
  } while (false)

class NvmlGpu final : public Gpu {
 public:
  NvmlGpu(std::shared_ptr<const nvml::Library> library, int physical_index)
      : nvml_(std::move(library)),
        physical_index_(physical_index),
        device_(nvml_->handle(physical_index)) {}

  GpuBackend backend() const override { return GpuBackend::kNvml; }

  std::string name() override {
    std::array<char, nvml::kDeviceNameBufferSize> buffer{};
    ZEUS_NVML_CALL(nvmlDeviceGetName, device_, buffer.data(), buffer.size());
    return buffer.data();
  }
  std::string uuid() override { return nvml_->device_uuid(physical_index_); }
  std::string pci_bus_id() override {
    // Oversized and zeroed: newer drivers may write fields past the ones declared here.
    std::array<unsigned char, 4 * sizeof(PciInfo)> storage{};
    PciInfo info{};
    ZEUS_NVML_CALL(nvmlDeviceGetPciInfo_v3, device_, reinterpret_cast<PciInfo*>(storage.data()));
    std::memcpy(&info, storage.data(), sizeof(info));
    info.busId[sizeof(info.busId) - 1] = '\0';
    return info.busId;
  }
  std::string architecture() override {
    const std::optional<unsigned> arch = architecture_id();
    return arch ? arch_name(*arch) : "unknown";
  }

  PowerLimitConstraints power_limit_constraints_mw() override {
    PowerLimitConstraints constraints;
    ZEUS_NVML_CALL(nvmlDeviceGetPowerManagementLimitConstraints, device_, &constraints.min_mw,
                   &constraints.max_mw);
    return constraints;
  }
  std::uint32_t default_power_limit_mw() override {
    unsigned value = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetPowerManagementDefaultLimit, device_, &value);
    return value;
  }
  std::uint32_t power_limit_mw() override {
    unsigned value = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetPowerManagementLimit, device_, &value);
    return value;
  }
  std::uint32_t enforced_power_limit_mw() override {
    unsigned value = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetEnforcedPowerLimit, device_, &value);
    return value;
  }
  void set_power_limit_mw(std::uint32_t power_limit_mw) override {
    const PowerLimitConstraints range = power_limit_constraints_mw();
    if (power_limit_mw < range.min_mw || power_limit_mw > range.max_mw) {
      throw Error(ErrorKind::kInvalidArgument,
                  "power limit " + std::to_string(power_limit_mw) +
                      " mW is outside the range of GPU " + std::to_string(physical_index_) +
                      " (NVML index): [" + std::to_string(range.min_mw) + ", " +
                      std::to_string(range.max_mw) + "] mW",
                  ErrorSubject::kGpu);
    }
    if (this->power_limit_mw() == power_limit_mw) {
      return;
    }
    ZEUS_NVML_CALL(nvmlDeviceSetPowerManagementLimit, device_, power_limit_mw);
  }
  void reset_power_limit() override { set_power_limit_mw(default_power_limit_mw()); }

  bool persistence_mode() override {
    int state = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetPersistenceMode, device_, &state);
    return state != 0;
  }
  void set_persistence_mode(bool enabled) override {
    if (nvml_->fn().nvmlDeviceGetPersistenceMode != nullptr && persistence_mode() == enabled) {
      return;
    }
    ZEUS_NVML_CALL(nvmlDeviceSetPersistenceMode, device_, enabled ? 1 : 0);
  }

  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    nvml_->require(reinterpret_cast<const void*>(nvml_->fn().nvmlDeviceGetSupportedMemoryClocks),
                   "nvmlDeviceGetSupportedMemoryClocks");
    return read_clock_list(
        "nvmlDeviceGetSupportedMemoryClocks", [&](unsigned* count, unsigned* clocks) {
          return nvml_->fn().nvmlDeviceGetSupportedMemoryClocks(device_, count, clocks);
        });
  }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    nvml_->require(reinterpret_cast<const void*>(nvml_->fn().nvmlDeviceGetSupportedGraphicsClocks),
                   "nvmlDeviceGetSupportedGraphicsClocks");
    if (!memory_clock_mhz) {
      const std::vector<std::uint32_t> memory = supported_memory_clocks_mhz();
      if (memory.empty()) {
        throw Error(ErrorKind::kNotSupported,
                    "GPU " + std::to_string(physical_index_) + " reports no supported memory clock",
                    ErrorSubject::kGpu);
      }
      memory_clock_mhz = *std::max_element(memory.begin(), memory.end());
    }
    return read_clock_list("nvmlDeviceGetSupportedGraphicsClocks",
                           [&](unsigned* count, unsigned* clocks) {
                             return nvml_->fn().nvmlDeviceGetSupportedGraphicsClocks(
                                 device_, *memory_clock_mhz, count, clocks);
                           });
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    check_clock_range(min_mhz, max_mhz);
    ZEUS_NVML_CALL(nvmlDeviceSetGpuLockedClocks, device_, min_mhz, max_mhz);
  }
  void reset_gpu_locked_clocks() override {
    ZEUS_NVML_CALL(nvmlDeviceResetGpuLockedClocks, device_);
  }
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    check_clock_range(min_mhz, max_mhz);
    ZEUS_NVML_CALL(nvmlDeviceSetMemoryLockedClocks, device_, min_mhz, max_mhz);
  }
  void reset_memory_locked_clocks() override {
    ZEUS_NVML_CALL(nvmlDeviceResetMemoryLockedClocks, device_);
  }

  std::uint32_t instant_power_mw() override {
    return field_power_mw(nvml::kFieldPowerInstant, instant_scope_);
  }
  std::uint32_t average_power_mw() override {
    return field_power_mw(nvml::kFieldPowerAverage, average_scope_);
  }
  std::uint32_t average_memory_power_mw() override {
    nvml_->require(reinterpret_cast<const void*>(nvml_->fn().nvmlDeviceGetFieldValues),
                   "nvmlDeviceGetFieldValues");
    const std::optional<std::uint32_t> value =
        read_field_mw(nvml::kFieldPowerAverage, nvml::kPowerScopeMemory, true);
    if (!value) {
      throw Error(ErrorKind::kNotSupported,
                  "GPU " + std::to_string(physical_index_) + " does not report memory power",
                  ErrorSubject::kGpu);
    }
    return *value;
  }

  bool supports_energy_counter() override {
    std::lock_guard lock(probe_mutex_);
    if (!energy_counter_supported_) {
      energy_counter_supported_ = probe_energy_counter();
    }
    return *energy_counter_supported_;
  }
  std::uint64_t total_energy_mj() override {
    if (!supports_energy_counter()) {
      throw Error(ErrorKind::kNotSupported,
                  "GPU " + std::to_string(physical_index_) +
                      " has no energy counter (NVML provides one from Volta on); use power "
                      "sampling instead",
                  ErrorSubject::kGpu);
    }
    unsigned long long energy_mj = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetTotalEnergyConsumption, device_, &energy_mj);
    return energy_mj;
  }

  // The instant power's source as probed (the average's is probed alike); without the field
  // API, nvmlDeviceGetPowerUsage, taken as module scope on a Grace superchip.
  MeasuredScope power_scope() override {
    const PowerSource source = probed_source(nvml::kFieldPowerInstant, instant_scope_);
    if (source.use_field) {
      return source.scope == nvml::kPowerScopeModule ? MeasuredScope::kModule : MeasuredScope::kGpu;
    }
    return superchip() ? MeasuredScope::kModule : MeasuredScope::kGpu;
  }
  // The energy counter has no scope argument: on a Grace superchip (by name, or by power that
  // is reported only for the module) it counts the whole module, as the reference found on
  // GH200 (its PR 172). Without a counter, the power's scope.
  MeasuredScope energy_scope() override {
    const MeasuredScope power = power_scope();
    return power == MeasuredScope::kModule || superchip() ? MeasuredScope::kModule : power;
  }

  int temperature_c() override {
    unsigned value = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetTemperature, device_, nvml::kTemperatureGpu, &value);
    return static_cast<int>(value);
  }

 private:
  // How a power field is read: a field-value scope, or nvmlDeviceGetPowerUsage.
  struct PowerSource {
    bool use_field = false;
    unsigned scope = nvml::kPowerScopeGpu;
  };

  std::optional<unsigned> architecture_id() {
    std::lock_guard lock(probe_mutex_);
    return architecture_id_locked();
  }

  std::optional<unsigned> architecture_id_locked() {
    if (!architecture_probed_) {
      architecture_probed_ = true;
      unsigned value = 0;
      if (nvml_->fn().nvmlDeviceGetArchitecture != nullptr &&
          nvml_->fn().nvmlDeviceGetArchitecture(device_, &value) == nvml::kSuccess) {
        architecture_ = value;
      }
    }
    return architecture_;
  }

  bool probe_energy_counter() {
    if (nvml_->fn().nvmlDeviceGetTotalEnergyConsumption == nullptr) {
      return false;
    }
    if (const std::optional<unsigned> arch = architecture_id_locked()) {
      return *arch >= nvml::kArchVolta;
    }
    unsigned long long energy_mj = 0;
    return nvml_->fn().nvmlDeviceGetTotalEnergyConsumption(device_, &energy_mj) == nvml::kSuccess;
  }

  // Reads one power field at `scope`; nullopt when the driver does not provide it. With `strict`,
  // failures other than "not supported" / "invalid argument" throw; probing is lenient.
  std::optional<std::uint32_t> read_field_mw(unsigned field_id, unsigned scope, bool strict) {
    FieldValue value{};
    value.fieldId = field_id;
    value.scopeId = scope;
    const Return overall = nvml_->fn().nvmlDeviceGetFieldValues(device_, 1, &value);
    const Return code = overall != nvml::kSuccess ? overall : value.nvmlReturn;
    if (code != nvml::kSuccess) {
      const ErrorKind kind = nvml::describe_return(code).kind;
      if (strict && kind != ErrorKind::kNotSupported && kind != ErrorKind::kInvalidArgument) {
        nvml_->check(code, "nvmlDeviceGetFieldValues", physical_index_);
      }
      return std::nullopt;
    }
    switch (value.valueType) {
      case nvml::kValueDouble:
        return static_cast<std::uint32_t>(value.value.dVal);
      case nvml::kValueUnsignedInt:
        return value.value.uiVal;
      case nvml::kValueUnsignedLong:
        return static_cast<std::uint32_t>(value.value.ulVal);
      case nvml::kValueUnsignedLongLong:
        return static_cast<std::uint32_t>(value.value.ullVal);
      case nvml::kValueSignedLongLong:
        return static_cast<std::uint32_t>(value.value.sllVal);
      case nvml::kValueSignedInt:
        return static_cast<std::uint32_t>(value.value.siVal);
      case nvml::kValueUnsignedShort:
        return value.value.usVal;
      default:
        return value.value.uiVal;
    }
  }

  PowerSource probe_power_source(unsigned field_id) {
    PowerSource source;
    if (nvml_->fn().nvmlDeviceGetFieldValues == nullptr) {
      return source;
    }
    const char* field_name = field_id == nvml::kFieldPowerInstant ? "instant" : "average";
    if (read_field_mw(field_id, nvml::kPowerScopeGpu, false)) {
      source.use_field = true;
      source.scope = nvml::kPowerScopeGpu;
    } else if (read_field_mw(field_id, nvml::kPowerScopeModule, false)) {
      source.use_field = true;
      source.scope = nvml::kPowerScopeModule;
      log().warn(
          "GPU {} reports {} power only for its whole module (GPU and CPU of a superchip); "
          "GPU power readings include the CPU",
          physical_index_, field_name);
    } else {
      log().debug("GPU {}: {} power field unavailable; using nvmlDeviceGetPowerUsage",
                  physical_index_, field_name);
    }
    return source;
  }

  PowerSource probed_source(unsigned field_id, std::optional<PowerSource>& cached) {
    std::lock_guard lock(probe_mutex_);
    if (!cached) {
      cached = probe_power_source(field_id);
    }
    return *cached;
  }

  // Whether the model name is a Grace superchip's; false when the name cannot be read.
  bool superchip() {
    std::array<char, nvml::kDeviceNameBufferSize> buffer{};
    return nvml_->fn().nvmlDeviceGetName != nullptr &&
           nvml_->fn().nvmlDeviceGetName(device_, buffer.data(), buffer.size()) == nvml::kSuccess &&
           is_grace_superchip_name(buffer.data());
  }

  std::uint32_t field_power_mw(unsigned field_id, std::optional<PowerSource>& cached) {
    const PowerSource source = probed_source(field_id, cached);
    if (source.use_field) {
      if (const auto value = read_field_mw(field_id, source.scope, true)) {
        return *value;
      }
      throw Error(ErrorKind::kNotSupported,
                  "GPU " + std::to_string(physical_index_) + " stopped reporting its power field " +
                      std::to_string(field_id),
                  ErrorSubject::kGpu);
    }
    unsigned value = 0;
    ZEUS_NVML_CALL(nvmlDeviceGetPowerUsage, device_, &value);
    return value;
  }

  template <typename Reader>
  std::vector<std::uint32_t> read_clock_list(const char* call, Reader reader) {
    std::vector<unsigned> clocks(128);
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned count = static_cast<unsigned>(clocks.size());
      const Return code = reader(&count, clocks.data());
      if (code == nvml::kErrorInsufficientSize && count > clocks.size()) {
        clocks.resize(count);
        continue;
      }
      nvml_->check(code, call, physical_index_);
      clocks.resize(std::min<std::size_t>(count, clocks.size()));
      return {clocks.begin(), clocks.end()};
    }
    throw Error(ErrorKind::kInsufficientSize,
                std::string(call) + " kept asking for a larger buffer", ErrorSubject::kGpu);
  }

  void check_clock_range(std::uint32_t min_mhz, std::uint32_t max_mhz) const {
    if (min_mhz > max_mhz) {
      throw Error(ErrorKind::kInvalidArgument,
                  "minimum clock " + std::to_string(min_mhz) + " MHz is above the maximum " +
                      std::to_string(max_mhz) + " MHz",
                  ErrorSubject::kGpu);
    }
  }

  std::shared_ptr<const nvml::Library> nvml_;
  int physical_index_;
  Device device_;

  std::mutex probe_mutex_;
  bool architecture_probed_ = false;
  std::optional<unsigned> architecture_;
  std::optional<bool> energy_counter_supported_;
  std::optional<PowerSource> instant_scope_;
  std::optional<PowerSource> average_scope_;
};

}  // namespace

std::shared_ptr<Gpu> nvml::make_gpu(std::shared_ptr<const Library> library, int physical_index) {
  return std::make_shared<NvmlGpu>(std::move(library), physical_index);
}

}  // namespace zeus::device
