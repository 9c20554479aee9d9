#include "zeus/device/discovery.hpp"

#include <filesystem>

#include "common/log.hpp"
#include "device/visible_devices.hpp"
#include "device/zeusd_connection.hpp"
#include "device/zeusd_cpu.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu_provider.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/device/zeusd_gpu.hpp"

namespace zeus::device {

namespace fs = std::filesystem;
namespace {

// Opens the visible GPUs of `provider`, masking with `variable` as CUDA/HIP would.
void take_gpus(GpuDiscovery& result, GpuProvider& provider, const std::string& variable,
               const std::optional<std::string>& value) {
  const int count = provider.device_count();
  std::vector<std::string> uuids;
  uuids.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    try {
      uuids.push_back(provider.device_uuid(i));
    } catch (const Error& error) {
      log().warn("cannot read the UUID of GPU {}: {}", i, error.what());
      uuids.emplace_back();
    }
  }
  const std::vector<int> visible = resolve_visible_devices(variable, value, uuids);
  std::vector<std::shared_ptr<Gpu>> gpus;
  for (const int physical : visible) {
    gpus.push_back(provider.open_gpu(physical));
  }
  result.gpus = Gpus(std::move(gpus), visible);
  result.backend = provider.backend();
  result.visible_devices_variable = variable;
  result.visible_devices_value = value;
  if (result.gpus.empty()) {
    result.message = std::string(gpu_backend_name(provider.backend())) + " reports " +
                     std::to_string(count) + " GPU(s), but " + variable + "=\"" +
                     value.value_or("") + "\" hides all of them";
  }
}

// Tries one vendor library. Returns true when it has GPUs (and fills `result`).
template <typename Opener>
bool try_backend(GpuDiscovery& result, const char* backend, const std::string& library_path,
                 Opener open, const std::string& variable,
                 const std::optional<std::string>& value) {
  BackendProbe probe;
  probe.backend = backend;
  probe.library_path = library_path;
  std::shared_ptr<GpuProvider> provider;
  try {
    provider = open(library_path);
    probe.loaded = true;
    probe.library_path = provider->library_path();
    probe.driver_version = provider->driver_version();
    probe.library_version = provider->library_version();
    probe.device_count = provider->device_count();
    if (probe.device_count == 0) {
      probe.message = "loaded, but it reports no GPU";
    }
  } catch (const Error& error) {
    probe.loaded = false;
    probe.message = error.what();
  }
  result.probes.push_back(probe);
  if (!probe.loaded || probe.device_count == 0) {
    return false;
  }
  take_gpus(result, *provider, variable, value);
  return true;
}

// With ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT set, every GPU becomes a ZeusdGpu: reads stay local,
// setters go to the daemon, numbered by the physical (vendor) index as zeusd numbers them (AMD:
// matched by PCI address, as the reference does). The daemon is first contacted when a setter
// is called, so a daemon without gpu-control (or an unreachable one) fails only the setters.
void route_setters_to_zeusd(GpuDiscovery& result, const EnvLookup& env) {
  const std::optional<ZeusdConfig> config = zeusd_config_from_env(env);
  if (!config || result.gpus.empty()) {
    return;
  }
  auto connection = std::make_shared<ZeusdConnection>(*config);
  std::vector<std::shared_ptr<Gpu>> wrapped;
  for (std::size_t i = 0; i < result.gpus.size(); ++i) {
    const int index = static_cast<int>(i);
    std::shared_ptr<Gpu> local = result.gpus.shared(index);
    const bool amd = local->backend() == GpuBackend::kAmdSmi;
    wrapped.push_back(std::make_shared<ZeusdGpu>(
        std::move(local), result.gpus.physical_index(index), connection, amd));
  }
  result.gpus = Gpus(std::move(wrapped), result.gpus.physical_indices());
  log().info("GPU settings go through the zeusd daemon at {} (reads stay local)",
             config->describe());
}

GpuDiscovery discover_local_gpus(const DiscoveryOptions& options, const EnvLookup& env);

}  // namespace

GpuDiscovery discover_gpus(const DiscoveryOptions& options) {
  const EnvLookup env = options.env ? options.env : process_env();
  GpuDiscovery result = discover_local_gpus(options, env);
  route_setters_to_zeusd(result, env);
  return result;
}

