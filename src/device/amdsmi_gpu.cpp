// The AMD GPU backend: AMD SMI (libamd_smi.so) loaded at run time with dlopen.
//
// Devices are ordered by HIP index (amdsmi_get_gpu_enumeration_info's hip_id, else the KFD node
// id). Units from AMD SMI: power caps in microwatts, socket power in watts, energy as an
// accumulator times a resolution in microjoules, temperatures in degrees Celsius, clock lists in
// hertz. See docs/amdsmi.md.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "amdsmi_api.hpp"
#include "common/dynamic_library.hpp"
#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus {
namespace amdsmi {

std::string AmdSmiBuffer::read_string(std::size_t offset, std::size_t max_size) const {
  if (offset >= kSize) {
    return {};
  }
  const char* begin = reinterpret_cast<const char*>(bytes_.data() + offset);
  const std::size_t limit = std::min(max_size, kSize - offset);
  std::size_t length = 0;
  while (length < limit && begin[length] != '\0') {
    ++length;
  }
  return std::string(begin, length);
}

std::string status_name(Status status) {
  switch (status) {
    case kStatusSuccess:
      return "AMDSMI_STATUS_SUCCESS";
    case kStatusInval:
      return "AMDSMI_STATUS_INVAL";
    case kStatusNotSupported:
      return "AMDSMI_STATUS_NOT_SUPPORTED";
    case kStatusNotYetImplemented:
      return "AMDSMI_STATUS_NOT_YET_IMPLEMENTED";
    case kStatusFailLoadModule:
      return "AMDSMI_STATUS_FAIL_LOAD_MODULE";
    case kStatusFailLoadSymbol:
      return "AMDSMI_STATUS_FAIL_LOAD_SYMBOL";
    case kStatusDrmError:
      return "AMDSMI_STATUS_DRM_ERROR";
    case kStatusApiFailed:
      return "AMDSMI_STATUS_API_FAILED";
    case kStatusTimeout:
      return "AMDSMI_STATUS_TIMEOUT";
    case kStatusRetry:
      return "AMDSMI_STATUS_RETRY";
    case kStatusNoPerm:
      return "AMDSMI_STATUS_NO_PERM";
    case kStatusInterrupt:
      return "AMDSMI_STATUS_INTERRUPT";
    case kStatusIo:
      return "AMDSMI_STATUS_IO";
    case kStatusAddressFault:
      return "AMDSMI_STATUS_ADDRESS_FAULT";
    case kStatusFileError:
      return "AMDSMI_STATUS_FILE_ERROR";
    case kStatusOutOfResources:
      return "AMDSMI_STATUS_OUT_OF_RESOURCES";
    case kStatusInternalException:
      return "AMDSMI_STATUS_INTERNAL_EXCEPTION";
    case kStatusInputOutOfBounds:
      return "AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS";
    case kStatusInitError:
      return "AMDSMI_STATUS_INIT_ERROR";
    case kStatusRefcountOverflow:
      return "AMDSMI_STATUS_REFCOUNT_OVERFLOW";
    case kStatusBusy:
      return "AMDSMI_STATUS_BUSY";
    case kStatusNotFound:
      return "AMDSMI_STATUS_NOT_FOUND";
    case kStatusNotInit:
      return "AMDSMI_STATUS_NOT_INIT";
    case kStatusNoSlot:
      return "AMDSMI_STATUS_NO_SLOT";
    case kStatusDriverNotLoaded:
      return "AMDSMI_STATUS_DRIVER_NOT_LOADED";
    case kStatusNoData:
      return "AMDSMI_STATUS_NO_DATA";
    case kStatusInsufficientSize:
      return "AMDSMI_STATUS_INSUFFICIENT_SIZE";
    case kStatusUnexpectedSize:
      return "AMDSMI_STATUS_UNEXPECTED_SIZE";
    case kStatusUnexpectedData:
      return "AMDSMI_STATUS_UNEXPECTED_DATA";
    case kStatusNonAmdCpu:
      return "AMDSMI_STATUS_NON_AMD_CPU";
    case kStatusNoEnergyDrv:
      return "AMDSMI_STATUS_NO_ENERGY_DRV";
    case kStatusNoMsrDrv:
      return "AMDSMI_STATUS_NO_MSR_DRV";
    case kStatusNoHsmpDrv:
      return "AMDSMI_STATUS_NO_HSMP_DRV";
    case kStatusNoHsmpSup:
      return "AMDSMI_STATUS_NO_HSMP_SUP";
    case kStatusNoHsmpMsgSup:
      return "AMDSMI_STATUS_NO_HSMP_MSG_SUP";
    case kStatusHsmpTimeout:
      return "AMDSMI_STATUS_HSMP_TIMEOUT";
    case kStatusNoDrv:
      return "AMDSMI_STATUS_NO_DRV";
    case kStatusFileNotFound:
      return "AMDSMI_STATUS_FILE_NOT_FOUND";
    case kStatusArgPtrNull:
      return "AMDSMI_STATUS_ARG_PTR_NULL";
    case kStatusAmdgpuRestartErr:
      return "AMDSMI_STATUS_AMDGPU_RESTART_ERR";
    case kStatusSettingUnavailable:
      return "AMDSMI_STATUS_SETTING_UNAVAILABLE";
    case kStatusMapError:
      return "AMDSMI_STATUS_MAP_ERROR";
    case kStatusUnknownError:
      return "AMDSMI_STATUS_UNKNOWN_ERROR";
    default:
      return fmt::format("AMDSMI_STATUS_{}", status);
  }
}

ErrorKind error_kind_for_status(Status status) {
  switch (status) {
    case kStatusInval:
    case kStatusArgPtrNull:
      return ErrorKind::kInvalidArgument;
    case kStatusNotSupported:
    case kStatusNotYetImplemented:
    case kStatusNoHsmpSup:
    case kStatusNoHsmpMsgSup:
    case kStatusSettingUnavailable:
      return ErrorKind::kNotSupported;
    case kStatusTimeout:
    case kStatusHsmpTimeout:
      return ErrorKind::kTimeout;
    case kStatusNoPerm:
      return ErrorKind::kNoPermission;
    case kStatusOutOfResources:
      return ErrorKind::kMemory;
    case kStatusInitError:
      return ErrorKind::kInitError;
    case kStatusNotInit:
      return ErrorKind::kUninitialized;
    case kStatusNotFound:
      return ErrorKind::kNotFound;
    case kStatusDriverNotLoaded:
    case kStatusNoEnergyDrv:
    case kStatusNoMsrDrv:
    case kStatusNoHsmpDrv:
    case kStatusNoDrv:
      return ErrorKind::kDriverNotLoaded;
    case kStatusInsufficientSize:
      return ErrorKind::kInsufficientSize;
    case kStatusFileNotFound:
      return ErrorKind::kLibraryNotFound;
    case kStatusIo:
    case kStatusFileError:
      return ErrorKind::kIo;
    default:
      return ErrorKind::kUnknown;
  }
}

}  // namespace amdsmi

