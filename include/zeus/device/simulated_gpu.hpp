// A deterministic model of a GPU, implementing the Gpu interface without hardware.
//
// Power draw depends on utilization (set by the caller, 0..1) and the power limit:
//   demand_mw = idle_mw + utilization * (peak_mw - idle_mw)
//   draw_mw   = min(demand_mw, power_limit_mw)      (never below idle_mw)
// Energy is the exact integral of draw over the injected clock's time (the draw is piecewise
// constant between calls that change utilization or the limit). Throughput under a limit follows
// the cube-root DVFS law: relative_speed = ((draw - idle) / (demand - idle))^(1/3).
//
// Load profiles (set_load_profile): the utilization may follow a function of time on the clock
// (a square wave, bursts; zeus/device/load_profile.hpp) that changes faster than any sensor
// window; the energy stays an exact integral. energy_at_mj() answers for past instants, so that
// the sensor-faithful wrapper (zeus/device/sensor_gpu.hpp) computes what a real sensor would
// have read from the truth.
//
// Opt-in thermal model (SimulatedGpuModel::thermal_enabled, or
// ZEUS_SIMULATED_GPUS="2:h200:thermal"): the die temperature follows power with a first-order lag,
//   tau * dT/dt = ambient + R * draw - T,
// and leakage power grows linearly with the temperature above ambient,
//   leak_mw = idle_mw * leakage_per_c * (T - ambient),
// which is added to the demand (and counts against the power limit). Temperature and energy are
// integrated on the injected clock. Off (the default), temperature_c() is the instantaneous
// 30 + 55 * draw / peak and there is no leakage term.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"
#include "zeus/device/load_profile.hpp"

namespace zeus::device {

// Thermal constants of one board (device/gpu_models.cpp says where each comes from).
struct SimulatedThermalModel {
  double ambient_c = 30.0;                  // inlet air / idle die temperature
  double thermal_resistance_c_per_w = 0.0;  // steady-state rise per watt drawn
  double time_constant_s = 30.0;            // first-order response of die + heatsink
  double leakage_per_c = 0.0;  // extra power per degree above ambient, as a fraction of idle
};

struct SimulatedGpuModel {
  std::string key;           // "h200"
  std::string name;          // "NVIDIA H200"
  std::string architecture;  // "hopper"
  std::uint32_t min_power_limit_mw;
  std::uint32_t max_power_limit_mw;
  std::uint32_t default_power_limit_mw;
  std::uint32_t idle_power_mw;
  std::uint32_t peak_power_mw;  // full-load draw without a power limit
  std::uint32_t memory_power_mw;
  std::vector<std::uint32_t> memory_clocks_mhz;  // descending
  std::uint32_t max_graphics_clock_mhz;
  std::uint32_t min_graphics_clock_mhz;
  bool energy_counter;  // false models a pre-Volta GPU
  SimulatedThermalModel thermal{};
  bool thermal_enabled = false;  // opt-in: the default keeps the instantaneous temperature
  // Opt-in: providers wrap each GPU in a SensorGpu with published_sensor_parameters(name).
  bool sensor_faithful = false;
  // What its power and energy figures are labelled as covering (the draw is the same model):
  // kModule stands in for a Grace superchip's GPU (ZEUS_SIMULATED_GPUS="1:h200:module").
  MeasuredScope scope = MeasuredScope::kGpu;
};

// Built-in models: v100, a40, a100, h100, h200 (and p100 without an energy counter).
const std::vector<SimulatedGpuModel>& simulated_gpu_models();
// Throws Error(kInvalidArgument) listing the known keys.
const SimulatedGpuModel& simulated_gpu_model(std::string_view key);

class SimulatedGpu final : public Gpu {
 public:
  SimulatedGpu(SimulatedGpuModel model, int physical_index, std::shared_ptr<Clock> clock);

  // Simulation controls.
  void set_utilization(double utilization);  // clamped to [0, 1]; a constant load profile
  // Utilization as a function of time from now on (replaces set_utilization's constant).
  void set_load_profile(LoadProfile profile);
  double utilization() const;  // now
  // Exact modelled energy in millijoules at `t_ns` (a past instant or now): exact for instants
  // since retain_history_from_ns() (or in the last second), else at the oldest one kept.
  double energy_at_mj(std::int64_t t_ns) const;
  // energy_at_mj(to_ns) - energy_at_mj(from_ns), computed without the cancellation of two large
  // sums where it can be (the sensor's windows of a long run).
  double energy_between_mj(std::int64_t from_ns, std::int64_t to_ns) const;
  // The modelled draw at `t_ns` (a past instant or now), in milliwatts.
  double draw_at_mw(std::int64_t t_ns) const;
  // Keeps what energy_at_mj() needs for instants from `t_ns` on (memory: one entry per control
  // change, or per thermal step, since then). Only ever moves forward.
  void retain_history_from_ns(std::int64_t t_ns);
  const std::shared_ptr<Clock>& clock() const { return clock_; }
  // Throughput relative to the same utilization without a power limit, in (0, 1].
  double relative_speed() const;
  // Exact modelled energy in joules (the counter reports it truncated to mJ).
  double exact_energy_j() const;
  // Exact modelled die temperature (thermal model) or the instantaneous one, in degrees C.
  double exact_temperature_c() const;
  const SimulatedGpuModel& model() const { return model_; }
  // The clocks the simulated driver locked (a requested range snapped to supported clocks, as
  // NVML does); nullopt when not locked.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> locked_graphics_clocks_mhz() const;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> locked_memory_clocks_mhz() const;

