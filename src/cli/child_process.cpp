#include "child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <string_view>
#include <system_error>
#include <utility>

#include "zeus/common/error.hpp"

namespace zeus::cli {
namespace {

// State shared with the signal handler. Lock-free atomics only: the handler may run on any
// thread, at any time.
std::atomic<pid_t> g_child_pid{0};      // the running child, 0 when none
std::atomic<int> g_deferred_signal{0};  // a signal to forward once the child exists
std::atomic<int> g_stop_signal{0};      // the first SIGINT/SIGTERM received
std::atomic<int> g_wake_fd{-1};         // write end of the wake-up pipe
std::atomic<bool> g_watch_installed{false};
// Whether SIGINT / SIGTERM were ignored before SignalWatch (e.g. a background job of a
// non-interactive shell): the child inherits that, as it would have without zeus.
std::atomic<bool> g_int_was_ignored{false};
std::atomic<bool> g_term_was_ignored{false};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

void forward_to_child(int signal) {
  const pid_t child = g_child_pid.load();
  if (child > 0) {
    ::kill(child, signal);
    return;
  }
  // No child yet: keep the signal for start(), which forwards it right after fork. Whichever of
  // this handler and start() sees both the pid and the signal sends it, exactly once.
  g_deferred_signal.store(signal);
  const pid_t started = g_child_pid.load();
  if (started > 0) {
    const int deferred = g_deferred_signal.exchange(0);
    if (deferred != 0) {
      ::kill(started, deferred);
    }
  }
}

void on_signal(int signal, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  if (signal == SIGINT || signal == SIGTERM) {
    int expected = 0;
    g_stop_signal.compare_exchange_strong(expected, signal);
    // Sent by a process (kill, timeout, a scheduler): forward it. Sent by the terminal
    // (SI_KERNEL): the child, in our process group, got it already.
    if (info != nullptr && (info->si_code == SI_USER || info->si_code == SI_QUEUE)) {
      forward_to_child(signal);
    }
  }
  const int fd = g_wake_fd.load();
  if (fd >= 0) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);  // EAGAIN: already awake
  }
  errno = saved_errno;
}

[[noreturn]] void throw_os_error(const std::string& what, int error_number) {
  throw Error(ErrorKind::kOperatingSystem,
              what + ": " + std::system_category().message(error_number));
}

ChildExit decode_status(int status) {
  ChildExit result;
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + *result.signal;
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

bool needs_quoting(std::string_view word) {
  if (word.empty()) {
    return true;
  }
  for (const char c : word) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
    if (!plain) {
      return true;
    }
  }
  return false;
}

}  // namespace

SignalWatch::SignalWatch() {
  if (g_watch_installed.exchange(true)) {
    throw Error(ErrorKind::kUnknown, "a SignalWatch is already installed");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int error_number = errno;
    g_watch_installed.store(false);
    throw_os_error("cannot create a pipe", error_number);
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_stop_signal.store(0);
  g_deferred_signal.store(0);
  g_wake_fd.store(write_fd_);

  struct sigaction action {};
  action.sa_sigaction = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  struct sigaction child_action = action;
  child_action.sa_flags |= SA_NOCLDSTOP;
  if (::sigaction(SIGINT, &action, &old_int_) != 0 ||
      ::sigaction(SIGTERM, &action, &old_term_) != 0 ||
      ::sigaction(SIGCHLD, &child_action, &old_chld_) != 0) {
    const int error_number = errno;
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_wake_fd.store(-1);
    ::close(read_fd_);
    ::close(write_fd_);
    g_watch_installed.store(false);
    throw_os_error("cannot install signal handlers", error_number);
  }
  g_int_was_ignored.store(old_int_.sa_handler == SIG_IGN);
  g_term_was_ignored.store(old_term_.sa_handler == SIG_IGN);
}

SignalWatch::~SignalWatch() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  g_wake_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
  g_int_was_ignored.store(false);
  g_term_was_ignored.store(false);
  g_watch_installed.store(false);
}