namespace {

using amdsmi::AmdSmiBuffer;
using amdsmi::ClockType;
using amdsmi::ProcessorHandle;
using amdsmi::SocketHandle;
using amdsmi::Status;

constexpr const char* kVendor = "amdsmi";

// The function table, filled from the shared library.
struct Functions {
#define AMDSMI_REQUIRED(name, params) Status(*name) params = nullptr;
#define AMDSMI_OPTIONAL(name, params) Status(*name) params = nullptr;
#include "amdsmi_symbols.def"
#undef AMDSMI_REQUIRED
#undef AMDSMI_OPTIONAL
};

[[noreturn]] void throw_status(const char* call, Status status, std::string_view action) {
  std::string message =
      fmt::format("{} failed while {}: {} ({})", call, action, amdsmi::status_name(status), status);
  if (status == amdsmi::kStatusNoPerm) {
    message += ". ";
    message += permission_hint();
  }
  throw VendorError(amdsmi::error_kind_for_status(status), kVendor, call,
                    static_cast<long long>(status), message);
}

// The loaded library and the amdsmi_init it holds; shared by the provider and every Gpu so that
// amdsmi_shut_down runs once, after the last user.
class Session {
 public:
  explicit Session(std::shared_ptr<DynamicLibrary> library) : library_(std::move(library)) {
    std::vector<std::string> missing;
#define AMDSMI_REQUIRED(name, params)                                            \
  functions_.name = reinterpret_cast<Status(*) params>(library_->symbol(#name)); \
  if (functions_.name == nullptr)                                                \
    missing.emplace_back(#name);
#define AMDSMI_OPTIONAL(name, params) \
  functions_.name = reinterpret_cast<Status(*) params>(library_->symbol(#name));
#include "amdsmi_symbols.def"
#undef AMDSMI_REQUIRED
#undef AMDSMI_OPTIONAL
    if (!missing.empty()) {
      throw Error(ErrorKind::kFunctionNotFound,
                  fmt::format("{} is not a usable AMD SMI library: it does not export {} (zeus "
                              "needs AMD SMI from ROCm 6.3 or newer)",
                              library_->resolved_path(), fmt::join(missing, ", ")));
    }
    read_version();
    const Status status = functions_.amdsmi_init(amdsmi::kInitAmdGpus);
    if (status != amdsmi::kStatusSuccess) {
      throw_status("amdsmi_init", status, "initialising AMD SMI for AMD GPUs");
    }
    initialized_ = true;
  }

  ~Session() {
    if (initialized_) {
      const Status status = functions_.amdsmi_shut_down();
      if (status != amdsmi::kStatusSuccess) {
        log().debug("amdsmi_shut_down returned {}", amdsmi::status_name(status));
      }
    }
  }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Functions& fn() const {
    return functions_;
  }
  const DynamicLibrary& library() const {
    return *library_;
  }
  // Whether amdsmi_power_info_t has the ROCm 6.4+ layout (a uint64 socket_power first).
  bool new_power_info_layout() const {
    return new_power_info_layout_;
  }
  const std::string& library_version() const {
    return library_version_;
  }

  // Throws kNotSupported when an optional function is absent from this library.
  template <typename Fn>
  void require(Fn function, const char* name, std::string_view capability) const {
    if (function == nullptr) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("{} is not supported by this AMD SMI library ({} does not export {}; "
                              "a newer ROCm may have it)",
                              capability, library_->resolved_path(), name));
    }
  }

 private:
  void read_version() {
    AmdSmiBuffer version;
    const Status status = functions_.amdsmi_get_lib_version(version.data());
    if (status != amdsmi::kStatusSuccess) {
      log().warn("amdsmi_get_lib_version failed ({}); assuming AMD SMI 25 or newer",
                 amdsmi::status_name(status));
      return;
    }
    const auto first = version.read<std::uint32_t>(0);
    const auto second = version.read<std::uint32_t>(4);
    const auto third = version.read<std::uint32_t>(8);
    if (first >= amdsmi::kFirstNewLayoutVersion) {
      library_version_ = fmt::format("{}.{}.{}", first, second, third);
    } else {
      const auto fourth = version.read<std::uint32_t>(12);
      library_version_ = fmt::format("{}.{}.{}.{}", first, second, third, fourth);
      new_power_info_layout_ = false;
    }
  }

  std::shared_ptr<DynamicLibrary> library_;
  Functions functions_;
  bool initialized_ = false;
  bool new_power_info_layout_ = true;
  std::string library_version_;
};

// Calls an AMD SMI function and throws a VendorError naming it when it fails.
#define ZEUS_AMDSMI_CALL(session, function, action, ...)                    \
  do {                                                                      \
    const Status zeus_amdsmi_status = (session).fn().function(__VA_ARGS__); \
    if (zeus_amdsmi_status != amdsmi::kStatusSuccess) {                     \
      throw_status(#function, zeus_amdsmi_status, action);                  \
    }                                                                       \
  } while (false)

// What open_amdsmi learned about one device; immutable afterwards.
struct DeviceRecord {
  ProcessorHandle handle = nullptr;
  int index = 0;  // HIP index
  bool instant_power_supported = true;
  bool average_power_supported = true;
  bool energy_counter_supported = false;
  std::string energy_counter_note;  // why the counter is disabled
  bool odd_chiplet = false;         // second die of an MI250/MI250X
};

std::string read_market_name(const Session& session, ProcessorHandle handle, int index) {
  AmdSmiBuffer info;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_gpu_asic_info,
                   fmt::format("reading the name of GPU {}", index), handle, info.data());
  return info.read_string(amdsmi::kAsicMarketNameOffset, amdsmi::kAsicMarketNameSize);
}

bool power_field_valid(std::uint32_t watts) {
  return watts != amdsmi::kPowerFieldUnsupported16 && watts != amdsmi::kPowerFieldUnsupported32;
}

struct SocketPower {
  std::uint32_t current_w = 0;
  std::uint32_t average_w = 0;
};

SocketPower read_socket_power(const Session& session, ProcessorHandle handle, int index) {
  AmdSmiBuffer info;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_power_info,
                   fmt::format("reading the power of GPU {}", index), handle, info.data());
  if (session.new_power_info_layout()) {
    return {info.read<std::uint32_t>(amdsmi::kNewCurrentSocketPowerOffset),
            info.read<std::uint32_t>(amdsmi::kNewAverageSocketPowerOffset)};
  }
  return {info.read<std::uint32_t>(amdsmi::kOldCurrentSocketPowerOffset),
          info.read<std::uint32_t>(amdsmi::kOldAverageSocketPowerOffset)};
}

// Energy since driver load in microjoules (accumulator x resolution).
long double read_energy_uj(const Session& session, ProcessorHandle handle, int index) {
  session.require(session.fn().amdsmi_get_energy_count, "amdsmi_get_energy_count",
                  "Reading the energy counter");
  std::uint64_t accumulator = 0;
  float resolution_uj = 0.0F;
  std::uint64_t timestamp = 0;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_energy_count,
                   fmt::format("reading the energy counter of GPU {}", index), handle, &accumulator,
                   &resolution_uj, &timestamp);
  return static_cast<long double>(accumulator) * static_cast<long double>(resolution_uj);
}

std::uint32_t clamp_to_u32(std::uint64_t value) {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(value, std::numeric_limits<std::uint32_t>::max()));
}

std::string odd_chiplet_message(int index) {
  return fmt::format(
      "GPU {0} is the second die of a dual-die AMD Instinct MI250/MI250X and has no power or "
      "energy reading of its own: the driver reports the combined power and energy of both dies "
      "(GPU {1} and GPU {0}) on GPU {1}. Measure GPU {1} instead; its readings include this die.",
      index, index - 1);
}

class AmdSmiGpu final : public Gpu {
 public:
  AmdSmiGpu(std::shared_ptr<const Session> session, DeviceRecord record)
      : session_(std::move(session)), record_(std::move(record)) {}

