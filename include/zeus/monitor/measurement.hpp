// What a measurement window returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zeus/device/gpu.hpp"
#include "zeus/device/jetson.hpp"

namespace zeus::monitor {

// Values keyed by device index (GPU index as the process sees it, or CPU package index), kept
// sorted by index. A small flat map: cheap to build on the hot path, easy to iterate.
class EnergyByIndex {
 public:
  using value_type = std::pair<int, double>;

  void set(int index, double value);
  // Throws Error(kNotFound) naming the index when absent.
  double at(int index) const;
  bool contains(int index) const;
  double sum() const;
  std::size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  void clear() { values_.clear(); }
  void reserve(std::size_t count) { values_.reserve(count); }
  auto begin() const { return values_.begin(); }
  auto end() const { return values_.end(); }
  bool operator==(const EnergyByIndex& other) const = default;

 private:
  std::vector<value_type> values_;
};

// How far one GPU's window energy can be from the energy it drew: |error| <= fixed_j +
// per_second_j x the window's length (monitor/measurement_error.hpp derives it from the GPU's
// sensor; docs/monitor.md, "Error bounds").
struct GpuErrorBound {
  double fixed_j = 0.0;
  double per_second_j = 0.0;
  double at(double time_s) const { return fixed_j + per_second_j * time_s; }
};
// Per GPU index, sorted by index.
using GpuErrorBounds = std::vector<std::pair<int, GpuErrorBound>>;
// What each GPU's energy covers (Gpu::energy_scope()), per GPU index, sorted by index.
using GpuEnergyScopes = std::vector<std::pair<int, device::MeasuredScope>>;

// One SoC power rail's energy over a window (zeus/monitor/soc_sampler.hpp).
struct RailEnergy {
  std::string name;  // as the board labels it, e.g. "VDD_GPU_SOC"
  device::RailKind kind = device::RailKind::kOther;
  double energy_j = 0.0;
  bool operator==(const RailEnergy& other) const = default;
};

// A window's SoC energy: every rail by its own name, in the SoC's rail order.
struct SocEnergy {
  std::vector<RailEnergy> rails;
  // Rail reads that failed within the window (a file gone, a value that is no number): each
  // held the rail's last power over its period.
  std::uint64_t skipped_reads = 0;
  // The sum over the rails of `kind`; nullopt when the SoC has none.
  std::optional<double> energy_j(device::RailKind kind) const;
  bool operator==(const SocEnergy& other) const = default;
};

struct Measurement {
  double time_s = 0.0;          // elapsed time from a monotonic clock
  EnergyByIndex gpu_energy_j;   // per monitored GPU
  EnergyByIndex cpu_energy_j;   // per monitored CPU package (empty when none)
  EnergyByIndex dram_energy_j;  // per package that has a DRAM zone (empty when none)
  // The error bounds of the monitor that measured it (shared with it: a window allocates nothing
  // for them); null for a measurement made otherwise (by hand, replayed from a log, cancelled).
  std::shared_ptr<const GpuErrorBounds> gpu_error_bounds;
  // The energy scopes of the monitor that measured it, shared alike; null when made otherwise.
  std::shared_ptr<const GpuEnergyScopes> gpu_energy_scopes;
  // The SoC's rails (a Jetson), when the monitor measures a SoC; nullopt otherwise.
  std::optional<SocEnergy> soc_energy;

  // GPU energy only, as the reference's `total_energy`.
  double total_energy_j() const { return gpu_energy_j.sum(); }
  // The bound on each GPU energy's error (J) at this window's length; empty when unknown.
  EnergyByIndex gpu_energy_error_j() const;
  // GPU `index`'s energy scope; kUnknown when not known.
  device::MeasuredScope gpu_energy_scope(int index) const;
  // Whether a measured GPU's energy is module energy (GPU + CPU + memory of a Grace superchip):
  // then the CPU and DRAM figures of the same window are already part of it, and adding them
  // counts them twice (docs/devices.md, "Grace Hopper and Grace Blackwell: module scope").
  bool gpu_energy_includes_cpu() const;
};

}  // namespace zeus::monitor
