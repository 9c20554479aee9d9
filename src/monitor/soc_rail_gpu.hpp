// One power rail of a SoC read as a Gpu that offers its power and nothing else, so that the one
// PowerSampler (background thread, HeldSeries, sample-and-hold energy, failed reads counted and
// held) samples SoC rails exactly as it samples GPUs without an energy counter. Internal to the
// monitor layer: SocSampler (zeus/monitor/soc_sampler.hpp) is its only user.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/jetson.hpp"

namespace zeus::monitor {

class SocRailGpu final : public device::Gpu {
 public:
  SocRailGpu(std::shared_ptr<const device::JetsonSoc> soc, std::size_t rail)
      : soc_(std::move(soc)), rail_(rail) {}

  device::GpuBackend backend() const override { return device::GpuBackend::kSimulated; }
  std::string name() override { return "SoC rail " + soc_->rails().at(rail_).name; }
  std::string uuid() override { unsupported("a UUID"); }
  std::string pci_bus_id() override { unsupported("a PCI bus id"); }
  std::string architecture() override { unsupported("an architecture"); }
  device::PowerLimitConstraints power_limit_constraints_mw() override {
    unsupported("a power limit");
  }
  std::uint32_t default_power_limit_mw() override { unsupported("a power limit"); }
  std::uint32_t power_limit_mw() override { unsupported("a power limit"); }
  std::uint32_t enforced_power_limit_mw() override { unsupported("a power limit"); }
  void set_power_limit_mw(std::uint32_t) override { unsupported("a power limit"); }
  void reset_power_limit() override { unsupported("a power limit"); }
  bool persistence_mode() override { unsupported("persistence mode"); }
  void set_persistence_mode(bool) override { unsupported("persistence mode"); }
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override { unsupported("clocks"); }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(std::optional<std::uint32_t>) override {
    unsupported("clocks");
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t, std::uint32_t) override { unsupported("clocks"); }
  void reset_gpu_locked_clocks() override { unsupported("clocks"); }
  void set_memory_locked_clocks_mhz(std::uint32_t, std::uint32_t) override {
    unsupported("clocks");
  }
  void reset_memory_locked_clocks() override { unsupported("clocks"); }
  // The rail's power, to the milliwatt.
  std::uint32_t instant_power_mw() override {
    return static_cast<std::uint32_t>(std::llround(soc_->rail_power_mw(rail_)));
  }
  std::uint32_t average_power_mw() override { return instant_power_mw(); }
  std::uint32_t average_memory_power_mw() override { unsupported("memory power"); }
  // A board's power rail: what it covers is its name (VDD_GPU_SOC, VIN_SYS_5V0), not a GPU's or
  // a superchip module's scope.
  device::MeasuredScope power_scope() override { return device::MeasuredScope::kUnknown; }
  device::MeasuredScope energy_scope() override { return device::MeasuredScope::kUnknown; }
  bool supports_energy_counter() override { return false; }
  std::uint64_t total_energy_mj() override { unsupported("an energy counter"); }
  int temperature_c() override { unsupported("a temperature"); }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorKind::kNotSupported,
                "SoC rail " + soc_->rails().at(rail_).name + " has no " + what);
  }

  std::shared_ptr<const device::JetsonSoc> soc_;
  std::size_t rail_;
};

}  // namespace zeus::monitor