  GpuBackend backend() const override { return GpuBackend::kAmdSmi; }

  std::string name() override {
    std::string market_name = read_market_name(*session_, handle(), index());
    return market_name.empty() ? std::string("AMD GPU") : market_name;
  }

  std::string uuid() override {
    std::array<char, 256> buffer{};
    unsigned int length = static_cast<unsigned int>(buffer.size() - 1);
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_gpu_device_uuid, action("reading the UUID"), handle(),
                     &length, buffer.data());
    return std::string(buffer.data());
  }

  std::string pci_bus_id() override {
    AmdSmiBuffer bdf;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_gpu_device_bdf, action("reading the PCI address"),
                     handle(), bdf.data());
    const auto word = bdf.read<std::uint64_t>(0);
    return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", word >> 16, (word >> 8) & 0xFFu,
                       (word >> 3) & 0x1Fu, word & 0x7u);
  }

  std::string architecture() override { return architecture_from_name(name()); }

  PowerLimitConstraints power_limit_constraints_mw() override {
    const PowerCaps caps = read_power_caps("reading the power limit range");
    // Round the range inward so that every value in it is accepted by the driver.
    return {uw_to_mw(caps.min_uw, Rounding::kUp, "minimum power cap"),
            uw_to_mw(caps.max_uw, Rounding::kDown, "maximum power cap")};
  }

  std::uint32_t default_power_limit_mw() override {
    const PowerCaps caps = read_power_caps("reading the default power limit");
    return uw_to_mw(caps.default_uw, Rounding::kDown, "default power cap");
  }

  std::uint32_t power_limit_mw() override {
    const PowerCaps caps = read_power_caps("reading the power limit");
    return uw_to_mw(caps.current_uw, Rounding::kDown, "power cap");
  }

  // AMD SMI has no separate "enforced" limit: the power cap is what the firmware enforces.
  std::uint32_t enforced_power_limit_mw() override { return power_limit_mw(); }

  void set_power_limit_mw(std::uint32_t power_limit_mw) override {
    const PowerCaps caps = read_power_caps("reading the power limit before setting it");
    const std::uint32_t min_mw = uw_to_mw(caps.min_uw, Rounding::kUp, "minimum power cap");
    const std::uint32_t max_mw = uw_to_mw(caps.max_uw, Rounding::kDown, "maximum power cap");
    if (power_limit_mw < min_mw || power_limit_mw > max_mw) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("power limit {} mW is outside the valid range [{}, {}] mW of GPU {}",
                              power_limit_mw, min_mw, max_mw, index()));
    }
    if (uw_to_mw(caps.current_uw, Rounding::kDown, "power cap") == power_limit_mw) {
      return;
    }
    ZEUS_AMDSMI_CALL(*session_, amdsmi_set_power_cap,
                     action(fmt::format("setting the power limit to {} mW", power_limit_mw)),
                     handle(), 0U, static_cast<std::uint64_t>(power_limit_mw) * 1000U);
  }

  void reset_power_limit() override {
    const PowerCaps caps = read_power_caps("reading the power limit before resetting it");
    if (caps.current_uw == caps.default_uw) {
      return;
    }
    ZEUS_AMDSMI_CALL(
        *session_, amdsmi_set_power_cap,
        action(fmt::format("resetting the power limit to its default {} uW", caps.default_uw)),
        handle(), 0U, caps.default_uw);
  }

  bool persistence_mode() override {
    throw Error(ErrorKind::kNotSupported, "Persistence mode is not supported on AMD GPUs.");
  }

  void set_persistence_mode(bool /*enabled*/) override {
    throw Error(ErrorKind::kNotSupported, "Persistence mode is not supported on AMD GPUs.");
  }

  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    return read_clock_list_mhz(amdsmi::kClockTypeMem, "memory");
  }

  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    // AMD SMI lists graphics clock levels independently of the memory clock; a given memory
    // clock is only checked to be one of the supported ones.
    if (memory_clock_mhz.has_value()) {
      const auto memory = supported_memory_clocks_mhz();
      if (std::find(memory.begin(), memory.end(), *memory_clock_mhz) == memory.end()) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("memory clock {} MHz is not supported by GPU {} (supported: {})",
                                *memory_clock_mhz, index(), fmt::join(memory, ", ")));
      }
    }
    return read_clock_list_mhz(amdsmi::kClockTypeGfx, "graphics");
  }

  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    set_clock_range_mhz(amdsmi::kClockTypeGfx, "graphics", min_mhz, max_mhz);
  }

  void reset_gpu_locked_clocks() override {
    throw Error(ErrorKind::kNotSupported,
                "AMD SMI cannot reset the graphics clock range alone; use reset_locked_clocks(), "
                "which returns the GPU to the AUTO performance level.");
  }

  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    set_clock_range_mhz(amdsmi::kClockTypeMem, "memory", min_mhz, max_mhz);
  }

  void reset_memory_locked_clocks() override {
    throw Error(ErrorKind::kNotSupported,
                "AMD SMI cannot reset the memory clock range alone; use reset_locked_clocks(), "
                "which returns the GPU to the AUTO performance level.");
  }

  void reset_locked_clocks() override {
    session_->require(session_->fn().amdsmi_set_gpu_perf_level, "amdsmi_set_gpu_perf_level",
                      "Resetting locked clocks");
    ZEUS_AMDSMI_CALL(*session_, amdsmi_set_gpu_perf_level,
                     action("resetting the performance level to AUTO"), handle(),
                     amdsmi::kPerfLevelAuto);
  }

  std::uint32_t instant_power_mw() override {
    ensure_not_odd_chiplet();
    if (!record_.instant_power_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("Instant power is not supported on GPU {} (AMD SMI reports no "
                              "current_socket_power); use average_power_mw() instead.",
                              index()));
    }
    const SocketPower power = read_socket_power(*session_, handle(), index());
    if (!power_field_valid(power.current_w)) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("GPU {} reported no current_socket_power", index()));
    }
    return clamp_to_u32(static_cast<std::uint64_t>(power.current_w) * 1000U);
  }

  std::uint32_t average_power_mw() override {
    ensure_not_odd_chiplet();
    if (!record_.average_power_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("Average power is not supported on GPU {} (AMD SMI reports no "
                              "average_socket_power); use instant_power_mw() instead.",
                              index()));
    }
    const SocketPower power = read_socket_power(*session_, handle(), index());
    if (!power_field_valid(power.average_w)) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("GPU {} reported no average_socket_power", index()));
    }
    return clamp_to_u32(static_cast<std::uint64_t>(power.average_w) * 1000U);
  }

  std::uint32_t average_memory_power_mw() override {
    throw Error(ErrorKind::kNotSupported, "Memory power is not supported on AMD GPUs.");
  }

  bool supports_energy_counter() override {
    return record_.energy_counter_supported && !record_.odd_chiplet;
  }

  std::uint64_t total_energy_mj() override {
    ensure_not_odd_chiplet();
    if (!record_.energy_counter_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("The energy counter of GPU {} is not used: {}. Integrate "
                              "average_power_mw() or instant_power_mw() over time instead.",
                              index(), record_.energy_counter_note));
    }
    const long double energy_uj = read_energy_uj(*session_, handle(), index());
    return static_cast<std::uint64_t>(std::floor(energy_uj / 1000.0L));
  }

  int temperature_c() override {
    std::int64_t temperature = 0;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_temp_metric, action("reading the hotspot temperature"),
                     handle(), amdsmi::kTemperatureTypeHotspot, amdsmi::kTemperatureMetricCurrent,
                     &temperature);
    // amdsmi_get_temp_metric converts the kernel's millidegrees to degrees; a reading a thousand
    // times too large can only be a library that did not.
    if (temperature >= 1000 || temperature <= -1000) {
      temperature /= 1000;
    }
    return static_cast<int>(std::clamp<std::int64_t>(temperature, std::numeric_limits<int>::min(),
                                                     std::numeric_limits<int>::max()));
  }

 private:
  enum class Rounding { kDown, kUp };

  struct PowerCaps {
    std::uint64_t current_uw = 0;
    std::uint64_t default_uw = 0;
    std::uint64_t min_uw = 0;
    std::uint64_t max_uw = 0;
  };

  ProcessorHandle handle() const { return record_.handle; }
  int index() const { return record_.index; }

  std::string action(std::string_view what) const {
    return fmt::format("{} on GPU {}", what, index());
  }

  static std::string architecture_from_name(const std::string& name) {
    const auto has = [&name](std::string_view part) {
      return name.find(part) != std::string::npos;
    };
    if (has("MI350") || has("MI355")) {
      return "cdna4";
    }
    if (has("MI300") || has("MI325")) {
      return "cdna3";
    }
    if (has("MI200") || has("MI210") || has("MI250")) {
      return "cdna2";
    }
    if (has("MI100")) {
      return "cdna";
    }
    if (has("RX 9") || has("R9700")) {
      return "rdna4";
    }
    if (has("RX 7") || has("PRO W7") || has("PRO V710")) {
      return "rdna3";
    }
    if (has("RX 6") || has("PRO W6") || has("PRO V620")) {
      return "rdna2";
    }
    return "unknown";
  }

  PowerCaps read_power_caps(std::string_view what) {
    AmdSmiBuffer info;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_power_cap_info, action(what), handle(), 0U, info.data());
    return {info.read<std::uint64_t>(amdsmi::kPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kDefaultPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kMinPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kMaxPowerCapOffset)};
  }

  std::uint32_t uw_to_mw(std::uint64_t microwatts, Rounding rounding, const char* field) {
    const std::uint64_t remainder = microwatts % 1000U;
    std::uint64_t milliwatts = microwatts / 1000U;
    if (remainder != 0) {
      if (rounding == Rounding::kUp) {
        ++milliwatts;
      }
      if (!warned_inexact_.exchange(true)) {
        log().warn(
            "GPU {}: AMD SMI reported a {} of {} uW, not a whole number of milliwatts; "
            "using {} mW",
            index(), field, microwatts, milliwatts);
      }
    }
    return clamp_to_u32(milliwatts);
  }

  std::vector<std::uint32_t> read_clock_list_mhz(ClockType type, std::string_view domain) {
    const std::string capability = fmt::format("Listing supported {} clocks", domain);
    session_->require(session_->fn().amdsmi_get_clk_freq, "amdsmi_get_clk_freq", capability);
    AmdSmiBuffer frequencies;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_clk_freq,
                     action(fmt::format("listing the supported {} clocks", domain)), handle(), type,
                     frequencies.data());
    const std::size_t count = std::min<std::size_t>(
        frequencies.read<std::uint32_t>(amdsmi::kFrequenciesNumSupportedOffset),
        amdsmi::kMaxNumFrequencies);
    std::set<std::uint32_t, std::greater<>> clocks_mhz;
    for (std::size_t i = 0; i < count; ++i) {
      const auto hertz = frequencies.read<std::uint64_t>(amdsmi::kFrequenciesListOffset + 8 * i);
      const std::uint64_t megahertz = (hertz + 500'000U) / 1'000'000U;
      if (megahertz > 0) {
        clocks_mhz.insert(clamp_to_u32(megahertz));
      }
    }
    return {clocks_mhz.begin(), clocks_mhz.end()};
  }

  void set_clock_range_mhz(ClockType type, std::string_view domain, std::uint32_t min_mhz,
                           std::uint32_t max_mhz) {
    if (min_mhz > max_mhz) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("the minimum {} clock {} MHz is above the maximum {} MHz", domain,
                              min_mhz, max_mhz));
    }
    const std::string capability = fmt::format("Locking the {} clock", domain);
    session_->require(session_->fn().amdsmi_set_gpu_clk_range, "amdsmi_set_gpu_clk_range",
                      capability);
    ZEUS_AMDSMI_CALL(
        *session_, amdsmi_set_gpu_clk_range,
        action(fmt::format("locking the {} clock to [{}, {}] MHz", domain, min_mhz, max_mhz)),
        handle(), static_cast<std::uint64_t>(min_mhz), static_cast<std::uint64_t>(max_mhz), type);
  }

  void ensure_not_odd_chiplet() const {
    if (record_.odd_chiplet) {
      throw Error(ErrorKind::kNotSupported, odd_chiplet_message(index()));
    }
  }

  std::shared_ptr<const Session> session_;
  DeviceRecord record_;
  std::atomic<bool> warned_inexact_{false};
};

