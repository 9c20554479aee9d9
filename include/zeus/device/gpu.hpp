// The GPU interface every backend implements (NVML, AMD SMI, the simulated GPU).
//
// Units are in every name: power in milliwatts (mw), energy in millijoules (mj), clocks in
// megahertz (mhz), temperature in degrees Celsius (c). Methods throw zeus::Error (often a
// VendorError) on failure; kNotSupported when the device or driver cannot do it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::device {

enum class GpuBackend { kNvml, kAmdSmi, kSimulated };

// "nvml", "amdsmi" or "simulated".
std::string_view gpu_backend_name(GpuBackend backend);

// What a GPU's power and energy figures cover (docs/devices.md, "Grace Hopper and Grace
// Blackwell: module scope"). kGpu: the GPU board (the chip and its memory), as on a discrete
// GPU. kModule: the whole superchip module, GPU plus Grace CPU plus their memory, as NVML
// reports it on GH200 and GB200. kUnknown: the backend cannot tell.
enum class MeasuredScope { kUnknown, kGpu, kModule };

// "unknown", "gpu" or "module".
std::string_view measured_scope_name(MeasuredScope scope);

// Whether `name` is the GPU of a Grace superchip (GH200, GB200, GB300), whose NVML energy
// counter covers the whole module: the model names NVIDIA gives them ("NVIDIA GH200 480GB").
bool is_grace_superchip_name(std::string_view name);

struct PowerLimitConstraints {
  std::uint32_t min_mw = 0;
  std::uint32_t max_mw = 0;
};

class Gpu {
 public:
  virtual ~Gpu() = default;

  virtual GpuBackend backend() const = 0;
  virtual std::string name() = 0;
  virtual std::string uuid() = 0;
  // PCI bus id in the domain:bus:device.function form, e.g. "00000000:3B:00.0".
  virtual std::string pci_bus_id() = 0;
  // Architecture name, e.g. "volta", "ampere", "hopper", "cdna3"; "unknown" when not known.
  virtual std::string architecture() = 0;

  // Power management limit. Setters are no-ops when the value is already in force.
  virtual PowerLimitConstraints power_limit_constraints_mw() = 0;
  virtual std::uint32_t default_power_limit_mw() = 0;
  virtual std::uint32_t power_limit_mw() = 0;
  // The limit actually enforced (may be lower than power_limit_mw under other constraints).
  virtual std::uint32_t enforced_power_limit_mw() = 0;
  // Throws kInvalidArgument when outside power_limit_constraints_mw().
  virtual void set_power_limit_mw(std::uint32_t power_limit_mw) = 0;
  virtual void reset_power_limit() = 0;

  virtual bool persistence_mode() = 0;
  virtual void set_persistence_mode(bool enabled) = 0;

  virtual std::vector<std::uint32_t> supported_memory_clocks_mhz() = 0;
  // SM (graphics) clocks supported at `memory_clock_mhz`; at the highest memory clock when unset.
  virtual std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) = 0;
  virtual void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) = 0;
  virtual void reset_gpu_locked_clocks() = 0;
  virtual void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) = 0;
  virtual void reset_memory_locked_clocks() = 0;
  // Both of the above by default; backends with a single "auto" switch override it.
  virtual void reset_locked_clocks() {
    reset_gpu_locked_clocks();
    reset_memory_locked_clocks();
  }

  virtual std::uint32_t instant_power_mw() = 0;
  virtual std::uint32_t average_power_mw() = 0;
  virtual std::uint32_t average_memory_power_mw() = 0;

  // A probe: never throws.
  virtual bool supports_energy_counter() = 0;
  // Energy since the driver was loaded. kNotSupported when supports_energy_counter() is false.
  virtual std::uint64_t total_energy_mj() = 0;

  // The scope of instant_power_mw() and average_power_mw(). A probe: never throws.
  virtual MeasuredScope power_scope() = 0;
  // The scope of the energy a monitor measures on this GPU: total_energy_mj()'s when
  // supports_energy_counter(), else the power readings'. A probe: never throws.
  virtual MeasuredScope energy_scope() = 0;

  virtual int temperature_c() = 0;
};

}  // namespace zeus::device
