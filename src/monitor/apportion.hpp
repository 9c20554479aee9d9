// Apportioning a window's energy to the stretches of a time-varying rate (carbon intensity,
// electricity price): shared by the carbon and the cost monitors.
#pragma once

#include <vector>

namespace zeus::monitor {

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

}  // namespace zeus::monitor
