// Numbers read from the simulator's CSV inputs (trace files, job arrivals), each checked where it
// is read against the bounds of its column (src/sim/limits.hpp), so that an error names the file,
// the line, the column, what was read and the range.
#pragma once

#include <limits>
#include <string_view>

#include "common/csv.hpp"

namespace zeus::sim::detail {

// A numeric column: what it must be, and its bounds (src/sim/limits.hpp).
struct NumberColumn {
  std::string_view name;
  std::string_view what;  // "a positive whole number of watts"
  std::string_view unit;  // after the range: "W"
  double min;
  double max;
  bool above_min = false;  // min itself is out of range (a positive quantity: min 0)
};

// The min of a column that takes any finite number.
inline constexpr double kAnyFinite = -std::numeric_limits<double>::max();

// The field as a number within the column's bounds; anything else fails
// (csv.fail) naming the column, what was read and the range. A number too large for a double
// (1e309) is out of range, not "not a number".
double bounded_number(const csv::Reader& csv, int line, const NumberColumn& column,
                      std::string_view field);
// The same, for a whole number ("16" or "16.0"); the column's bounds must lie within int.
int bounded_whole(const csv::Reader& csv, int line, const NumberColumn& column,
                  std::string_view field);

}  // namespace zeus::sim::detail
