// /proc/<pid>/stat reads and process liveness (proc_stat.hpp).
#include "common/proc_stat.hpp"

#include <signal.h>

#include <cerrno>
#include <iterator>
#include <sstream>
#include <string>

namespace zeus {

std::optional<ProcStat> parse_proc_stat(std::ifstream& file) {
  if (!file) {
    return std::nullopt;
  }
  std::string text;
  try {
    // libstdc++ throws from the read when the process exits after the open (ESRCH); that is an
    // unreadable file like any other, not a reason to end the watcher thread (and the daemon).
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // The command name (field 2) is in parentheses and may itself contain ") ".
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(text.substr(close_paren + 1));
  ProcStat stat;
  std::string field;
  fields >> stat.state;  // field 3
  for (int number = 4; number < 22; ++number) {
    fields >> field;
  }
  if (!(fields >> stat.start_time)) {
    return std::nullopt;
  }
  return stat;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  return parse_proc_stat(file);
}

bool is_dead_state(char state) {
  return state == 'Z' || state == 'X' || state == 'x';
}

bool process_alive(pid_t pid, const std::optional<std::uint64_t>& start_time) {
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (stat) {
    return !is_dead_state(stat->state) && (!start_time || stat->start_time == *start_time);
  }
  if (start_time) {
    return false;  // /proc worked when the process was first watched: it is gone
  }
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace zeus
