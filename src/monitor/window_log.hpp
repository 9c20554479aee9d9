// The window log: ZeusMonitor's CSV log of measured windows, in the format of the reference's
// ZeusMonitor(log_file=...):
//
//   start_time,window_name,elapsed_time,gpu0_energy,gpu2_energy
//   1700000000.5,epoch,12.25,3010.5,2990
//
// one row per window that ended (a cancelled one has none): its start in Unix seconds, its name,
// its length (s) and each monitored GPU's energy (J), numbers written in their shortest exact
// form. ZeusMonitor writes it (ZeusMonitorOptions::log_file, and so `zeus monitor --timeline
// FILE`'s FILE.windows.csv); ReplayMonitor and `zeus report` read it with read() below.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/replay_monitor.hpp"

namespace zeus::monitor::window_log {

// The header line, with its newline, for the GPUs `gpu_indices` (in that order).
std::string header_line(const std::vector<int>& gpu_indices);
// One window's line, with its newline: the energy of each GPU of `gpu_indices` (the header's), as
// `gpu_energy_j` holds it (Error(kNotFound) for one it lacks).
std::string row_line(double start_time_s, std::string_view window_name, double elapsed_time_s,
                     const std::vector<int>& gpu_indices, const EnergyByIndex& gpu_energy_j);
// Throws Error(kInvalidArgument) unless `name` can be a window_name field (no comma or line
// break: the log quotes nothing).
void check_window_name(const std::string& name);

// Whether a CSV header (fields trimmed) is a window log's, to tell it from other files.
bool recognises(const std::vector<std::string>& header);

struct Log {
  std::vector<int> gpu_indices;  // of the gpu<i>_energy columns, in order
  std::vector<ReplayRow> rows;
};

// Reads `path` row by row: a UTF-8 byte-order mark, CRLF line ends and blank lines are accepted;
// fields are taken as written (no blanks trimmed). Throws Error as text::read_file() does for a
// path that cannot be read, and Error(kInvalidArgument) "<path>:<line>: ..." for a malformed
// header or row (numbers must be finite and non-negative, start_time a Unix time).
Log read(const std::filesystem::path& path);

}  // namespace zeus::monitor::window_log
