// Apportioning a window's energy to the stretches of a time-varying rate (carbon intensity,
// electricity price): shared by the carbon and the cost monitors.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/monitor/measurement.hpp"

namespace zeus::monitor {

// A rate (gCO2eq/kWh, price per kWh) the monitors can multiply energy by: finite and not negative.
inline bool valid_rate(double rate_per_kwh) {
  return std::isfinite(rate_per_kwh) && rate_per_kwh >= 0.0;
}

// Every provider's *_over(start, end) takes the same interval; `what` names the rate in the
// message ("carbon intensity", "electricity price").
inline void check_rate_interval(std::string_view what, double start_unix_s, double end_unix_s) {
  if (!std::isfinite(start_unix_s) || !std::isfinite(end_unix_s) || end_unix_s < start_unix_s) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: bad interval [{}, {}] (end before start)", what, start_unix_s,
                            end_unix_s));
  }
}

// The time-weighted mean of `value` over pieces that tile an interval in time order (each with
// start_unix_s and end_unix_s). Energy is taken as spread over the window in proportion to time,
// so this mean times the energy is the window's total. A zero-length interval takes the first
// piece's value; no pieces give 0.
template <typename Piece, typename Value>
double time_weighted_mean(const std::vector<Piece>& pieces, Value Piece::*value) {
  if (pieces.empty()) {
    return 0.0;
  }
  const double total_s = pieces.back().end_unix_s - pieces.front().start_unix_s;
  if (total_s <= 0.0) {
    return pieces.front().*value;
  }
  double mean = 0.0;
  for (const Piece& piece : pieces) {
    mean += piece.*value * (piece.end_unix_s - piece.start_unix_s) / total_s;
  }
  return mean;
}

// One device family's part of a carbon or cost measurement: `energy_j` copied to `energy_out_j`,
// and per device its energy in kWh times `rate_per_kwh` (gCO2eq or currency) in `product_out`.
inline void energy_at_rate(const EnergyByIndex& energy_j, double rate_per_kwh,
                           EnergyByIndex& energy_out_j, EnergyByIndex& product_out) {
  for (const auto& [index, joules] : energy_j) {
    energy_out_j.set(index, joules);
    product_out.set(index, units::kilowatt_hours_from_joules(joules) * rate_per_kwh);
  }
}

}  // namespace zeus::monitor