  GpuBackend backend() const override { return GpuBackend::kSimulated; }
  std::string name() override { return model_.name; }
  std::string uuid() override { return uuid_; }
  std::string pci_bus_id() override { return pci_bus_id_; }
  std::string architecture() override { return model_.architecture; }
  PowerLimitConstraints power_limit_constraints_mw() override;
  std::uint32_t default_power_limit_mw() override { return model_.default_power_limit_mw; }
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
  std::uint32_t instant_power_mw() override;
  std::uint32_t average_power_mw() override;
  std::uint32_t average_memory_power_mw() override;
  bool supports_energy_counter() override { return model_.energy_counter; }
  std::uint64_t total_energy_mj() override;
  MeasuredScope power_scope() override { return model_.scope; }
  MeasuredScope energy_scope() override { return model_.scope; }
  int temperature_c() override;

 private:
  // A span of constant settings from `start_ns`: the load profile and the draw at its two levels.
  // Under the thermal model the draw changes continuously: one point per step, interpolated.
  struct Segment {
    std::int64_t start_ns;
    double energy_mj;  // at start_ns
    double high_mw;
    double low_mw;
    std::shared_ptr<const LoadProfile> profile;
  };
  // Integrates energy up to now; must hold mutex_.
  void advance_locked() const;
  // After a control change at now (advance_locked first): a new segment with the new settings.
  void begin_segment_locked();
  void trim_history_locked() const;
  double segment_energy_mj(const Segment& segment, std::int64_t to_ns) const;
  double levels_energy_mj(const Segment& segment, std::int64_t from_ns, std::int64_t to_ns) const;
  const Segment& segment_at_locked(std::int64_t t_ns) const;
  double energy_at_locked(std::int64_t t_ns) const;  // after advance_locked
  double draw_at_locked(std::int64_t t_ns) const;
  double utilization_locked() const;  // at last_update_ns_
  double draw_mw_locked(double utilization) const;
  double demand_mw_locked(double utilization) const;  // without leakage, before the power limit
  double leakage_mw_locked() const;
  // Advances heat_c_ and energy_mj_ by `dt_s` at `utilization` under the thermal model.
  void advance_thermal_locked(double dt_s, double utilization) const;

  const SimulatedGpuModel model_;
  const std::shared_ptr<Clock> clock_;
  const std::string uuid_;
  const std::string pci_bus_id_;

  mutable std::mutex mutex_;
  mutable std::int64_t last_update_ns_;
  mutable double energy_mj_ = 0.0;
  mutable double heat_c_ = 0.0;  // thermal model: temperature above ambient
  std::shared_ptr<const LoadProfile> profile_;
  std::uint32_t power_limit_mw_;
  bool persistence_mode_ = false;
  std::uint32_t locked_min_graphics_mhz_ = 0;  // 0 = not locked
  std::uint32_t locked_max_graphics_mhz_ = 0;
  std::optional<std::pair<std::uint32_t, std::uint32_t>> locked_memory_mhz_;
  std::int64_t retain_from_ns_;
  // Segments of the last second (average_power_mw) or since retain_from_ns_, oldest first; the
  // last is the current one. Mutable: the thermal model adds points while it integrates.
  mutable std::deque<Segment> history_;
};

// A provider of `count` simulated GPUs of one model; with model.sensor_faithful, each is a
// SensorGpu over a SimulatedGpu (Error(kInvalidArgument) for a model without sensor parameters).
std::shared_ptr<GpuProvider> make_simulated_provider(int count, const SimulatedGpuModel& model,
                                                     std::shared_ptr<Clock> clock);

struct SimulatedGpusSpec {
  int count = 0;
  std::string model_key = "a100";
  bool thermal = false;  // ":thermal" option: the opt-in thermal model
  bool sensor = false;   // ":sensor" option: the sensor-faithful readings (sensor_gpu.hpp)
  bool module = false;   // ":module" option: figures labelled module scope, as a Grace superchip's
  // The catalogue model with the spec's options applied.
  SimulatedGpuModel model() const;
};
// Parses ZEUS_SIMULATED_GPUS ("<count>[:<model>[:<option>...]]", options "thermal", "sensor" and
// "module", e.g. "4:h200", "2:h200:thermal" or "2:h200:sensor:thermal"). ":sensor" needs a model
// with published sensor parameters (not p100).
// Throws Error(kInvalidArgument) quoting the value when malformed.
SimulatedGpusSpec parse_simulated_gpus_spec(const std::string& value);

}  // namespace zeus::device
