#include "zeus/monitor/replay_monitor.hpp"

#include "monitor/window_log.hpp"
#include "zeus/common/error.hpp"

namespace zeus::monitor {

ReplayMonitor::ReplayMonitor(const std::filesystem::path& log_file, bool match_window_name)
    : path_(log_file), match_window_name_(match_window_name) {
  window_log::Log log = window_log::read(log_file);
  gpu_indices_ = std::move(log.gpu_indices);
  rows_ = std::move(log.rows);
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
