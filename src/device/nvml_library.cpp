// NVML library loading, init/shutdown and return-code mapping; see nvml_library.hpp.
#include "nvml_library.hpp"

#include <array>
#include <string>
#include <vector>

#include "zeus/common/error.hpp"

namespace zeus::device::nvml {

// The one place NVML return codes become error kinds.
ReturnInfo describe_return(Return code) {
  switch (code) {
    case kErrorUninitialized:
      return {"NVML_ERROR_UNINITIALIZED", ErrorKind::kUninitialized};
    case kErrorInvalidArgument:
      return {"NVML_ERROR_INVALID_ARGUMENT", ErrorKind::kInvalidArgument};
    case kErrorNotSupported:
      return {"NVML_ERROR_NOT_SUPPORTED", ErrorKind::kNotSupported};
    case kErrorNoPermission:
      return {"NVML_ERROR_NO_PERMISSION", ErrorKind::kNoPermission};
    case kErrorAlreadyInitialized:
      return {"NVML_ERROR_ALREADY_INITIALIZED", ErrorKind::kAlreadyInitialized};
    case kErrorNotFound:
      return {"NVML_ERROR_NOT_FOUND", ErrorKind::kNotFound};
    case kErrorInsufficientSize:
      return {"NVML_ERROR_INSUFFICIENT_SIZE", ErrorKind::kInsufficientSize};
    case kErrorInsufficientPower:
      return {"NVML_ERROR_INSUFFICIENT_POWER", ErrorKind::kInsufficientPower};
    case kErrorDriverNotLoaded:
      return {"NVML_ERROR_DRIVER_NOT_LOADED", ErrorKind::kDriverNotLoaded};
    case kErrorTimeout:
      return {"NVML_ERROR_TIMEOUT", ErrorKind::kTimeout};
    case kErrorIrqIssue:
      return {"NVML_ERROR_IRQ_ISSUE", ErrorKind::kIrqIssue};
    case kErrorLibraryNotFound:
      return {"NVML_ERROR_LIBRARY_NOT_FOUND", ErrorKind::kLibraryNotFound};
    case kErrorFunctionNotFound:
      return {"NVML_ERROR_FUNCTION_NOT_FOUND", ErrorKind::kFunctionNotFound};
    case kErrorCorruptedInfoRom:
      return {"NVML_ERROR_CORRUPTED_INFOROM", ErrorKind::kCorruptedInfoRom};
    case kErrorGpuIsLost:
      return {"NVML_ERROR_GPU_IS_LOST", ErrorKind::kGpuLost};
    case kErrorResetRequired:
      return {"NVML_ERROR_RESET_REQUIRED", ErrorKind::kResetRequired};
    case kErrorOperatingSystem:
      return {"NVML_ERROR_OPERATING_SYSTEM", ErrorKind::kOperatingSystem};
    case kErrorLibRmVersionMismatch:
      return {"NVML_ERROR_LIB_RM_VERSION_MISMATCH", ErrorKind::kLibRmVersionMismatch};
    case kErrorInUse:
      return {"NVML_ERROR_IN_USE", ErrorKind::kUnknown};
    case kErrorMemory:
      return {"NVML_ERROR_MEMORY", ErrorKind::kMemory};
    case kErrorNoData:
      return {"NVML_ERROR_NO_DATA", ErrorKind::kNotSupported};
    case kErrorVgpuEccNotSupported:
      return {"NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", ErrorKind::kNotSupported};
    case kErrorInsufficientResources:
      return {"NVML_ERROR_INSUFFICIENT_RESOURCES", ErrorKind::kMemory};
    case kErrorFreqNotSupported:
      return {"NVML_ERROR_FREQ_NOT_SUPPORTED", ErrorKind::kNotSupported};
    case kErrorArgumentVersionMismatch:
      return {"NVML_ERROR_ARGUMENT_VERSION_MISMATCH", ErrorKind::kLibRmVersionMismatch};
    case kErrorDeprecated:
      return {"NVML_ERROR_DEPRECATED", ErrorKind::kNotSupported};
    case kErrorNotReady:
      return {"NVML_ERROR_NOT_READY", ErrorKind::kTimeout};
    case kErrorGpuNotFound:
      return {"NVML_ERROR_GPU_NOT_FOUND", ErrorKind::kNotFound};
    case kErrorInvalidState:
      return {"NVML_ERROR_INVALID_STATE", ErrorKind::kUnknown};
    default:
      return {"NVML_ERROR_UNKNOWN", ErrorKind::kUnknown};
  }
}

Library::Library(std::shared_ptr<DynamicLibrary> library) : library_(std::move(library)) {
  std::vector<std::string> missing;
#define NVML_REQUIRED(name, ret, params)                                      \
  functions_.name = reinterpret_cast<ret(*) params>(library_->symbol(#name)); \
  if (functions_.name == nullptr) {                                           \
    missing.emplace_back(#name);                                              \
  }
#define NVML_OPTIONAL(name, ret, params) \
  functions_.name = reinterpret_cast<ret(*) params>(library_->symbol(#name));
#include "nvml_symbols.def"
#undef NVML_REQUIRED
#undef NVML_OPTIONAL
  if (!missing.empty()) {
    std::string names;
    for (const auto& name : missing) {
      names += (names.empty() ? "" : ", ") + name;
    }
    throw Error(ErrorKind::kFunctionNotFound,
                library_->resolved_path() + " is not a usable NVML library: it lacks " + names +
                    " (a driver older than R450, or not NVML at all)",
                ErrorSubject::kGpu);
  }
  check(functions_.nvmlInit_v2(), "nvmlInit_v2", -1);
}

Library::~Library() {
  functions_.nvmlShutdown();
}

void Library::check(Return code, const char* call, int physical_index) const {
  if (code == kSuccess) {
    return;
  }
  const ReturnInfo info = describe_return(code);
  std::string message = std::string(call) + " failed";
  if (physical_index >= 0) {
    message += " on GPU " + std::to_string(physical_index) + " (NVML index)";
  }
  message += ": " + std::string(info.name) + " (" + std::to_string(code) + ")";
  if (functions_.nvmlErrorString != nullptr) {
    if (const char* text = functions_.nvmlErrorString(code); text != nullptr) {
      message += ", " + std::string(text);
    }
  }
  if (info.kind == ErrorKind::kNoPermission) {
    message += ". " + std::string(permission_hint());
  }
  throw VendorError(info.kind, "nvml", call, code, message);
}

void Library::require(const void* function, const char* call) const {
  if (function == nullptr) {
    throw Error(
        ErrorKind::kNotSupported,
        library_->resolved_path() + " does not provide " + call + " (update the NVIDIA driver)",
        ErrorSubject::kGpu);
  }
}

Device Library::handle(int physical_index) const {
  Device device = nullptr;
  check(functions_.nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(physical_index), &device),
        "nvmlDeviceGetHandleByIndex_v2", physical_index);
  return device;
}

int Library::device_count() const {
  unsigned count = 0;
  check(functions_.nvmlDeviceGetCount_v2(&count), "nvmlDeviceGetCount_v2", -1);
  return static_cast<int>(count);
}

std::string Library::device_uuid(int physical_index) const {
  std::array<char, kDeviceUuidBufferSize> buffer{};
  check(functions_.nvmlDeviceGetUUID(handle(physical_index), buffer.data(), buffer.size()),
        "nvmlDeviceGetUUID", physical_index);
  return buffer.data();
}

}  // namespace zeus::device::nvml
