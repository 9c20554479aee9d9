#include "monitor/window_log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <optional>

#include "common/csv.hpp"
#include "zeus/common/error.hpp"

namespace zeus::monitor::window_log {
namespace {

constexpr std::string_view kFixedColumns = "start_time,window_name,elapsed_time";

// A finite, non-negative number written as a decimal (no blanks, no "inf" or "nan": a log
// ZeusMonitor wrote has none, and an infinite energy would poison every sum).
std::optional<double> parse_double(std::string_view text) {
  const std::optional<double> value = csv::to_double(text);
  if (!value || !std::isfinite(*value) || *value < 0.0) {
    return std::nullopt;
  }
  return value;
}

// The GPU index of a gpu<index>_energy column; nullopt for another name.
std::optional<int> gpu_of_column(std::string_view column) {
  if (!(column.size() > 10 && column.starts_with("gpu") && column.ends_with("_energy"))) {
    return std::nullopt;
  }
  int index = -1;
  const char* first = column.data() + 3;
  const char* last = column.data() + column.size() - 7;
  if (std::from_chars(first, last, index).ptr != last || index < 0) {
    return std::nullopt;
  }
  return index;
}

}  // namespace

std::string header_line(const std::vector<int>& gpu_indices) {
  std::string line(kFixedColumns);
  for (const int index : gpu_indices) {
    fmt::format_to(std::back_inserter(line), ",gpu{}_energy", index);
  }
  line += '\n';
  return line;
}

std::string row_line(double start_time_s, std::string_view window_name, double elapsed_time_s,
                     const std::vector<int>& gpu_indices, const EnergyByIndex& gpu_energy_j) {
  std::string line = fmt::format("{},{},{}", start_time_s, window_name, elapsed_time_s);
  for (const int index : gpu_indices) {
    fmt::format_to(std::back_inserter(line), ",{}", gpu_energy_j.at(index));
  }
  line += '\n';
  return line;
}

void check_window_name(const std::string& name) {
  if (!csv::field_fits(name)) {
    throw Error(ErrorKind::kInvalidArgument,
                "window name '" + name +
                    "' contains a comma or line break, which the CSV log "
                    "cannot hold");
  }
}

bool recognises(const std::vector<std::string>& header) {
  return std::find(header.begin(), header.end(), "start_time") != header.end() ||
         std::find(header.begin(), header.end(), "window_name") != header.end();
}

Log read(const std::filesystem::path& path) {
  csv::LineReader lines(path, "monitor log", csv::kVerbatim);
  std::vector<std::string_view> fields;
  if (!lines.next(fields)) {
    throw Error(ErrorKind::kInvalidArgument,
                path.string() +
                    " is empty: expected the header "
                    "start_time,window_name,elapsed_time,gpu<i>_energy...");
  }
  if (fields.size() < 3 || fields[0] != "start_time" || fields[1] != "window_name" ||
      fields[2] != "elapsed_time") {
    lines.fail(lines.line(), fmt::format("the header must start with {} (read \"{}\")",
                                         kFixedColumns, fmt::join(fields, ",")));
  }
  Log log;
  const std::vector<std::string> header(fields.begin(), fields.end());
  for (std::size_t i = 3; i < header.size(); ++i) {
    const std::string& column = header[i];
    const std::optional<int> index = gpu_of_column(column);
    if (!index) {
      lines.fail(lines.line(), "column \"" + column + "\" is not of the form gpu<index>_energy");
    }
    const auto seen = std::find(log.gpu_indices.begin(), log.gpu_indices.end(), *index);
    if (seen != log.gpu_indices.end()) {
      lines.fail(lines.line(), "column \"" + column + "\" names GPU " + std::to_string(*index) +
                                   " again (also column " +
                                   std::to_string(4 + (seen - log.gpu_indices.begin())) +
                                   "); keep one of them");
    }
    log.gpu_indices.push_back(*index);
  }
  while (lines.next(fields)) {
    if (fields.size() != header.size()) {
      lines.fail(lines.line(), "expected " + std::to_string(header.size()) + " fields, found " +
                                   std::to_string(fields.size()));
    }
    ReplayRow row;
    row.window_name = fields[1];
    const auto start = parse_double(fields[0]);
    const auto elapsed = parse_double(fields[2]);
    if (!start || !elapsed) {
      lines.fail(lines.line(), "start_time and elapsed_time must be finite, non-negative numbers");
    }
    if (*start >= csv::kMaxUnixTimeS) {
      lines.fail(lines.line(), "start_time " + std::string(fields[0]) +
                                   " is not a Unix time in seconds (0 to 1e11, about the year "
                                   "5138)");
    }
    row.start_time_s = *start;
    row.elapsed_time_s = *elapsed;
    for (std::size_t i = 3; i < fields.size(); ++i) {
      const auto energy = parse_double(fields[i]);
      if (!energy) {
        lines.fail(lines.line(), header[i] + " is not a finite, non-negative number (\"" +
                                     std::string(fields[i]) + "\")");
      }
      row.gpu_energy_j.push_back(*energy);
    }
    log.rows.push_back(std::move(row));
  }
  return log;
}

}  // namespace zeus::monitor::window_log
