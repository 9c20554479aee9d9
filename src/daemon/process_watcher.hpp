// Watching processes for their exit, on one thread: the settings ledger (ledger.hpp) watches the
// client processes that own changed settings with it.
//
// Rules:
// - A process is watched with a pidfd (pidfd_open, Linux >= 5.3): a pidfd names one process, so a
//   reused pid cannot be mistaken for it. Exits are reported as soon as poll() sees them (well
//   within one second). Without pidfd_open (ENOSYS), or with `force_polling`, the watcher polls
//   every `poll_interval_ms`, identifying a process by its pid and its start time from
//   /proc/<pid>/stat; when /proc cannot be read it falls back to kill(pid, 0), and a pid reused
//   within one polling interval would then be taken for the watched process (its exit is
//   reported when the new process exits).
// - watch() refuses a process that has already exited (reaped, or, in the fallback, a zombie). A
//   zombie seen through a pidfd is accepted, and its exit is reported at once.
// - `on_exit(pid)` runs on the watcher thread, once for each watched process that exits, without
//   the watcher's lock held (it may call watch() and unwatch()). An exited process stays known
//   as exited (watch() refuses it) until the thread forgets it after unwatch().
// - Only the watcher thread closes pidfds, so none is closed while poll() watches it. stop() and
//   the destructor end the thread; the destructor closes every descriptor and reports nothing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace zeus::daemon {

struct ProcessWatcherOptions {
  // Starts every log line and error message ("settings ledger").
  std::string name = "process watcher";
  // Use the /proc + kill(pid, 0) polling fallback even when pidfd_open works (for tests).
  bool force_polling = false;
  int poll_interval_ms = 200;
};

class ProcessWatcher {
 public:
  using ExitHandler = std::function<void(pid_t pid)>;

  // Starts the watcher thread. Throws Error(kInvalidArgument) for a poll interval that is not
  // positive, Error(kOperatingSystem) when the thread's wake-up eventfd cannot be made.
  ProcessWatcher(ProcessWatcherOptions options, ExitHandler on_exit);
  ~ProcessWatcher();
  ProcessWatcher(const ProcessWatcher&) = delete;
  ProcessWatcher& operator=(const ProcessWatcher&) = delete;

  // True when processes are watched with pidfds, false in the polling fallback.
  bool uses_pidfd() const { return use_pidfd_; }

  // Watches `pid` (nothing to do when it is watched already). Returns false when the process
  // has already exited, also when its exit was reported and it has not been unwatched since.
  // Throws Error(kOperatingSystem) when it cannot be watched.
  bool watch(pid_t pid);
  // Stops watching `pid`; its exit is no longer reported.
  void unwatch(pid_t pid);

  // Stops the thread, after the on_exit it may be running: no exit is reported after this. For an
  // owner whose on_exit uses the watcher, before it goes; the destructor calls it too.
  void stop();

 private:
  struct Watched {
    int pidfd = -1;                           // -1 in the polling fallback
    std::optional<std::uint64_t> start_time;  // /proc/<pid>/stat field 22, fallback only
    bool exited = false;                      // reported to on_exit
    bool unwatched = false;                   // to be closed and forgotten by the thread
  };

  void run();
  void wake();
  // pidfd_open, or the fallback's first reading; nullopt when the process has already exited.
  std::optional<Watched> open(pid_t pid);

  const ProcessWatcherOptions options_;
  const ExitHandler on_exit_;
  bool use_pidfd_ = false;
  int wake_fd_ = -1;

  std::mutex mutex_;
  std::map<pid_t, Watched> watched_;
  bool stopping_ = false;
  std::thread thread_;
};

// The state field of a /proc/<pid>/stat file opened earlier (the polling fallback's read);
// nullopt when it cannot be read, also when the process exited after the open (the read then
// fails with ESRCH). Exposed for the test of that case.
std::optional<char> proc_stat_state(std::ifstream& opened_stat_file);

}  // namespace zeus::daemon
