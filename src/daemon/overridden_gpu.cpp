// A daemon GPU whose covered setters run the --gpu-command-overrides commands. Every write of
// the daemon, and every restore of its ledger, goes through the Gpu it was given, so wrapping
// the GPUs once makes both use the overrides.
#include <fmt/format.h>

#include "daemon/command_overrides.hpp"
#include "zeus/common/units.hpp"

namespace zeus::daemon {
namespace {

class OverriddenGpu final : public device::Gpu {
 public:
  OverriddenGpu(std::shared_ptr<device::Gpu> inner, int gpu_id,
                std::shared_ptr<const CommandOverrides> overrides)
      : inner_(std::move(inner)), gpu_id_(gpu_id), overrides_(std::move(overrides)) {}

  device::GpuBackend backend() const override { return inner_->backend(); }
  std::string name() override { return inner_->name(); }
  std::string uuid() override { return inner_->uuid(); }
  std::string pci_bus_id() override { return inner_->pci_bus_id(); }
  std::string architecture() override { return inner_->architecture(); }
  device::PowerLimitConstraints power_limit_constraints_mw() override {
    return inner_->power_limit_constraints_mw();
  }
  std::uint32_t default_power_limit_mw() override { return inner_->default_power_limit_mw(); }
  std::uint32_t power_limit_mw() override { return inner_->power_limit_mw(); }
  std::uint32_t enforced_power_limit_mw() override { return inner_->enforced_power_limit_mw(); }
  bool persistence_mode() override { return inner_->persistence_mode(); }
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    return inner_->supported_memory_clocks_mhz();
  }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    return inner_->supported_graphics_clocks_mhz(memory_clock_mhz);
  }
  std::uint32_t instant_power_mw() override { return inner_->instant_power_mw(); }
  std::uint32_t average_power_mw() override { return inner_->average_power_mw(); }
  std::uint32_t average_memory_power_mw() override { return inner_->average_memory_power_mw(); }
  bool supports_energy_counter() override { return inner_->supports_energy_counter(); }
  std::uint64_t total_energy_mj() override { return inner_->total_energy_mj(); }
  int temperature_c() override { return inner_->temperature_c(); }

  void set_power_limit_mw(std::uint32_t power_limit_mw) override {
    if (!run(GpuOperation::kSetPowerLimit,
             {{"power_limit_mw", std::to_string(power_limit_mw)},
              {"power_limit_w",
               std::to_string(units::whole_watts_from_milliwatts(power_limit_mw))}})) {
      inner_->set_power_limit_mw(power_limit_mw);
    }
  }
  // The default limit, through the set_power_limit override when there is one.
  void reset_power_limit() override {
    if (overrides_->covers(GpuOperation::kSetPowerLimit)) {
      set_power_limit_mw(inner_->default_power_limit_mw());
      return;
    }
    inner_->reset_power_limit();
  }
  void set_persistence_mode(bool enabled) override {
    if (!run(GpuOperation::kSetPersistenceMode, {{"enabled", enabled ? "1" : "0"}})) {
      inner_->set_persistence_mode(enabled);
    }
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    if (!run(GpuOperation::kSetGpuLockedClocks, clocks(min_mhz, max_mhz))) {
      inner_->set_gpu_locked_clocks_mhz(min_mhz, max_mhz);
    }
  }
  void reset_gpu_locked_clocks() override {
    if (!run(GpuOperation::kResetGpuLockedClocks, {})) {
      inner_->reset_gpu_locked_clocks();
    }
  }
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    if (!run(GpuOperation::kSetMemLockedClocks, clocks(min_mhz, max_mhz))) {
      inner_->set_memory_locked_clocks_mhz(min_mhz, max_mhz);
    }
  }
  void reset_memory_locked_clocks() override {
    if (!run(GpuOperation::kResetMemLockedClocks, {})) {
      inner_->reset_memory_locked_clocks();
    }
  }
  // Its own override when there is one; otherwise each domain's reset (overridden or not).
  void reset_locked_clocks() override {
    if (run(GpuOperation::kResetLockedClocks, {})) {
      return;
    }
    if (overrides_->covers(GpuOperation::kResetGpuLockedClocks) ||
        overrides_->covers(GpuOperation::kResetMemLockedClocks)) {
      reset_gpu_locked_clocks();
      reset_memory_locked_clocks();
      return;
    }
    inner_->reset_locked_clocks();
  }

 private:
  static PlaceholderValues clocks(std::uint32_t min_mhz, std::uint32_t max_mhz) {
    return {{"min_clock_mhz", std::to_string(min_mhz)}, {"max_clock_mhz", std::to_string(max_mhz)}};
  }

  // Runs the override of `operation` when there is one (true), else false.
  bool run(GpuOperation operation, PlaceholderValues values) {
    if (!overrides_->covers(operation)) {
      return false;
    }
    values["gpu_id"] = std::to_string(gpu_id_);
    overrides_->run(operation, values);
    return true;
  }

  std::shared_ptr<device::Gpu> inner_;
  int gpu_id_;
  std::shared_ptr<const CommandOverrides> overrides_;
};

}  // namespace

std::shared_ptr<device::Gpu> with_command_overrides(
    std::shared_ptr<device::Gpu> gpu, int gpu_id,
    std::shared_ptr<const CommandOverrides> overrides) {
  return std::make_shared<OverriddenGpu>(std::move(gpu), gpu_id, std::move(overrides));
}

device::Gpus with_command_overrides(const device::Gpus& gpus,
                                    const std::shared_ptr<const CommandOverrides>& overrides) {
  std::vector<std::shared_ptr<device::Gpu>> wrapped;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const int index = static_cast<int>(i);
    wrapped.push_back(with_command_overrides(gpus.shared(index), index, overrides));
  }
  return device::Gpus(std::move(wrapped), gpus.physical_indices());
}

}  // namespace zeus::daemon
