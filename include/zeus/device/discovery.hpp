// Finding the GPUs and CPUs of this machine.
//
// GPUs: ZEUS_SIMULATED_GPUS (when set, and only then) selects simulated GPUs; otherwise NVML is
// tried, then AMD SMI, then there are no GPUs. Every attempt is recorded for `zeus show-env`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/env.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/rapl.hpp"

namespace zeus::device {

struct DiscoveryOptions {
  EnvLookup env = process_env();
  // Library paths; when unset, ZEUS_NVML_LIBRARY / ZEUS_AMDSMI_LIBRARY, then the defaults.
  std::optional<std::string> nvml_library_path;
  std::optional<std::string> amdsmi_library_path;
  // Clock for simulated GPUs (the steady clock when null).
  std::shared_ptr<Clock> clock;
};

// What happened when one backend was tried.
struct BackendProbe {
  std::string backend;  // "simulated", "nvml", "amdsmi"
  bool loaded = false;
  std::string library_path;
  std::string driver_version;
  std::string library_version;
  int device_count = 0;
  std::string message;  // why it did not load, or a note
};

struct GpuDiscovery {
  Gpus gpus;
  std::optional<GpuBackend> backend;  // the backend the GPUs come from
  std::vector<BackendProbe> probes;
  std::string visible_devices_variable;  // "CUDA_VISIBLE_DEVICES" or "HIP_VISIBLE_DEVICES"
  std::optional<std::string> visible_devices_value;
  std::string message;  // a sentence for the user when there are no GPUs
};

// Tries the backends in order. Throws Error(kInvalidArgument) for a malformed
// ZEUS_SIMULATED_GPUS or *_VISIBLE_DEVICES (those are the user's mistakes, not a missing GPU);
// a backend that cannot be loaded is recorded in `probes`, never thrown.
GpuDiscovery discover_gpus(const DiscoveryOptions& options = {});

// Process-wide GPUs (discovered once, thread-safe). Empty when the machine has none.
const Gpus& get_gpus();
// RAPL CPUs: the local powercap tree (ZEUS_POWERCAP_ROOT when set, else default_powercap_root());
// when it cannot be read (typically: RAPL files are root-only) and ZEUSD_SOCK_PATH or
// ZEUSD_HOST_PORT is set, the daemon's packages instead (ZeusdCpu, one request per reading).
// Never throws: why neither works goes into `message`.
CpuDiscovery discover_cpus(const EnvLookup& env = process_env());

// Process-wide CPUs (discover_cpus(), once).
const CpuDiscovery& get_cpus();

}  // namespace zeus::device
