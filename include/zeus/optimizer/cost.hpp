// The Zeus cost: eta * energy + (1 - eta) * max_power * time.
#pragma once

namespace zeus::optimizer {

// `max_power_w` is the GPU's maximum power limit times the number of GPUs.
inline double zeus_cost(double energy_j, double time_s, double eta, double max_power_w) {
  return eta * energy_j + (1.0 - eta) * max_power_w * time_s;
}

// The cost of one epoch at average power `average_power_w` lasting `epoch_time_s`.
inline double epoch_cost(double average_power_w, double epoch_time_s, double eta,
                         double max_power_w) {
  return (eta * average_power_w + (1.0 - eta) * max_power_w) * epoch_time_s;
}

// Throws zeus::Error(kInvalidArgument) unless 0 <= eta <= 1.
void check_eta(double eta);

}  // namespace zeus::optimizer
