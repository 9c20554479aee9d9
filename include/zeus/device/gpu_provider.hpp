// A GPU vendor library opened for this process (NVML, AMD SMI, or the simulator).
#pragma once

#include <memory>
#include <string>

#include "zeus/device/gpu.hpp"

namespace zeus::device {

class GpuProvider {
 public:
  virtual ~GpuProvider() = default;
  virtual GpuBackend backend() const = 0;
  // The shared library actually loaded ("" for the simulator).
  virtual std::string library_path() const = 0;
  // "" when the library cannot tell.
  virtual std::string driver_version() = 0;
  virtual std::string library_version() = 0;
  // Devices in physical order (the order zeusd and nvidia-smi use).
  virtual int device_count() = 0;
  virtual std::string device_uuid(int physical_index) = 0;
  virtual std::shared_ptr<Gpu> open_gpu(int physical_index) = 0;
};

// Default library names, overridable with ZEUS_NVML_LIBRARY / ZEUS_AMDSMI_LIBRARY.
inline constexpr const char* kDefaultNvmlLibrary = "libnvidia-ml.so.1";
inline constexpr const char* kDefaultAmdSmiLibrary = "libamd_smi.so";

// Loads NVML with dlopen and initialises it. Throws Error(kLibraryNotFound) when the library
// cannot be loaded, Error(kFunctionNotFound) when a required symbol is missing, and a
// VendorError when nvmlInit fails.
std::shared_ptr<GpuProvider> open_nvml(const std::string& library_path = kDefaultNvmlLibrary);

// Loads AMD SMI with dlopen and initialises it for AMD GPUs. Same errors as open_nvml.
// Devices are ordered by HIP index.
std::shared_ptr<GpuProvider> open_amdsmi(const std::string& library_path = kDefaultAmdSmiLibrary);

}  // namespace zeus::device
