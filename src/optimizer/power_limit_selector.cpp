#include "zeus/optimizer/power_limit_selector.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

#include "zeus/common/error.hpp"
#include "zeus/optimizer/cost.hpp"

namespace zeus::optimizer {
namespace {

void check_not_empty(const std::vector<PowerLimitMeasurement>& measurements) {
  if (measurements.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "no power-limit measurement to choose from");
  }
}

// The earliest measurement with the lowest key.
int argmin(const std::vector<PowerLimitMeasurement>& measurements,
           const std::function<double(const PowerLimitMeasurement&)>& key) {
  check_not_empty(measurements);
  std::size_t best = 0;
  for (std::size_t i = 1; i < measurements.size(); ++i) {
    if (key(measurements[i]) < key(measurements[best])) {
      best = i;
    }
  }
  return measurements[best].power_limit_w;
}

}  // namespace

int EnergySelector::select(const std::vector<PowerLimitMeasurement>& measurements) const {
  return argmin(measurements, [](const auto& m) { return m.energy_j; });
}

int TimeSelector::select(const std::vector<PowerLimitMeasurement>& measurements) const {
  return argmin(measurements, [](const auto& m) { return m.time_s; });
}

ZeusCostSelector::ZeusCostSelector(double eta, int world_size)
    : eta_(eta), world_size_(world_size) {
  check_eta(eta);
  if (world_size < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                "world size must be at least 1 (got " + std::to_string(world_size) + ")");
  }
}

ZeusCostSelector ZeusCostSelector::with_max_power(double eta, double max_power_w) {
  if (!(max_power_w > 0.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "max power must be positive (got " + std::to_string(max_power_w) + " W)");
  }
  ZeusCostSelector selector(eta);
  selector.max_power_w_ = max_power_w;
  return selector;
}

int ZeusCostSelector::select(const std::vector<PowerLimitMeasurement>& measurements) const {
  check_not_empty(measurements);
  double max_power_w = max_power_w_;
  if (max_power_w == 0.0) {
    int max_limit_w = 0;
    for (const auto& m : measurements) {
      max_limit_w = std::max(max_limit_w, m.power_limit_w);
    }
    max_power_w = static_cast<double>(max_limit_w) * world_size_;
  }
  return argmin(measurements,
                [&](const auto& m) { return zeus_cost(m.energy_j, m.time_s, eta_, max_power_w); });
}

std::string ZeusCostSelector::describe() const {
  std::ostringstream text;
  text << "ZeusCost(eta=" << eta_ << ", world_size=" << world_size_ << ")";
  return text.str();
}

MaxSlowdownSelector::MaxSlowdownSelector(double factor) : factor_(factor) {
  if (!(factor >= 1.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "the slowdown factor must be at least 1 (got " + std::to_string(factor) + ")");
  }
}

int MaxSlowdownSelector::select(const std::vector<PowerLimitMeasurement>& measurements) const {
  check_not_empty(measurements);
  const auto reference = std::max_element(
      measurements.begin(), measurements.end(),
      [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; });
  const double limit_s = factor_ * reference->time_s;
  int chosen_w = reference->power_limit_w;
  for (const auto& m : measurements) {
    if (m.time_s <= limit_s && m.power_limit_w < chosen_w) {
      chosen_w = m.power_limit_w;
    }
  }
  return chosen_w;
}

std::string MaxSlowdownSelector::describe() const {
  std::ostringstream text;
  text << "MaxSlowdownConstraint(factor=" << factor_ << ")";
  return text.str();
}

}  // namespace zeus::optimizer