namespace {

GpuDiscovery discover_local_gpus(const DiscoveryOptions& options, const EnvLookup& env) {
  GpuDiscovery result;
  const std::optional<std::string> cuda_visible = env("CUDA_VISIBLE_DEVICES");

  if (const auto simulated = env("ZEUS_SIMULATED_GPUS"); simulated && !simulated->empty()) {
    const SimulatedGpusSpec spec = parse_simulated_gpus_spec(*simulated);
    const SimulatedGpuModel model = spec.model();  // with the ":thermal" option
    auto provider = make_simulated_provider(spec.count, model, options.clock);
    BackendProbe probe;
    probe.backend = "simulated";
    probe.loaded = true;
    probe.driver_version = "simulated";
    probe.library_version = "simulated";
    probe.device_count = spec.count;
    probe.message = "selected by ZEUS_SIMULATED_GPUS=\"" + *simulated + "\" (" +
                    std::to_string(spec.count) + " x " + model.name + ")";
    result.probes.push_back(probe);
    take_gpus(result, *provider, "CUDA_VISIBLE_DEVICES", cuda_visible);
    return result;
  }
  result.probes.push_back(
      {"simulated", false, "", "", "", 0,
       "not selected (set ZEUS_SIMULATED_GPUS=<count>[:<model>] to use simulated GPUs)"});

  const std::string nvml_path = options.nvml_library_path
                                    ? *options.nvml_library_path
                                    : env("ZEUS_NVML_LIBRARY").value_or(kDefaultNvmlLibrary);
  if (try_backend(result, "nvml", nvml_path, open_nvml, "CUDA_VISIBLE_DEVICES", cuda_visible)) {
    return result;
  }

  const std::string amdsmi_path = options.amdsmi_library_path
                                      ? *options.amdsmi_library_path
                                      : env("ZEUS_AMDSMI_LIBRARY").value_or(kDefaultAmdSmiLibrary);
  const std::optional<std::string> hip_visible = env("HIP_VISIBLE_DEVICES");
  const bool use_hip = hip_visible.has_value();
  if (try_backend(result, "amdsmi", amdsmi_path, open_amdsmi,
                  use_hip ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES",
                  use_hip ? hip_visible : cuda_visible)) {
    return result;
  }

  if (result.message.empty()) {
    result.message =
        "No GPU found: neither NVML (NVIDIA) nor AMD SMI (AMD) is available or reports a GPU. "
        "GPU energy cannot be measured; CPU measurement still works where RAPL is available. To "
        "try zeus without a GPU, set ZEUS_SIMULATED_GPUS=<count>[:<model>] (e.g. 4:h200).";
  }
  return result;
}

}  // namespace

const Gpus& get_gpus() {
  static const GpuDiscovery discovery = [] {
    GpuDiscovery found = discover_gpus();
    if (found.gpus.empty()) {
      log().warn("{}", found.message);
    }
    return found;
  }();
  return discovery.gpus;
}

CpuDiscovery discover_cpus(const EnvLookup& env) {
  const std::optional<std::string> root = env("ZEUS_POWERCAP_ROOT");
  CpuDiscovery local =
      discover_rapl_cpus(root && !root->empty() ? fs::path(*root) : default_powercap_root());
  if (local.available) {
    return local;
  }
  std::optional<ZeusdConfig> config;
  try {
    config = zeusd_config_from_env(env);
  } catch (const Error& error) {
    local.message += "; " + std::string(error.what());
    return local;
  }
  if (!config) {
    return local;
  }
  try {
    auto connection = std::make_shared<ZeusdConnection>(*config);
    CpuDiscovery through_daemon;
    through_daemon.root = local.root;
    for (const ZeusdCpuInfo& info : connection->readable_cpus()) {
      through_daemon.cpus.push_back(std::make_shared<ZeusdCpu>(info, connection));
    }
    if (through_daemon.cpus.empty()) {
      local.message += "; the zeusd daemon at " + config->describe() + " has no RAPL CPU either";
      return local;
    }
    through_daemon.available = true;
    through_daemon.through_zeusd = true;
    through_daemon.message = std::to_string(through_daemon.cpus.size()) +
                             " CPU package(s) read through the zeusd daemon at " +
                             config->describe() + " (locally: " + local.message + ")";
    return through_daemon;
  } catch (const Error& error) {
    local.message += "; reading through zeusd failed: " + std::string(error.what());
    return local;
  }
}

const CpuDiscovery& get_cpus() {
  static const CpuDiscovery discovery = discover_cpus();
  return discovery;
}

}  // namespace zeus::device
