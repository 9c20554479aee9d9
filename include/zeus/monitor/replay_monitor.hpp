// Plays back a ZeusMonitor CSV log (start_time,window_name,elapsed_time,gpu<i>_energy,...): each
// completed window returns the next row. Used to test consumers (the power-limit optimizer) on
// recorded profiles.
#pragma once

#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "zeus/monitor/window_monitor.hpp"

namespace zeus::monitor {

struct ReplayRow {
  double start_time_s = 0.0;
  std::string window_name;
  double elapsed_time_s = 0.0;
  std::vector<double> gpu_energy_j;  // in header order
};

class ReplayMonitor final : public WindowMonitor {
 public:
  // Reads the whole log. Throws Error(kNotFound) for a missing file and Error(kInvalidArgument)
  // naming the line for a malformed header or row. `match_window_name`: end_window's name must
  // equal the row's.
  explicit ReplayMonitor(const std::filesystem::path& log_file, bool match_window_name = true);

  void begin_window(const std::string& name, BeginWindowOptions options = {}) override;
  // Consumes the next row (none when cancelled). Throws Error(kInvalidArgument) when the name
  // does not match, and Error(kNotFound) when the log is exhausted.
  Measurement end_window(const std::string& name, EndWindowOptions options = {}) override;
  const std::vector<int>& gpu_indices() const override { return gpu_indices_; }

  std::size_t rows_left() const { return rows_.size() - next_row_; }
  const std::vector<ReplayRow>& rows() const { return rows_; }

 private:
  std::filesystem::path path_;
  bool match_window_name_;
  std::vector<int> gpu_indices_;
  std::vector<ReplayRow> rows_;
  std::size_t next_row_ = 0;
  std::set<std::string> open_;
};

}  // namespace zeus::monitor
