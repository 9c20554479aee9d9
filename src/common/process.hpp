// Child processes: `zeus monitor -- CMD` and `zeus profile -- CMD` run the user's command
// (supervise_child), the demo runs its BSO server.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace zeus {

// How a child ended: `exit_code` is its exit status, or 128 + the signal that killed it (as
// shells report it).
struct ChildExit {
  int exit_code = 0;
  std::optional<int> signal;  // set when a signal killed it
};

struct ChildProcessOptions {
  // argv[0] is looked up in PATH (execvp); otherwise it is a path (execv).
  bool search_path = true;
  // The child leads a process group of its own: the terminal's Ctrl-C reaches only this process,
  // which then stops the child itself.
  bool own_process_group = false;
  // The child's stdout and stderr go to this file (created or truncated), its stdin is
  // /dev/null. Unset: all three are inherited.
  std::optional<std::filesystem::path> output_file = std::nullopt;
  // The kernel sends the child this signal when this process dies (PR_SET_PDEATHSIG).
  std::optional<int> parent_death_signal = std::nullopt;
};

// A running child process. A SignalWatch with forward_to_child alive while it runs forwards the
// stop signals sent to this process to it.
class ChildProcess {
 public:
  // Error of start(): the command could not be started at all (not found, not executable, its
  // output file cannot be opened).
  struct StartFailure {
    int error_number = 0;  // errno of exec (or fork, or the redirection)
    std::string message;   // "cannot run 'CMD': No such file or directory"
  };

  // Starts `argv`. The child gets the dispositions from before zeus's signal handlers for the
  // signals a SignalWatch may catch (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2: default,
  // or ignored when they were), the default SIGCHLD one, and this thread's signal mask. Only
  // descriptors 0, 1 and 2 are passed on: every other one of this process is closed in the child
  // before exec, whether or not it has close-on-exec. Returns the failure when the child could not
  // exec (the child is reaped); throws Error(kInvalidArgument) for an empty argv and
  // Error(kOperatingSystem) when no pipe can be made.
  static std::variant<ChildProcess, StartFailure> start(const std::vector<std::string>& argv,
                                                        const ChildProcessOptions& options = {});

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
  // Waits at most `timeout_s` (polling every 5 ms); nullopt when it still runs.
  std::optional<ChildExit> wait_for(double timeout_s);
  // Sends `signal` to the child while it runs (a no-op once it was reaped).
  void send_signal(int signal);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  std::optional<ChildExit> reap(bool block);

  pid_t pid_ = -1;
  std::optional<ChildExit> exit_;
};

class Clock;
class SignalWatch;

// Signals passed on to a supervised command like SIGINT and SIGTERM (give them to the
// SignalWatch's forwarded_signals), but not stop signals: the command may handle them and go on.
// Without this they would kill zeus and leave the command running. SIGHUP, SIGQUIT, SIGUSR1,
// SIGUSR2.
const std::vector<int>& passed_on_signals();

struct SupervisionOptions {
  // The command is sent SIGTERM once this long has passed since `start_ns` of the clock (a
  // --duration limit), when set.
  std::optional<double> time_limit_s = std::nullopt;
  std::int64_t start_ns = 0;
  // Once the command was sent a stop signal (at terminate_at_ns, or one that zeus received), it
  // has this long to exit before it is sent SIGKILL; another stop signal that zeus receives
  // meanwhile sends SIGKILL at once.
  double kill_after_s = 0.0;
};

struct SupervisedExit {
  ChildExit exit;
  bool limit_reached = false;  // sent SIGTERM at the time limit
  // Set when SIGKILL was sent: why ("sent SIGKILL after the 10 s grace period").
  std::string kill_reason;
};

// Waits for `child` to exit, for `zeus monitor -- CMD` and `zeus profile -- CMD`. `watch` must wake
// on the child's exit (wake_on_child_exit) and forward to it (forward_to_child, with
// passed_on_signals() as its forwarded_signals): the stop signals and the passed-on ones reach
// the command (one the terminal sent reached it already). A stop signal that was ignored before
// zeus asks nothing. Returns when the child exited, whatever stop signals came.
SupervisedExit supervise_child(ChildProcess& child, SignalWatch& watch, const Clock& clock,
                               const SupervisionOptions& options);

// "SIGTERM", "SIGINT", ... or "signal N".
std::string signal_name(int signal);

// `argv` as one line a shell would accept (arguments quoted where needed).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace zeus
