#include "zeus/device/gpu.hpp"

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

}  // namespace zeus::device