class AmdSmiProvider final : public GpuProvider {
 public:
  AmdSmiProvider(std::shared_ptr<Session> session, std::vector<DeviceRecord> devices)
      : session_(std::move(session)), devices_(std::move(devices)) {}

  GpuBackend backend() const override { return GpuBackend::kAmdSmi; }
  std::string library_path() const override { return session_->library().resolved_path(); }

  std::string driver_version() override {
    if (session_->fn().amdsmi_get_gpu_driver_info == nullptr) {
      return "";
    }
    for (const auto& device : devices_) {
      AmdSmiBuffer info;
      const Status status = session_->fn().amdsmi_get_gpu_driver_info(device.handle, info.data());
      if (status == amdsmi::kStatusSuccess) {
        return info.read_string(amdsmi::kDriverVersionOffset, amdsmi::kDriverVersionSize);
      }
      log().debug("amdsmi_get_gpu_driver_info failed for GPU {}: {}", device.index,
                  amdsmi::status_name(status));
    }
    return "";
  }

  std::string library_version() override { return session_->library_version(); }
  int device_count() override { return static_cast<int>(devices_.size()); }

  std::string device_uuid(int physical_index) override { return open_gpu(physical_index)->uuid(); }

  std::shared_ptr<Gpu> open_gpu(int physical_index) override {
    if (physical_index < 0 || physical_index >= device_count()) {
      throw Error(ErrorKind::kNotFound,
                  fmt::format("AMD GPU with HIP index {} not found; AMD SMI reports {} GPU(s)",
                              physical_index, device_count()));
    }
    return std::make_shared<AmdSmiGpu>(session_,
                                       devices_[static_cast<std::size_t>(physical_index)]);
  }

