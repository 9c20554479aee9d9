// The GPU discovery's environment: ZEUS_SIMULATED_GPUS -> parse_simulated_gpus_spec
// (zeus/device/simulated_gpu.hpp) and, when it parses, discover_gpus as a process would run it
// with that environment. The input is the variable's value, then after NULs the values of
// CUDA_VISIBLE_DEVICES and ZEUSD_HOST_PORT (each unset without its NUL); ZEUSD_HOST_PORT also
// goes to zeusd_config_from_env (zeus/device/zeusd_config.hpp) directly.
//
// A spec has 1 to 1024 GPUs of a known model, or the parser throws a zeus::Error quoting the
// value. Discovery then opens simulated GPUs only, each physical index in range and at most
// once, all of them when CUDA_VISIBLE_DEVICES is unset. A zeusd address that parses has a host
// and a port in 1..65535 (nothing connects until a setter is called).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/device/zeusd_config.hpp"

namespace {

namespace device = zeus::device;

// Discovery builds every GPU of the spec; past this many an input costs more than it teaches.
constexpr int kMaxDiscoveredGpus = 64;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

namespace {

// The pieces between NULs: the first always, the others only when their NUL is there.
std::vector<std::optional<std::string>> split_values(std::string_view input, std::size_t count) {
  std::vector<std::optional<std::string>> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t nul = i + 1 < count ? input.find('\0') : std::string_view::npos;
    values[i] = std::string(input.substr(0, nul));
    if (nul == std::string_view::npos) {
      break;
    }
    input.remove_prefix(nul + 1);
  }
  return values;
}

void check_zeusd_address(const std::optional<std::string>& host_port) {
  const zeus::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    return name == "ZEUSD_HOST_PORT" ? host_port : std::nullopt;
  };
  std::optional<device::ZeusdConfig> config;
  try {
    config = device::zeusd_config_from_env(env);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find("ZEUSD_HOST_PORT") !=
                    std::string_view::npos);
    return;
  }
  ZEUS_FUZZ_CHECK(config.has_value() == (host_port && !host_port->empty()));
  if (config) {
    ZEUS_FUZZ_CHECK(!config->socket_path && !config->host.empty());
    ZEUS_FUZZ_CHECK(config->port >= 1 && config->port <= 65535);
    ZEUS_FUZZ_CHECK(!config->describe().empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto values = split_values(std::string_view(reinterpret_cast<const char*>(data), size), 3);
  const std::string value = *values[0];
  const std::optional<std::string>& cuda_visible = values[1];
  const std::optional<std::string>& zeusd_host_port = values[2];
  check_zeusd_address(zeusd_host_port);

  device::SimulatedGpusSpec spec;
  try {
    spec = device::parse_simulated_gpus_spec(value);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find("ZEUS_SIMULATED_GPUS") !=
                    std::string_view::npos);
    return 0;
  }
  ZEUS_FUZZ_CHECK(spec.count >= 1 && spec.count <= 1024);
  ZEUS_FUZZ_CHECK(!value.empty());
  // The model it names exists (an Error escaping here is a crash: the parser let it through).
  const device::SimulatedGpuModel& model = device::simulated_gpu_model(spec.model_key);
  ZEUS_FUZZ_CHECK(!model.name.empty());
  if (spec.count > kMaxDiscoveredGpus) {
    return 0;
  }

  static const std::shared_ptr<zeus::ManualClock> clock = std::make_shared<zeus::ManualClock>();
  device::DiscoveryOptions options;
  options.clock = clock;
  options.env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "ZEUS_SIMULATED_GPUS") {
      return value;
    }
    if (name == "CUDA_VISIBLE_DEVICES") {
      return cuda_visible;
    }
    if (name == "ZEUSD_HOST_PORT") {
      return zeusd_host_port;
    }
    return std::nullopt;  // no library overrides
  };
  device::GpuDiscovery discovery;
  try {
    discovery = device::discover_gpus(options);
  } catch (const zeus::Error& error) {
    // Only CUDA_VISIBLE_DEVICES or ZEUSD_HOST_PORT can be wrong now: the spec parsed.
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    const std::string_view message = error.what();
    ZEUS_FUZZ_CHECK((cuda_visible && message.find("CUDA_VISIBLE_DEVICES") != message.npos) ||
                    (zeusd_host_port && message.find("ZEUSD_HOST_PORT") != message.npos));
    return 0;
  }
  ZEUS_FUZZ_CHECK(discovery.backend == device::GpuBackend::kSimulated);
  const device::Gpus& gpus = discovery.gpus;
  ZEUS_FUZZ_CHECK(gpus.size() <= static_cast<std::size_t>(spec.count));
  ZEUS_FUZZ_CHECK(cuda_visible || gpus.size() == static_cast<std::size_t>(spec.count));
  ZEUS_FUZZ_CHECK(gpus.physical_indices().size() == gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const int physical = gpus.physical_index(static_cast<int>(i));
    ZEUS_FUZZ_CHECK(physical >= 0 && physical < spec.count);
    for (std::size_t j = 0; j < i; ++j) {
      ZEUS_FUZZ_CHECK(gpus.physical_index(static_cast<int>(j)) != physical);
    }
  }
  return 0;
}
