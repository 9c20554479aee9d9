// NVML as a loaded library: the function table resolved from libnvidia-ml.so with dlopen,
// nvmlInit_v2/nvmlShutdown held for the life of the object, and the one mapping of NVML return
// codes to names and zeus error kinds (every failure becomes a VendorError about a GPU). This is
// the "device pool and IO" part of the NVIDIA backend: nvml_provider.cpp enumerates devices on
// top of it and nvml_gpu.cpp is the Gpu.
#pragma once

#include <memory>
#include <string>

#include "common/dynamic_library.hpp"
#include "nvml_api.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device::nvml {

// Function pointers for every symbol in nvml_symbols.def.
struct Functions {
#define NVML_REQUIRED(name, ret, params) ret(*name) params = nullptr;
#define NVML_OPTIONAL(name, ret, params) ret(*name) params = nullptr;
#include "nvml_symbols.def"
#undef NVML_REQUIRED
#undef NVML_OPTIONAL
};

struct ReturnInfo {
  const char* name;
  ErrorKind kind;
};

// The one place NVML return codes become error kinds.
ReturnInfo describe_return(Return code);

class Library {
 public:
  // Resolves the symbols (kFunctionNotFound naming the missing ones) and runs nvmlInit_v2.
  explicit Library(std::shared_ptr<DynamicLibrary> library);
  ~Library();

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const Functions& fn() const { return functions_; }
  std::string resolved_path() const { return library_->resolved_path(); }

  // Throws the VendorError for `code` (when not success) from `call` on `physical_index` (-1 for
  // a call about no device).
  void check(Return code, const char* call, int physical_index) const;
  // Throws kNotSupported when an optional symbol is missing.
  void require(const void* function, const char* call) const;

  Device handle(int physical_index) const;
  int device_count() const;
  std::string device_uuid(int physical_index) const;

 private:
  std::shared_ptr<DynamicLibrary> library_;
  Functions functions_;
};

// The Gpu for NVML device `physical_index` (nvml_gpu.cpp).
std::shared_ptr<Gpu> make_gpu(std::shared_ptr<const Library> library, int physical_index);

}  // namespace zeus::device::nvml
