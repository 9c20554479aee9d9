#include "zeus/common/error.hpp"

namespace zeus {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kNotSupported:
      return "not_supported";
    case ErrorKind::kNoPermission:
      return "no_permission";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kLibraryNotFound:
      return "library_not_found";
    case ErrorKind::kFunctionNotFound:
      return "function_not_found";
    case ErrorKind::kUninitialized:
      return "uninitialized";
    case ErrorKind::kAlreadyInitialized:
      return "already_initialized";
    case ErrorKind::kInsufficientSize:
      return "insufficient_size";
    case ErrorKind::kInsufficientPower:
      return "insufficient_power";
    case ErrorKind::kDriverNotLoaded:
      return "driver_not_loaded";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kIrqIssue:
      return "irq_issue";
    case ErrorKind::kCorruptedInfoRom:
      return "corrupted_inforom";
    case ErrorKind::kGpuLost:
      return "gpu_lost";
    case ErrorKind::kResetRequired:
      return "reset_required";
    case ErrorKind::kOperatingSystem:
      return "operating_system";
    case ErrorKind::kLibRmVersionMismatch:
      return "lib_rm_version_mismatch";
    case ErrorKind::kMemory:
      return "memory";
    case ErrorKind::kInitError:
      return "init_error";
    case ErrorKind::kIo:
      return "io";
    case ErrorKind::kConflict:
      return "conflict";
    case ErrorKind::kAlreadyExists:
      return "already_exists";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string_view permission_hint() {
  return "Changing GPU settings needs root or the CAP_SYS_ADMIN capability (for example "
         "`sudo setcap cap_sys_admin+ep $(which zeus)`), or a running zeusd daemon "
         "(set ZEUSD_SOCK_PATH) that does it on your behalf.";
}

}  // namespace zeus
