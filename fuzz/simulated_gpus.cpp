// ZEUS_SIMULATED_GPUS -> parse_simulated_gpus_spec (zeus/device/simulated_gpu.hpp), and, when it
// parses, discover_gpus as a process would run it with that environment. The input is the
// variable's value; after a NUL, the value of CUDA_VISIBLE_DEVICES (without one it is unset).
//
// A spec has 1 to 1024 GPUs of a known model, or the parser throws a zeus::Error quoting the
// value. Discovery then opens simulated GPUs only, each physical index in range and at most
// once, all of them when CUDA_VISIBLE_DEVICES is unset.
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

namespace {

namespace device = zeus::device;

// Discovery builds every GPU of the spec; past this many an input costs more than it teaches.
constexpr int kMaxDiscoveredGpus = 64;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string value(input.substr(0, nul));
  std::optional<std::string> cuda_visible;
  if (nul != std::string_view::npos) {
    cuda_visible = std::string(input.substr(nul + 1));
  }

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
    return std::nullopt;  // no zeusd, no library overrides
  };
  device::GpuDiscovery discovery;
  try {
    discovery = device::discover_gpus(options);
  } catch (const zeus::Error& error) {
    // Only CUDA_VISIBLE_DEVICES can be wrong now: the spec parsed.
    ZEUS_FUZZ_CHECK(cuda_visible.has_value());
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find("CUDA_VISIBLE_DEVICES") !=
                    std::string_view::npos);
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
