// Running a command under zeus (`zeus monitor -- CMD`) and reacting to SIGINT/SIGTERM.
//
// SignalWatch installs process-wide handlers for SIGINT and SIGTERM (and SIGCHLD, to wake a
// waiting loop when a child exits). A signal sent to zeus by another process (kill, timeout,
// a batch scheduler: si_code SI_USER or SI_QUEUE) is forwarded to the running child; a signal
// the terminal sent (Ctrl-C) already reached the child through the process group and is not
// sent twice. Either way the signal is recorded and wakes wait(), so commands without a child
// (`zeus monitor --duration`, `zeus power`) can stop cleanly.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zeus::cli {

class SignalWatch {
 public:
  // Installs the handlers. Only one SignalWatch may exist at a time. Throws
  // Error(kOperatingSystem) when the handlers or the wake-up pipe cannot be set up.
  SignalWatch();
  // Restores the handlers that were in force before.
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Blocks until a signal (SIGINT, SIGTERM, SIGCHLD) arrives or `timeout_s` passes (forever when
  // unset). Returns true when woken by a signal.
  bool wait(std::optional<double> timeout_s);
  // The first SIGINT or SIGTERM received since construction, if any.
  std::optional<int> stop_signal() const;

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_chld_ {};
};

// How a child ended: `exit_code` is its exit status, or 128 + the signal that killed it (as
// shells report it).
struct ChildExit {
  int exit_code = 0;
  std::optional<int> signal;  // set when a signal killed it
};

// A child process running a command found through PATH. Needs a SignalWatch alive while it runs
// for signals to be forwarded to it.
class ChildProcess {
 public:
  // Error of start(): the command could not be started at all (not found, not executable).
  struct StartFailure {
    int error_number = 0;  // errno of execvp (or fork)
    std::string message;   // "cannot run 'CMD': No such file or directory"
  };

  // Starts `argv` (argv[0] is looked up in PATH, as execvp does). The child gets the SIGINT and
  // SIGTERM dispositions from before SignalWatch (default, or ignored when they were), the
  // default SIGCHLD one, and zeus's signal mask. Returns
  // the failure when exec failed in the child (the child is reaped); throws
  // Error(kInvalidArgument) for an empty argv.
  static std::variant<ChildProcess, StartFailure> start(const std::vector<std::string>& argv);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills (SIGKILL) and reaps a child that is still running: only on error paths.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reaps the child if it has exited, without blocking.
  std::optional<ChildExit> try_wait();
  // Blocks until the child exits (retrying when a signal interrupts the wait).
  ChildExit wait();
  // Sends `signal` to the child while it runs (a no-op once it was reaped).
  void send_signal(int signal);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  std::optional<ChildExit> reap(bool block);

  pid_t pid_ = -1;
  std::optional<ChildExit> exit_;
};

// "SIGTERM", "SIGINT", ... or "signal N".
std::string signal_name(int signal);

// `argv` as one line a shell would accept (arguments quoted where needed).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace zeus::cli
