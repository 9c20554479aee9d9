#include "zeus/monitor/measurement.hpp"

#include <algorithm>
#include <string>

#include "zeus/common/error.hpp"

namespace zeus::monitor {

void EnergyByIndex::set(int index, double value) {
  const auto position =
      std::lower_bound(values_.begin(), values_.end(), index,
                       [](const value_type& entry, int wanted) { return entry.first < wanted; });
  if (position != values_.end() && position->first == index) {
    position->second = value;
  } else {
    values_.insert(position, {index, value});
  }
}

double EnergyByIndex::at(int index) const {
  for (const auto& [key, value] : values_) {
    if (key == index) {
      return value;
    }
  }
  throw Error(ErrorKind::kNotFound, "no energy for device index " + std::to_string(index));
}

bool EnergyByIndex::contains(int index) const {
  return std::any_of(values_.begin(), values_.end(),
                     [index](const value_type& entry) { return entry.first == index; });
}

double EnergyByIndex::sum() const {
  double total = 0.0;
  for (const auto& entry : values_) {
    total += entry.second;
  }
  return total;
}

EnergyByIndex Measurement::gpu_energy_error_j() const {
  EnergyByIndex errors;
  if (gpu_error_bounds != nullptr) {
    errors.reserve(gpu_error_bounds->size());
    for (const auto& [index, bound] : *gpu_error_bounds) {
      errors.set(index, bound.at(time_s));
    }
  }
  return errors;
}

device::MeasuredScope Measurement::gpu_energy_scope(int index) const {
  if (gpu_energy_scopes != nullptr) {
    for (const auto& [key, scope] : *gpu_energy_scopes) {
      if (key == index) {
        return scope;
      }
    }
  }
  return device::MeasuredScope::kUnknown;
}

bool Measurement::gpu_energy_includes_cpu() const {
  return std::any_of(gpu_energy_j.begin(), gpu_energy_j.end(), [this](const auto& entry) {
    return gpu_energy_scope(entry.first) == device::MeasuredScope::kModule;
  });
}

std::optional<double> SocEnergy::energy_j(device::RailKind kind) const {
  std::optional<double> sum;
  for (const RailEnergy& rail : rails) {
    if (rail.kind == kind) {
      sum = sum.value_or(0.0) + rail.energy_j;
    }
  }
  return sum;
}

}  // namespace zeus::monitor
