// A Gpu that passes every call on to another one: the base of wrappers that change only some
// calls (ZeusdGpu sends the setters to zeusd; zeusd's --gpu-command-overrides run commands for
// them). A wrapper overrides what it changes and inherits the rest.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zeus/device/gpu.hpp"

namespace zeus::device {

class ForwardingGpu : public Gpu {
 public:
  explicit ForwardingGpu(std::shared_ptr<Gpu> inner) : inner_(std::move(inner)) {}

  Gpu& inner() { return *inner_; }

  GpuBackend backend() const override { return inner_->backend(); }
  std::string name() override { return inner_->name(); }
  std::string uuid() override { return inner_->uuid(); }
  std::string pci_bus_id() override { return inner_->pci_bus_id(); }
  std::string architecture() override { return inner_->architecture(); }
  PowerLimitConstraints power_limit_constraints_mw() override {
    return inner_->power_limit_constraints_mw();
  }
  std::uint32_t default_power_limit_mw() override { return inner_->default_power_limit_mw(); }
  std::uint32_t power_limit_mw() override { return inner_->power_limit_mw(); }
  std::uint32_t enforced_power_limit_mw() override { return inner_->enforced_power_limit_mw(); }
  void set_power_limit_mw(std::uint32_t power_limit_mw) override {
    inner_->set_power_limit_mw(power_limit_mw);
  }
  void reset_power_limit() override { inner_->reset_power_limit(); }
  bool persistence_mode() override { return inner_->persistence_mode(); }
  void set_persistence_mode(bool enabled) override { inner_->set_persistence_mode(enabled); }
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    return inner_->supported_memory_clocks_mhz();
  }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    return inner_->supported_graphics_clocks_mhz(memory_clock_mhz);
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    inner_->set_gpu_locked_clocks_mhz(min_mhz, max_mhz);
  }
  void reset_gpu_locked_clocks() override { inner_->reset_gpu_locked_clocks(); }
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    inner_->set_memory_locked_clocks_mhz(min_mhz, max_mhz);
  }
  void reset_memory_locked_clocks() override { inner_->reset_memory_locked_clocks(); }
  void reset_locked_clocks() override { inner_->reset_locked_clocks(); }
  std::uint32_t instant_power_mw() override { return inner_->instant_power_mw(); }
  std::uint32_t average_power_mw() override { return inner_->average_power_mw(); }
  std::uint32_t average_memory_power_mw() override { return inner_->average_memory_power_mw(); }
  bool supports_energy_counter() override { return inner_->supports_energy_counter(); }
  std::uint64_t total_energy_mj() override { return inner_->total_energy_mj(); }
  MeasuredScope power_scope() override { return inner_->power_scope(); }
  MeasuredScope energy_scope() override { return inner_->energy_scope(); }
  int temperature_c() override { return inner_->temperature_c(); }

 protected:
  std::shared_ptr<Gpu> inner_;
};

}  // namespace zeus::device
