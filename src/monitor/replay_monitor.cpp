#include "zeus/monitor/replay_monitor.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "common/csv.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::monitor {
namespace {

// Fields exactly as written (nothing trimmed), empty ones kept.
std::vector<std::string> split_csv_line(const std::string& line) {
  return text::split_to_strings(line, ',', false, "");
}

// A finite, non-negative number written as a decimal (no blanks, no "inf" or "nan": a log
// ZeusMonitor wrote has none, and an infinite energy would poison every sum).
std::optional<double> parse_double(const std::string& text) {
  const std::optional<double> value = csv::to_double(text);
  if (!value || !std::isfinite(*value) || *value < 0.0) {
    return std::nullopt;
  }
  return value;
}

// A start_time beyond this is no date (a corrupted row): no later tool can print it.
constexpr double kMaxUnixTimeS = 1e11;

}  // namespace

ReplayMonitor::ReplayMonitor(const std::filesystem::path& log_file, bool match_window_name)
    : path_(log_file), match_window_name_(match_window_name) {
  const std::string content = text::read_file(log_file, "monitor log");
  std::vector<std::string_view> lines = text::split(text::without_utf8_bom(content), '\n');
  if (lines.back().empty()) {
    lines.pop_back();  // the newline that ends the last line starts no line
  }
  const std::string where = log_file.string() + ":";
  std::size_t next_line = 0;
  // The next line without its carriage return; false at the end.
  const auto read_line = [&](std::string& line) {
    if (next_line == lines.size()) {
      return false;
    }
    line = std::string(text::trim(lines[next_line++], "\r"));
    return true;
  };
  std::string line;
  int line_number = 0;
  bool have_header = false;
  while (!have_header && read_line(line)) {  // blank lines before the header are skipped
    ++line_number;
    have_header = !line.empty();
  }
  if (!have_header) {
    throw Error(ErrorKind::kInvalidArgument,
                log_file.string() +
                    " is empty: expected the header "
                    "start_time,window_name,elapsed_time,gpu<i>_energy...");
  }
  const std::vector<std::string> header = split_csv_line(line);
  if (header.size() < 3 || header[0] != "start_time" || header[1] != "window_name" ||
      header[2] != "elapsed_time") {
    throw Error(ErrorKind::kInvalidArgument,
                where + std::to_string(line_number) +
                    ": the header must start with start_time,window_name,elapsed_time (read \"" +
                    line + "\")");
  }
  for (std::size_t i = 3; i < header.size(); ++i) {
    const std::string& column = header[i];
    int index = -1;
    bool valid = column.size() > 10 && column.starts_with("gpu") && column.ends_with("_energy");
    if (valid) {
      const char* first = column.data() + 3;
      const char* last = column.data() + column.size() - 7;
      valid = std::from_chars(first, last, index).ptr == last && index >= 0;
    }
    if (!valid) {
      throw Error(ErrorKind::kInvalidArgument, where + std::to_string(line_number) + ": column \"" +
                                                   column +
                                                   "\" is not of the form gpu<index>_energy");
    }
    const auto seen = std::find(gpu_indices_.begin(), gpu_indices_.end(), index);
    if (seen != gpu_indices_.end()) {
      throw Error(ErrorKind::kInvalidArgument,
                  where + std::to_string(line_number) + ": column \"" + column + "\" names GPU " +
                      std::to_string(index) + " again (also column " +
                      std::to_string(4 + (seen - gpu_indices_.begin())) + "); keep one of them");
    }
    gpu_indices_.push_back(index);
  }
  while (read_line(line)) {
    ++line_number;
    if (line.empty()) {
      continue;
    }
    const std::vector<std::string> fields = split_csv_line(line);
    const std::string at = where + std::to_string(line_number) + ": ";
    if (fields.size() != header.size()) {
      throw Error(ErrorKind::kInvalidArgument, at + "expected " + std::to_string(header.size()) +
                                                   " fields, found " +
                                                   std::to_string(fields.size()));
    }
    ReplayRow row;
    row.window_name = fields[1];
    const auto start = parse_double(fields[0]);
    const auto elapsed = parse_double(fields[2]);
    if (!start || !elapsed) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "start_time and elapsed_time must be finite, non-negative numbers");
    }
    if (*start >= kMaxUnixTimeS) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "start_time " + fields[0] +
                      " is not a Unix time in seconds (0 to 1e11, about the year 5138)");
    }
    row.start_time_s = *start;
    row.elapsed_time_s = *elapsed;
    for (std::size_t i = 3; i < fields.size(); ++i) {
      const auto energy = parse_double(fields[i]);
      if (!energy) {
        throw Error(
            ErrorKind::kInvalidArgument,
            at + header[i] + " is not a finite, non-negative number (\"" + fields[i] + "\")");
      }
      row.gpu_energy_j.push_back(*energy);
    }
    rows_.push_back(std::move(row));
  }
}

void ReplayMonitor::begin_window(const std::string& name, BeginWindowOptions options) {
  if (open_.count(name) != 0 && !options.restart) {
    throw Error(ErrorKind::kInvalidArgument, "window '" + name + "' is already open");
  }
  open_.insert(name);
}

Measurement ReplayMonitor::end_window(const std::string& name, EndWindowOptions options) {
  if (open_.erase(name) == 0) {
    throw Error(ErrorKind::kInvalidArgument, "no open window named '" + name + "'");
  }
  Measurement result;
  if (options.cancel) {
    for (const int index : gpu_indices_) {
      result.gpu_energy_j.set(index, 0.0);
    }
    return result;
  }
  if (next_row_ >= rows_.size()) {
    throw Error(ErrorKind::kNotFound, "the monitor log " + path_.string() + " is exhausted: all " +
                                          std::to_string(rows_.size()) +
                                          " windows were replayed, and '" + name +
                                          "' asks for another");
  }
  const ReplayRow& row = rows_[next_row_];
  if (match_window_name_ && row.window_name != name) {
    throw Error(ErrorKind::kInvalidArgument,
                "window '" + name + "' ended, but the next window in " + path_.string() +
                    " (line " + std::to_string(next_row_ + 2) + ") is '" + row.window_name + "'");
  }
  ++next_row_;
  result.time_s = row.elapsed_time_s;
  for (std::size_t i = 0; i < gpu_indices_.size(); ++i) {
    result.gpu_energy_j.set(gpu_indices_[i], row.gpu_energy_j[i]);
  }
  return result;
}

}  // namespace zeus::monitor