 private:
  std::shared_ptr<Session> session_;
  std::vector<DeviceRecord> devices_;
};

std::shared_ptr<DynamicLibrary> load_library(const std::string& library_path,
                                             const EnvLookup& env) {
  if (library_path != kDefaultAmdSmiLibrary) {
    return DynamicLibrary::open(library_path);
  }
  // The default name: explicit hints first, then the loader's search path, then /opt/rocm.
  std::vector<std::string> candidates;
  const auto add_directory = [&](std::optional<std::string> directory, std::string_view suffix) {
    if (directory.has_value() && !directory->empty()) {
      std::string path = *directory;
      while (path.size() > 1 && path.back() == '/') {
        path.pop_back();
      }
      candidates.push_back(fmt::format("{}{}/{}", path, suffix, library_path));
    }
  };
  add_directory(env("AMDSMI_LIB_DIR"), "");
  add_directory(env("ROCM_PATH"), "/lib");
  candidates.push_back(library_path);
  candidates.push_back(fmt::format("/opt/rocm/lib/{}", library_path));
  std::vector<std::string> failures;
  std::set<std::string> tried;
  for (const auto& candidate : candidates) {
    if (!tried.insert(candidate).second) {
      continue;
    }
    try {
      return DynamicLibrary::open(candidate);
    } catch (const Error& error) {
      failures.emplace_back(error.what());
    }
  }
  throw Error(ErrorKind::kLibraryNotFound,
              fmt::format("AMD SMI ({}) could not be loaded: {}. Install ROCm's amd-smi-lib, or "
                          "point ZEUS_AMDSMI_LIBRARY at the library (AMDSMI_LIB_DIR and ROCM_PATH "
                          "are also searched).",
                          library_path, fmt::join(failures, "; ")));
}

