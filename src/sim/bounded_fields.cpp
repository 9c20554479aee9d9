#include "bounded_fields.hpp"

#include <charconv>
#include <cmath>
#include <sstream>
#include <string>

namespace zeus::sim::detail {

namespace {

std::string number_text(double value) {
  if (std::floor(value) == value && std::fabs(value) <= 1e15) {
    return std::to_string(static_cast<long long>(value));
  }
  std::ostringstream text;
  text << value;
  return text.str();
}

std::string range_text(const NumberColumn& column) {
  if (column.min == kAnyFinite) {
    return "a finite number";
  }
  std::string range =
      column.above_min ? "above " + number_text(column.min) + ", at most " + number_text(column.max)
                       : number_text(column.min) + " to " + number_text(column.max);
  return column.unit.empty() ? range : range + " " + std::string(column.unit);
}

}  // namespace

double bounded_number(const csv::Reader& csv, int line, const NumberColumn& column,
                      std::string_view field) {
  double value = 0.0;
  const char* last = field.data() + field.size();
  const auto [end, ec] = std::from_chars(field.data(), last, value);
  const bool beyond_double = ec == std::errc::result_out_of_range;
  if (field.empty() || end != last || (ec != std::errc() && !beyond_double)) {
    csv.fail(line, "column '" + std::string(column.name) + "' must be " + std::string(column.what) +
                       " (read \"" + std::string(field) + "\")");
  }
  const bool below = column.above_min ? !(value > column.min) : !(value >= column.min);
  if (beyond_double || !std::isfinite(value) || below || !(value <= column.max)) {
    csv.fail(line, "column '" + std::string(column.name) + "' (read \"" + std::string(field) +
                       "\") is out of range (" + range_text(column) + "); fix or remove the row");
  }
  return value;
}

int bounded_whole(const csv::Reader& csv, int line, const NumberColumn& column,
                  std::string_view field) {
  const double value = bounded_number(csv, line, column, field);
  if (std::floor(value) != value) {
    csv.fail(line, "column '" + std::string(column.name) + "' must be " + std::string(column.what) +
                       " (read \"" + std::string(field) + "\")");
  }
  return static_cast<int>(value);  // within [min, max], which int holds
}

}  // namespace zeus::sim::detail
