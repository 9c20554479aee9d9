// A daemon GPU whose covered setters run the --gpu-command-overrides commands. Every write of
// the daemon, and every restore of its ledger, goes through the Gpu it was given, so wrapping
// the GPUs once makes both use the overrides.
#include <fmt/format.h>

#include "daemon/command_overrides.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/forwarding_gpu.hpp"

namespace zeus::daemon {
namespace {

class OverriddenGpu final : public device::ForwardingGpu {
 public:
  OverriddenGpu(std::shared_ptr<device::Gpu> inner, int gpu_id,
                std::shared_ptr<const CommandOverrides> overrides)
      : ForwardingGpu(std::move(inner)), gpu_id_(gpu_id), overrides_(std::move(overrides)) {}

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
