// Reacting to SIGINT/SIGTERM (and passing other signals on to a child), in the two ways zeus
// needs:
//
// - SignalWatch: handlers that record a stop signal and wake a waiting loop (`zeus monitor`,
//   `zeus power`, the demo, the power-limit restorer). Several watches may be alive at once: every
//   watch interested in a signal hears it. The handlers are installed when the first watch of a
//   signal appears and the disposition from before is put back when the last one goes.
// - serve_until_signal / wait_for_stop_signal: the stop signals are blocked in every thread and
//   taken synchronously (sigwait) by one, which stops a server (`zeus bso serve`, `zeus exporter`,
//   zeusd).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <vector>

namespace zeus {

struct SignalWatchOptions {
  // The signals recorded as stop signals; each wakes wait().
  std::vector<int> stop_signals = {SIGINT, SIGTERM};
  // SIGCHLD wakes wait() too (a loop waiting for a child to exit).
  bool wake_on_child_exit = false;
  // A stop signal sent by another process (kill, timeout, a batch scheduler: si_code SI_USER or
  // SI_QUEUE) is forwarded to the child registered with forwarding::child_started(). One the
  // terminal sent (Ctrl-C) already reached the child through the process group and is not sent
  // twice.
  bool forward_to_child = false;
  // A stop signal that was ignored when the watch was made stays ignored (this watch never hears
  // it), as a background job of a non-interactive shell expects.
  bool keep_ignored = false;
  // Signals that wake wait() and, with forward_to_child, are forwarded like the stop signals (same
  // rule for who sent them), but are not stop signals: the child may handle them and go on
  // (SIGHUP, SIGUSR1 to `zeus monitor`). One that is ignored when the watch is made stays ignored
  // (nohup), whatever keep_ignored says.
  std::vector<int> forwarded_signals = {};
};

class SignalWatch {
 public:
  // Installs the handlers this watch needs. Throws Error(kOperatingSystem) when the handlers or
  // the wake-up pipe cannot be set up, Error(kUnavailable) when too many watches are alive.
  explicit SignalWatch(SignalWatchOptions options = {});
  // Removes this watch; the last watch of a signal puts back the disposition from before.
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Blocks until a signal this watch hears arrives or `timeout_s` passes (forever when unset).
  // Returns true when woken by a signal.
  bool wait(std::optional<double> timeout_s);
  // As wait(), but takes one signal and says which (nullopt on timeout).
  std::optional<int> next_signal(std::optional<double> timeout_s);
  // The first stop signal received since construction, if any.
  std::optional<int> stop_signal() const;

  // Lets `signal` do what it would have done without zeus: puts back the disposition from before
  // the first watch (for every watch) and sends the signal to this process again. A signal that
  // was ignored stays ignored and nothing is sent.
  static void reraise(int signal);

 private:
  int slot_ = -1;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::vector<int> installed_;  // the signals this watch holds a handler for
};

// Holds SIGPIPE off the calling thread while it lives, so that a write to a peer that has gone
// fails with EPIPE instead of killing the process. cpp-httplib 0.11 (Debian 12's) sends without
// MSG_NOSIGNAL, so the one HTTP client (src/http/client.hpp: BSO, zeusd, Pushgateway,
// ElectricityMaps, OpenEI) makes every call under one: a server that closes mid-request, or a
// cancel() that shuts the socket down while the request is written, is then the call's error, not a
// dead training job. A SIGPIPE the thread raised meanwhile is taken and dropped when the guard
// ends; the disposition is not touched, so the process's other writers keep theirs (a CLI's `|
// head` still ends it). A thread that already blocked SIGPIPE is left as it was.
class SigpipeGuard {
 public:
  SigpipeGuard();
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool blocked_here_ = false;  // false when SIGPIPE was already blocked in this thread
};

// The child a SignalWatch with forward_to_child sends stop signals to (used by ChildProcess).
namespace forwarding {
// Whether `signal` was ignored before zeus's handlers: a child inherits that, as it would have
// without zeus.
bool was_ignored(int signal);
// `pid` now runs: a stop signal that came while there was no child yet is sent to it now.
void child_started(pid_t pid);
// `pid` is about to be reaped: nothing is forwarded to it (its pid may be recycled) from now on.
void child_ending(pid_t pid);
}  // namespace forwarding

// Blocks SIGINT and SIGTERM in the calling thread, so that the threads it starts afterwards
// inherit the mask and only a sigwait() takes them. Returns the mask from before (the servers keep
// the signals blocked until they exit, so that a second signal during shutdown is harmless).
sigset_t block_stop_signals();

// Waits (sigtimedwait) for SIGINT or SIGTERM, which must be blocked in every thread
// (block_stop_signals), for at most `timeout_s` (forever when unset). Returns the signal, or
// nullopt when the time passed.
std::optional<int> wait_for_stop_signal(std::optional<double> timeout_s);

struct ServeUntilSignalOptions {
  // Called with the signal (on the waiter thread) before stop(), e.g. to log it.
  std::function<void(int)> on_signal = nullptr;
  // A stop() that comes before serve() listens may be lost: when set, stop() is repeated this
  // often until serve() returns. Unset: stop() is called once.
  std::optional<double> repeat_stop_every_s = 0.02;
};

// Runs `serve` (which blocks until stopped) on the calling thread, with a waiter thread that takes
// SIGINT or SIGTERM and calls `stop`. Blocks the stop signals first (block_stop_signals; call it
// yourself earlier when threads are started before). Returns the signal, or 0 when serve()
// returned on its own (the waiter is released then).
int serve_until_signal(const std::function<void()>& serve, const std::function<void()>& stop,
                       const ServeUntilSignalOptions& options = {});

}  // namespace zeus
