// A Gpu decorator for tests: forwards every call to another Gpu, after a hook that may throw.
// `fail_after(n)` makes every call after the first n throw (a GPU falling off the bus).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>

#include "zeus/common/error.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device {

class FaultInjectingGpu final : public Gpu {
 public:
  // Called with the method name ("total_energy_mj", ...) before each forwarded call.
  using Hook = std::function<void(std::string_view method)>;

  explicit FaultInjectingGpu(std::shared_ptr<Gpu> inner) : inner_(std::move(inner)) {}

  void set_hook(Hook hook) { hook_ = std::move(hook); }
  // Calls after the first `calls` throw Error(kind).
  void fail_after(long calls, ErrorKind kind = ErrorKind::kGpuLost) {
    fail_after_ = calls;
    fail_kind_ = kind;
  }
  long calls() const { return calls_.load(); }
  Gpu& inner() { return *inner_; }

  GpuBackend backend() const override { return inner_->backend(); }
  std::string name() override {
    return call("name", [&] { return inner_->name(); });
  }
  std::string uuid() override {
    return call("uuid", [&] { return inner_->uuid(); });
  }
  std::string pci_bus_id() override {
    return call("pci_bus_id", [&] { return inner_->pci_bus_id(); });
  }
  std::string architecture() override {
    return call("architecture", [&] { return inner_->architecture(); });
  }
  PowerLimitConstraints power_limit_constraints_mw() override {
    return call("power_limit_constraints_mw", [&] { return inner_->power_limit_constraints_mw(); });
  }
  std::uint32_t default_power_limit_mw() override {
    return call("default_power_limit_mw", [&] { return inner_->default_power_limit_mw(); });
  }
  std::uint32_t power_limit_mw() override {
    return call("power_limit_mw", [&] { return inner_->power_limit_mw(); });
  }
  std::uint32_t enforced_power_limit_mw() override {
    return call("enforced_power_limit_mw", [&] { return inner_->enforced_power_limit_mw(); });
  }
  void set_power_limit_mw(std::uint32_t value) override {
    call("set_power_limit_mw", [&] { inner_->set_power_limit_mw(value); });
  }
  void reset_power_limit() override {
    call("reset_power_limit", [&] { inner_->reset_power_limit(); });
  }
  bool persistence_mode() override {
    return call("persistence_mode", [&] { return inner_->persistence_mode(); });
  }
  void set_persistence_mode(bool enabled) override {
    call("set_persistence_mode", [&] { inner_->set_persistence_mode(enabled); });
  }
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    return call("supported_memory_clocks_mhz",
                [&] { return inner_->supported_memory_clocks_mhz(); });
  }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    return call("supported_graphics_clocks_mhz",
                [&] { return inner_->supported_graphics_clocks_mhz(memory_clock_mhz); });
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    call("set_gpu_locked_clocks_mhz", [&] { inner_->set_gpu_locked_clocks_mhz(min_mhz, max_mhz); });
  }
  void reset_gpu_locked_clocks() override {
    call("reset_gpu_locked_clocks", [&] { inner_->reset_gpu_locked_clocks(); });
  }
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    call("set_memory_locked_clocks_mhz",
         [&] { inner_->set_memory_locked_clocks_mhz(min_mhz, max_mhz); });
  }
  void reset_memory_locked_clocks() override {
    call("reset_memory_locked_clocks", [&] { inner_->reset_memory_locked_clocks(); });
  }
  void reset_locked_clocks() override {
    call("reset_locked_clocks", [&] { inner_->reset_locked_clocks(); });
  }
  std::uint32_t instant_power_mw() override {
    return call("instant_power_mw", [&] { return inner_->instant_power_mw(); });
  }
  std::uint32_t average_power_mw() override {
    return call("average_power_mw", [&] { return inner_->average_power_mw(); });
  }
  std::uint32_t average_memory_power_mw() override {
    return call("average_memory_power_mw", [&] { return inner_->average_memory_power_mw(); });
  }
  // A probe never throws, as the interface promises; it is not counted.
  bool supports_energy_counter() override { return inner_->supports_energy_counter(); }
  std::uint64_t total_energy_mj() override {
    return call("total_energy_mj", [&] { return inner_->total_energy_mj(); });
  }
  // Probes as well: never throw, not counted.
  MeasuredScope power_scope() override { return inner_->power_scope(); }
  MeasuredScope energy_scope() override { return inner_->energy_scope(); }
  int temperature_c() override {
    return call("temperature_c", [&] { return inner_->temperature_c(); });
  }

 private:
  template <typename Fn>
  auto call(std::string_view method, Fn fn) -> decltype(fn()) {
    const long count = ++calls_;
    if (fail_after_ >= 0 && count > fail_after_) {
      throw Error(
          fail_kind_,
          "injected fault: " + std::string(method) + " (call " + std::to_string(count) + ")",
          ErrorSubject::kGpu);
    }
    if (hook_) {
      hook_(method);
    }
    return fn();
  }

  std::shared_ptr<Gpu> inner_;
  Hook hook_;
  std::atomic<long> calls_{0};
  long fail_after_ = -1;
  ErrorKind fail_kind_ = ErrorKind::kGpuLost;
};

}  // namespace zeus::device
