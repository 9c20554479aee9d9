// The AMD SMI library as zeus holds it: libamd_smi.so found and opened with dlopen, its function
// table filled, amdsmi_init run once (Session), failed calls turned into VendorErrors, and the few
// reads that both a GPU and device discovery need (name, socket power, energy counter). This is
// the "device pool and IO" part of the AMD backend; amdsmi_topology.hpp orders and validates the
// devices, and amdsmi_gpu.cpp is the Gpu on top of both.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "amdsmi_api.hpp"
#include "common/dynamic_library.hpp"
#include "zeus/common/env.hpp"

namespace zeus::device::amdsmi {

inline constexpr const char* kVendor = "amdsmi";

// The function table, filled from the shared library.
struct Functions {
#define AMDSMI_REQUIRED(name, params) Status(*name) params = nullptr;
#define AMDSMI_OPTIONAL(name, params) Status(*name) params = nullptr;
#include "amdsmi_symbols.def"
#undef AMDSMI_REQUIRED
#undef AMDSMI_OPTIONAL
};

// Throws the VendorError (subject GPU) for `call` having returned `status` while doing `action`.
[[noreturn]] void throw_status(const char* call, Status status, std::string_view action);

// The first AMD SMI whose calls are thread-safe: 26.2, the library of ROCm 7.2 (ROCm 7.0 ships
// AMD SMI 26.0, 7.1 26.1). Older ones are called under one process-wide mutex (reference #256).
inline constexpr std::uint32_t kThreadSafeMajor = 26;
inline constexpr std::uint32_t kThreadSafeMinor = 2;

// Whether an AMD SMI of this version must be called one call at a time: every version before
// 26.2, the old {year, major, minor, release} layout (ROCm 6.3 and older) included.
bool needs_serialized_calls(bool new_layout, std::uint32_t major, std::uint32_t minor);

// The loaded library and the amdsmi_init it holds; shared by the provider and every Gpu so that
// amdsmi_shut_down runs once, after the last user.
class Session {
 public:
  // Resolves the symbols (kFunctionNotFound naming the missing ones), reads the library version
  // and runs amdsmi_init for AMD GPUs.
  explicit Session(std::shared_ptr<DynamicLibrary> library);
  ~Session();

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The function table, for asking whether an optional function exists; call through call() (or
  // ZEUS_AMDSMI_CALL), never through a pointer read from here.
  const Functions& fn() const { return functions_; }

  // Calls `function` of the table. On an AMD SMI that is not thread-safe (serialized()), under
  // the one process-wide mutex every Session shares: the library's state is global.
  template <typename Fn, typename... Args>
  Status call(Fn Functions::*function, Args&&... args) const {
    const std::unique_lock<std::mutex> guard = lock();
    return (functions_.*function)(std::forward<Args>(args)...);
  }
  // Whether calls are serialized (an AMD SMI older than 26.2, or one whose version is unknown).
  bool serialized() const { return serialized_; }
  const DynamicLibrary& library() const { return *library_; }
  // Whether amdsmi_power_info_t has the ROCm 6.4+ layout (a uint64 socket_power first).
  bool new_power_info_layout() const { return new_power_info_layout_; }
  const std::string& library_version() const { return library_version_; }

  // Throws kNotSupported when an optional function is absent from this library.
  template <typename Fn>
  void require(Fn function, const char* name, std::string_view capability) const {
    if (function == nullptr) {
      throw_missing(name, capability);
    }
  }

 private:
  [[noreturn]] void throw_missing(const char* name, std::string_view capability) const;
  void read_version();
  // The process-wide mutex when serialized(), else an empty lock.
  std::unique_lock<std::mutex> lock() const;

  std::shared_ptr<DynamicLibrary> library_;
  Functions functions_;
  bool initialized_ = false;
  bool new_power_info_layout_ = true;
  bool serialized_ = true;  // until the version says otherwise
  std::string library_version_;
};

// Calls an AMD SMI function and throws a VendorError naming it when it fails.
#define ZEUS_AMDSMI_CALL(session, function, action, ...)                           \
  do {                                                                             \
    const ::zeus::device::amdsmi::Status zeus_amdsmi_status =                      \
        (session).call(&::zeus::device::amdsmi::Functions::function, __VA_ARGS__); \
    if (zeus_amdsmi_status != ::zeus::device::amdsmi::kStatusSuccess) {            \
      ::zeus::device::amdsmi::throw_status(#function, zeus_amdsmi_status, action); \
    }                                                                              \
  } while (false)

// Opens `library_path`; for the default name, tries AMDSMI_LIB_DIR, ROCM_PATH/lib, the loader's
// search path and /opt/rocm/lib in turn (kLibraryNotFound listing every failure).
std::shared_ptr<DynamicLibrary> load_library(const std::string& library_path, const EnvLookup& env);

// ---- Reads shared by the GPU and discovery ----

std::string read_market_name(const Session& session, ProcessorHandle handle, int index);

// Whether a socket power field holds a reading (not one of AMD SMI's "unsupported" markers).
bool power_field_valid(std::uint32_t power_w);

struct SocketPower {
  std::uint32_t current_w = 0;
  std::uint32_t average_w = 0;
};
SocketPower read_socket_power(const Session& session, ProcessorHandle handle, int index);

// Energy since driver load in microjoules (accumulator x resolution).
long double read_energy_uj(const Session& session, ProcessorHandle handle, int index);

std::uint32_t clamp_to_u32(std::uint64_t value);

// Milliwatts of a socket power field in whole watts, saturating at the uint32 range.
std::uint32_t milliwatts_from_socket_watts(std::uint32_t power_w);

}  // namespace zeus::device::amdsmi
