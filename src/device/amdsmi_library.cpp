// AMD SMI as a loaded library: symbol resolution, amdsmi_init/amdsmi_shut_down (Session), the
// library search (AMDSMI_LIB_DIR, ROCM_PATH, the loader path, /opt/rocm), the mapping of
// amdsmi_status_t to names and zeus error kinds, and the raw reads of name, socket power and the
// energy counter. Nothing here knows about device order or the Gpu interface. Units from AMD SMI:
// socket power in watts, energy as an accumulator times a resolution in microjoules. See
// docs/amdsmi.md.
#include "amdsmi_library.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus::device::amdsmi {

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

[[noreturn]] void throw_status(const char* call, Status status, std::string_view action) {
  std::string message =
      fmt::format("{} failed while {}: {} ({})", call, action, status_name(status), status);
  if (status == kStatusNoPerm) {
    message += ". ";
    message += permission_hint();
  }
  throw VendorError(error_kind_for_status(status), kVendor, call, static_cast<long long>(status),
                    message);
}

namespace {

// AMD SMI keeps process-wide state: one mutex for every Session (and every library loaded).
std::mutex& process_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

bool needs_serialized_calls(bool new_layout, std::uint32_t major, std::uint32_t minor) {
  if (!new_layout) {
    return true;
  }
  return major < kThreadSafeMajor || (major == kThreadSafeMajor && minor < kThreadSafeMinor);
}

std::unique_lock<std::mutex> Session::lock() const {
  return serialized_ ? std::unique_lock<std::mutex>(process_mutex())
                     : std::unique_lock<std::mutex>();
}

Session::Session(std::shared_ptr<DynamicLibrary> library) : library_(std::move(library)) {
  std::vector<std::string> missing;
#define AMDSMI_REQUIRED(name, params)                                            \
  functions_.name = reinterpret_cast<Status(*) params>(library_->symbol(#name)); \
  if (functions_.name == nullptr) {                                              \
    missing.emplace_back(#name);                                                 \
  }
#define AMDSMI_OPTIONAL(name, params) \
  functions_.name = reinterpret_cast<Status(*) params>(library_->symbol(#name));
#include "amdsmi_symbols.def"
#undef AMDSMI_REQUIRED
#undef AMDSMI_OPTIONAL
  if (!missing.empty()) {
    throw Error(ErrorKind::kFunctionNotFound,
                fmt::format("{} is not a usable AMD SMI library: it does not export {} (zeus "
                            "needs AMD SMI from ROCm 6.3 or newer)",
                            library_->resolved_path(), fmt::join(missing, ", ")),
                ErrorSubject::kGpu);
  }
  read_version();
  const Status status = call(&Functions::amdsmi_init, kInitAmdGpus);
  if (status != kStatusSuccess) {
    throw_status("amdsmi_init", status, "initialising AMD SMI for AMD GPUs");
  }
  initialized_ = true;
}

Session::~Session() {
  if (initialized_) {
    const Status status = call(&Functions::amdsmi_shut_down);
    if (status != kStatusSuccess) {
      log().debug("amdsmi_shut_down returned {}", status_name(status));
    }
  }
}

void Session::throw_missing(const char* name, std::string_view capability) const {
  throw Error(ErrorKind::kNotSupported,
              fmt::format("{} is not supported by this AMD SMI library ({} does not export {}; "
                          "a newer ROCm may have it)",
                          capability, library_->resolved_path(), name),
              ErrorSubject::kGpu);
}

void Session::read_version() {
  AmdSmiBuffer version;
  Status status = kStatusSuccess;
  {
    // Whether this library is thread-safe is not known yet: this call is serialized anyway.
    const std::lock_guard guard(process_mutex());
    status = functions_.amdsmi_get_lib_version(version.data());
  }
  if (status != kStatusSuccess) {
    log().warn(
        "amdsmi_get_lib_version failed ({}); assuming AMD SMI 25 or newer, and calling it one "
        "call at a time",
        status_name(status));
    return;
  }
  const auto first = version.read<std::uint32_t>(0);
  const auto second = version.read<std::uint32_t>(4);
  const auto third = version.read<std::uint32_t>(8);
  serialized_ = needs_serialized_calls(first >= kFirstNewLayoutVersion, first, second);
  if (first >= kFirstNewLayoutVersion) {
    library_version_ = fmt::format("{}.{}.{}", first, second, third);
  } else {
    const auto fourth = version.read<std::uint32_t>(12);
    library_version_ = fmt::format("{}.{}.{}.{}", first, second, third, fourth);
    new_power_info_layout_ = false;
  }
}

std::shared_ptr<DynamicLibrary> load_library(const std::string& library_path,
                                             const EnvLookup& env) {
  if (library_path != kDefaultAmdSmiLibrary) {
    try {
      return DynamicLibrary::open(library_path);
    } catch (const Error& error) {
      throw Error(error.kind(), error.what(), ErrorSubject::kGpu);
    }
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
                          library_path, fmt::join(failures, "; ")),
              ErrorSubject::kGpu);
}

std::string read_market_name(const Session& session, ProcessorHandle handle, int index) {
  AmdSmiBuffer info;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_gpu_asic_info,
                   fmt::format("reading the name of GPU {}", index), handle, info.data());
  return info.read_string(kAsicMarketNameOffset, kAsicMarketNameSize);
}

bool power_field_valid(std::uint32_t power_w) {
  return power_w != kPowerFieldUnsupported16 && power_w != kPowerFieldUnsupported32;
}

SocketPower read_socket_power(const Session& session, ProcessorHandle handle, int index) {
  AmdSmiBuffer info;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_power_info,
                   fmt::format("reading the power of GPU {}", index), handle, info.data());
  if (session.new_power_info_layout()) {
    return {info.read<std::uint32_t>(kNewCurrentSocketPowerOffset),
            info.read<std::uint32_t>(kNewAverageSocketPowerOffset)};
  }
  return {info.read<std::uint32_t>(kOldCurrentSocketPowerOffset),
          info.read<std::uint32_t>(kOldAverageSocketPowerOffset)};
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

std::uint32_t milliwatts_from_socket_watts(std::uint32_t power_w) {
  return clamp_to_u32(units::milliwatts_from_whole_watts(power_w));
}

}  // namespace zeus::device::amdsmi