std::vector<ProcessorHandle> list_processors(const Session& session) {
  std::uint32_t socket_count = 0;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_socket_handles, "counting sockets", &socket_count, nullptr);
  std::vector<SocketHandle> sockets(socket_count);
  if (socket_count > 0) {
    ZEUS_AMDSMI_CALL(session, amdsmi_get_socket_handles, "listing sockets", &socket_count,
                     sockets.data());
    sockets.resize(std::min<std::size_t>(socket_count, sockets.size()));
  }
  std::vector<ProcessorHandle> processors;
  for (SocketHandle socket : sockets) {
    std::uint32_t count = 0;
    ZEUS_AMDSMI_CALL(session, amdsmi_get_processor_handles, "counting GPUs", socket, &count,
                     nullptr);
    std::vector<ProcessorHandle> handles(count);
    if (count > 0) {
      ZEUS_AMDSMI_CALL(session, amdsmi_get_processor_handles, "listing GPUs", socket, &count,
                       handles.data());
      handles.resize(std::min<std::size_t>(count, handles.size()));
    }
    processors.insert(processors.end(), handles.begin(), handles.end());
  }
  return processors;
}

// One uint32 per processor read from `function`'s structure at `offset`; nullopt when the
// function is absent, fails for any processor, or gives two processors the same key.
template <typename Fn>
std::optional<std::vector<std::uint32_t>> read_order_keys(Fn function, const char* name,
                                                          std::size_t offset,
                                                          const std::vector<ProcessorHandle>& all) {
  if (function == nullptr) {
    return std::nullopt;
  }
  std::vector<std::uint32_t> keys;
  for (ProcessorHandle handle : all) {
    AmdSmiBuffer info;
    const Status status = function(handle, info.data());
    if (status != amdsmi::kStatusSuccess) {
      log().debug("{} failed ({}); not ordering GPUs by it", name, amdsmi::status_name(status));
      return std::nullopt;
    }
    keys.push_back(info.read<std::uint32_t>(offset));
  }
  if (std::set<std::uint32_t>(keys.begin(), keys.end()).size() != keys.size()) {
    log().debug("{} gave two GPUs the same id; not ordering GPUs by it", name);
    return std::nullopt;
  }
  return keys;
}

