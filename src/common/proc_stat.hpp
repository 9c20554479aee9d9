// A process's state and start time from /proc/<pid>/stat, and whether a process is still the one
// first seen: the one home of that read for zeusd's process watcher (daemon/process_watcher.hpp)
// and the Slurm plugin's step owners (slurm/step_session.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <optional>

namespace zeus {

struct ProcStat {
  char state = '?';              // field 3: R, S, D, Z (zombie), X (dead), ...
  std::uint64_t start_time = 0;  // field 22: clock ticks after boot
};

// Fields 3 and 22 of the /proc/<pid>/stat opened as `file`; nullopt when it cannot be read (also
// when the process exited after the open: the read then fails with ESRCH).
std::optional<ProcStat> parse_proc_stat(std::ifstream& file);
// The same for `pid`.
std::optional<ProcStat> read_proc_stat(pid_t pid);
// Z, X or x: exited, waiting to be reaped or being reaped.
bool is_dead_state(char state);

// Whether `pid` runs and, when `start_time` is given, is the process that started then (not a
// later one that reuses its pid). A zombie is not alive. Without /proc: kill(pid, 0), and a
// process whose start time was known is taken as gone.
bool process_alive(pid_t pid, const std::optional<std::uint64_t>& start_time);

}  // namespace zeus