bool SignalWatch::wait(std::optional<double> timeout_s) {
  int timeout_ms = -1;
  if (timeout_s) {
    const double ms = std::ceil(std::max(0.0, *timeout_s) * 1e3);
    timeout_ms = ms >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(ms);
  }
  pollfd entry{read_fd_, POLLIN, 0};
  const int ready = ::poll(&entry, 1, timeout_ms);
  if (ready < 0) {
    return errno == EINTR;  // a signal interrupted the wait
  }
  if (ready == 0) {
    return false;
  }
  char buffer[64];
  while (::read(read_fd_, buffer, sizeof buffer) > 0) {
  }
  return true;
}

std::optional<int> SignalWatch::stop_signal() const {
  const int signal = g_stop_signal.load();
  return signal == 0 ? std::nullopt : std::optional<int>(signal);
}

std::variant<ChildProcess, ChildProcess::StartFailure> ChildProcess::start(
    const std::vector<std::string>& argv) {
  if (argv.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "no command to run");
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);

  // execvp's errno comes back through this pipe; it is closed by a successful exec.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw_os_error("cannot create a pipe", errno);
  }
  // Block SIGINT/SIGTERM around fork so that the child cannot run zeus's handler: it restores
  // the dispositions from before SignalWatch first, then the old mask (a pending signal then
  // acts as usual).
  const bool int_ignored = g_int_was_ignored.load();
  const bool term_ignored = g_term_was_ignored.load();
  sigset_t blocked;
  sigset_t old_mask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    struct sigaction ignore_action = default_action;
    ignore_action.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, int_ignored ? &ignore_action : &default_action, nullptr);
    ::sigaction(SIGTERM, term_ignored ? &ignore_action : &default_action, nullptr);
    ::sigaction(SIGCHLD, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(args[0], args.data());
    const int exec_errno = errno;
    [[maybe_unused]] const ssize_t written = ::write(fds[1], &exec_errno, sizeof exec_errno);
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) {
    g_child_pid.store(pid);
    const int deferred = g_deferred_signal.exchange(0);
    if (deferred != 0) {
      ::kill(pid, deferred);
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return StartFailure{fork_errno, "cannot run '" + argv[0] + "': fork failed: " +
                                        std::system_category().message(fork_errno)};
  }

  ChildProcess child(pid);
  int exec_errno = 0;
  ssize_t count = 0;
  do {
    count = ::read(fds[0], &exec_errno, sizeof exec_errno);
  } while (count < 0 && errno == EINTR);
  ::close(fds[0]);
  if (count == static_cast<ssize_t>(sizeof exec_errno)) {
    child.wait();
    return StartFailure{
        exec_errno, "cannot run '" + argv[0] + "': " + std::system_category().message(exec_errno)};
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_(std::move(other.exit_)) {}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
}

std::optional<ChildExit> ChildProcess::reap(bool block) {
  if (exit_ || pid_ <= 0) {
    return exit_;
  }
  // Look without reaping first, and forget the pid before reaping it, so that the signal
  // handler can never signal a recycled pid.
  siginfo_t info{};
  int result = 0;
  do {
    info.si_pid = 0;
    result =
        ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
  } while (result < 0 && errno == EINTR);
  if (result < 0) {
    throw_os_error("cannot wait for process " + std::to_string(pid_), errno);
  }
  if (info.si_pid == 0) {
    return std::nullopt;  // still running
  }
  pid_t expected = pid_;
  g_child_pid.compare_exchange_strong(expected, 0);
  int status = 0;
  pid_t reaped = 0;
  do {
    reaped = ::waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped < 0) {
    throw_os_error("cannot wait for process " + std::to_string(pid_), errno);
  }
  exit_ = decode_status(status);
  return exit_;
}

std::optional<ChildExit> ChildProcess::try_wait() {
  return reap(false);
}

ChildExit ChildProcess::wait() {
  return *reap(true);
}

void ChildProcess::send_signal(int signal) {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, signal);
  }
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) {
      line += ' ';
    }
    if (!needs_quoting(word)) {
      line += word;
      continue;
    }
    line += '\'';
    for (const char c : word) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

}  // namespace zeus::cli
