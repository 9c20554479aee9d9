#include "zeus/device/gpu.hpp"

#include <string>

#include "common/text.hpp"

namespace zeus::device {

std::string_view gpu_backend_name(GpuBackend backend) {
  switch (backend) {
    case GpuBackend::kNvml:
      return "nvml";
    case GpuBackend::kAmdSmi:
      return "amdsmi";
    case GpuBackend::kSimulated:
      return "simulated";
  }
  return "unknown";
}

std::string_view measured_scope_name(MeasuredScope scope) {
  switch (scope) {
    case MeasuredScope::kGpu:
      return "gpu";
    case MeasuredScope::kModule:
      return "module";
    case MeasuredScope::kUnknown:
      break;
  }
  return "unknown";
}

bool is_grace_superchip_name(std::string_view name) {
  const std::string lower = text::ascii_lower(name);
  for (const std::string_view chip : {"gh200", "gb200", "gb300"}) {
    if (lower.find(chip) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace zeus::device
