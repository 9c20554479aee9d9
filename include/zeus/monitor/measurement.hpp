// What a measurement window returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

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

struct Measurement {
  double time_s = 0.0;          // elapsed time from a monotonic clock
  EnergyByIndex gpu_energy_j;   // per monitored GPU
  EnergyByIndex cpu_energy_j;   // per monitored CPU package (empty when none)
  EnergyByIndex dram_energy_j;  // per package that has a DRAM zone (empty when none)

  // GPU energy only, as the reference's `total_energy`.
  double total_energy_j() const { return gpu_energy_j.sum(); }
};

}  // namespace zeus::monitor