// Sorts processors into HIP order.
std::vector<ProcessorHandle> order_by_hip_index(const Session& session,
                                                std::vector<ProcessorHandle> processors) {
  auto keys = read_order_keys(session.fn().amdsmi_get_gpu_enumeration_info,
                              "amdsmi_get_gpu_enumeration_info", amdsmi::kEnumerationHipIdOffset,
                              processors);
  if (!keys.has_value()) {
    keys = read_order_keys(session.fn().amdsmi_get_gpu_kfd_info, "amdsmi_get_gpu_kfd_info",
                           amdsmi::kKfdNodeIdOffset, processors);
  }
  if (!keys.has_value()) {
    if (processors.size() > 1) {
      log().warn(
          "AMD SMI gives neither HIP indices nor KFD node ids; GPUs are numbered in AMD "
          "SMI's enumeration order, which may differ from HIP's");
    }
    return processors;
  }
  std::vector<std::size_t> order(processors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return (*keys)[a] < (*keys)[b]; });
  std::vector<ProcessorHandle> sorted;
  sorted.reserve(processors.size());
  for (std::size_t i : order) {
    sorted.push_back(processors[i]);
  }
  return sorted;
}

// Which of the two socket power fields the device fills in.
void detect_power_fields(const Session& session, DeviceRecord& record) {
  try {
    const SocketPower power = read_socket_power(session, record.handle, record.index);
    record.instant_power_supported = power_field_valid(power.current_w);
    record.average_power_supported = power_field_valid(power.average_w);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNotSupported) {
      record.instant_power_supported = false;
      record.average_power_supported = false;
    }
    // Other failures surface on the first power read.
    log().debug("GPU {}: could not probe power fields: {}", record.index, error.what());
  }
}

