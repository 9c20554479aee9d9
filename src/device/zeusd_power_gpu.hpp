// A GPU this process knows only through zeusd's reads: its instant power (GET /gpu/get_power)
// and power limit; no setters, no energy counter, no clocks. For sampling power through the
// monitor layer's PowerSampler where the process has no vendor library of its own: the Slurm
// plugin's fallback for GPUs without an energy counter (src/slurm/polled_energy.hpp).
// Internal: zeus's own layers and tests use it.
#pragma once

#include <memory>
#include <string>

#include "device/zeusd_connection.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device {

class ZeusdPowerGpu final : public Gpu {
 public:
  // `name` as /discover lists it: its backend is AMD SMI for a name starting "AMD", else NVML.
  ZeusdPowerGpu(std::shared_ptr<ZeusdConnection> daemon, int daemon_index, std::string name);

  GpuBackend backend() const override { return backend_; }
  std::string name() override { return name_; }
  std::string uuid() override;
  std::string pci_bus_id() override;
  std::string architecture() override;
  PowerLimitConstraints power_limit_constraints_mw() override;
  std::uint32_t default_power_limit_mw() override;
  std::uint32_t power_limit_mw() override;
  std::uint32_t enforced_power_limit_mw() override { return power_limit_mw(); }
  void set_power_limit_mw(std::uint32_t power_limit_mw) override;
  void reset_power_limit() override;
  bool persistence_mode() override;
  void set_persistence_mode(bool enabled) override;
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override;
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override;
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_gpu_locked_clocks() override;
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_memory_locked_clocks() override;
  // GET /gpu/get_power: the daemon's instant reading of this GPU.
  std::uint32_t instant_power_mw() override;
  std::uint32_t average_power_mw() override { return instant_power_mw(); }
  std::uint32_t average_memory_power_mw() override;
  bool supports_energy_counter() override { return false; }
  std::uint64_t total_energy_mj() override;
  // The daemon reads the same NVML power field: module scope on a Grace superchip (by name).
  MeasuredScope power_scope() override;
  MeasuredScope energy_scope() override { return power_scope(); }
  int temperature_c() override;

 private:
  // GET `route`?gpu_ids=<index> -> the field of this GPU's object.
  std::uint64_t read(const std::string& route, const std::string& field);
  [[noreturn]] void unsupported(const std::string& what) const;

  std::shared_ptr<ZeusdConnection> daemon_;
  int index_;
  std::string name_;
  GpuBackend backend_;
};

}  // namespace zeus::device
