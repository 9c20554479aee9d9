// Choosing a power limit from profiling measurements (the reference's OptimumSelector family).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace zeus::optimizer {

struct PowerLimitMeasurement {
  int power_limit_w = 0;
  double energy_j = 0.0;  // of the profiled iterations, summed over GPUs
  double time_s = 0.0;
};

class OptimumSelector {
 public:
  virtual ~OptimumSelector() = default;
  // Picks a power limit among `measurements` (in profiling order, highest power limit first). Ties
  // go to the earliest measurement. Throws zeus::Error(kInvalidArgument) when empty.
  virtual int select(const std::vector<PowerLimitMeasurement>& measurements) const = 0;
  virtual std::string describe() const = 0;
};

// The lowest energy.
class EnergySelector final : public OptimumSelector {
 public:
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override;
  std::string describe() const override { return "Energy"; }
};

// The shortest time.
class TimeSelector final : public OptimumSelector {
 public:
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override;
  std::string describe() const override { return "Time"; }
};

// The lowest eta*E + (1-eta)*max_power*T, with max_power = the largest measured power limit times
// `world_size` (the number of GPUs whose energies were summed).
class ZeusCostSelector final : public OptimumSelector {
 public:
  // Throws kInvalidArgument unless 0 <= eta <= 1 and world_size >= 1.
  ZeusCostSelector(double eta, int world_size = 1);
  // The same cost with a given max_power (e.g. the simulator's: the GPU's largest power limit,
  // which a trace may hold for other batch sizes only). Throws unless max_power_w > 0.
  static ZeusCostSelector with_max_power(double eta, double max_power_w);
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override;
  std::string describe() const override;

 private:
  double eta_;
  int world_size_;
  double max_power_w_ = 0.0;  // 0: the largest measured power limit times world_size
};

// The lowest power limit whose time is within `factor` of the time at the highest power limit.
class MaxSlowdownSelector final : public OptimumSelector {
 public:
  // Throws kInvalidArgument unless factor >= 1.
  explicit MaxSlowdownSelector(double factor);
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override;
  std::string describe() const override;

 private:
  double factor_;
};

}  // namespace zeus::optimizer