// Power used to judge the energy counter: average, else instant, else 0.
std::uint32_t validation_power_mw(const Session& session, const DeviceRecord& record) {
  try {
    const SocketPower power = read_socket_power(session, record.handle, record.index);
    if (record.average_power_supported && power_field_valid(power.average_w)) {
      return clamp_to_u32(static_cast<std::uint64_t>(power.average_w) * 1000U);
    }
    if (record.instant_power_supported && power_field_valid(power.current_w)) {
      return clamp_to_u32(static_cast<std::uint64_t>(power.current_w) * 1000U);
    }
  } catch (const Error& error) {
    log().debug("GPU {}: no power reading for the energy counter check: {}", record.index,
                error.what());
  }
  return 0;
}

// Reads power and the energy counter, waits one window, reads the counter again, and keeps the
// counter of each device whose measured energy is within a factor of 10 of power x time.
void validate_energy_counters(const Session& session, std::vector<DeviceRecord>& devices,
                              const AmdSmiOptions& options) {
  const std::shared_ptr<Clock> clock = options.clock ? options.clock : steady_clock();
  struct Probe {
    std::uint32_t power_mw = 0;
    std::optional<long double> start_uj;
    double start_s = 0.0;
  };
  std::vector<Probe> probes(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    probes[i].power_mw = validation_power_mw(session, devices[i]);
  }
  bool any_started = false;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    try {
      probes[i].start_uj = read_energy_uj(session, devices[i].handle, devices[i].index);
      probes[i].start_s = clock->now_s();
      any_started = true;
    } catch (const Error& error) {
      devices[i].energy_counter_note = error.what();
    }
  }
  if (any_started) {
    if (options.sleep) {
      options.sleep(options.validation_window_s);
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(options.validation_window_s));
    }
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceRecord& device = devices[i];
    const Probe& probe = probes[i];
    if (!probe.start_uj.has_value()) {
      continue;
    }
    long double end_uj = 0.0L;
    try {
      end_uj = read_energy_uj(session, device.handle, device.index);
    } catch (const Error& error) {
      device.energy_counter_note = error.what();
      continue;
    }
    double elapsed_s = clock->now_s() - probe.start_s;
    if (!(elapsed_s > 0.0)) {
      elapsed_s = options.validation_window_s;
    }
    const double measured_mj = static_cast<double>((end_uj - *probe.start_uj) / 1000.0L);
    const double expected_mj = static_cast<double>(probe.power_mw) * elapsed_s;
    if (expected_mj < 0.001) {
      device.energy_counter_note = fmt::format(
          "its power reads zero, so the counter could not be checked against it (expected "
          "{:.3f} mJ over {:.3f} s)",
          expected_mj, elapsed_s);
    } else if (const double ratio = measured_mj / expected_mj; ratio > 0.1 && ratio < 10.0) {
      device.energy_counter_supported = true;
    } else {
      device.energy_counter_note = fmt::format(
          "the counter disagrees with the power reading (measured {:.1f} mJ, expected {:.1f} mJ "
          "over {:.3f} s; see https://github.com/ROCm/amdsmi/issues/38)",
          measured_mj, expected_mj, elapsed_s);
    }
    if (!device.energy_counter_supported) {
      log().info("GPU {}: not using the AMD SMI energy counter: {}", device.index,
                 device.energy_counter_note);
    }
  }
  // MI250/MI250X: each die is a GPU, but only the first (even HIP index) reports power, which
  // covers both dies.
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceRecord& device = devices[i];
    std::string name;
    try {
      name = read_market_name(session, device.handle, device.index);
    } catch (const Error&) {
      continue;
    }
    if (name.find("MI250") == std::string::npos) {
      continue;
    }
    if (device.index % 2 == 1 && probes[i].power_mw == 0) {
      device.odd_chiplet = true;
      device.energy_counter_supported = false;
      device.energy_counter_note = odd_chiplet_message(device.index);
      log().warn("{}", odd_chiplet_message(device.index));
    } else if (device.index % 2 == 0 && probes[i].power_mw != 0) {
      log().info(
          "GPU {} is a dual-die AMD Instinct MI250/MI250X: its power and energy include "
          "both dies (GPU {} and GPU {}).",
          device.index, device.index, device.index + 1);
    }
  }
}

}  // namespace

std::shared_ptr<GpuProvider> open_amdsmi_with_options(const std::string& library_path,
                                                      const AmdSmiOptions& options) {
  const EnvLookup env = options.env ? options.env : process_env();
  auto session = std::make_shared<Session>(load_library(library_path, env));
  const std::vector<ProcessorHandle> processors =
      order_by_hip_index(*session, list_processors(*session));
  std::vector<DeviceRecord> devices(processors.size());
  for (std::size_t i = 0; i < processors.size(); ++i) {
    devices[i].handle = processors[i];
    devices[i].index = static_cast<int>(i);
    detect_power_fields(*session, devices[i]);
  }
  validate_energy_counters(*session, devices, options);
  log().debug("AMD SMI {} from {}: {} GPU(s)", session->library_version(),
              session->library().resolved_path(), devices.size());
  return std::make_shared<AmdSmiProvider>(std::move(session), std::move(devices));
}

std::shared_ptr<GpuProvider> open_amdsmi(const std::string& library_path) {
  return open_amdsmi_with_options(library_path, AmdSmiOptions{});
}

}  // namespace zeus
