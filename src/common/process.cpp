#include "common/process.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "common/duration.hpp"
#include "common/signals.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus {
namespace {

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

// The signals a SignalWatch may hold a handler for in zeus (stop and forwarded signals).
constexpr std::array<int, 6> kHandledSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Where closing one descriptor at a time stops when close_range is missing (kernels before 5.9):
// a limit of millions would take seconds.
constexpr long kFallbackLastFd = 65535;

// Async-signal-safe: runs in the child between fork and exec.
void close_descriptors_from_3_except(int keep_fd, int last_fd) {
  const auto close_between = [last_fd](unsigned first, unsigned last) {
    if (first > last) {
      return;
    }
    if (::close_range(first, last, 0) == 0) {
      return;
    }
    const unsigned bound = std::min(last, static_cast<unsigned>(last_fd));
    for (unsigned fd = first; fd <= bound; ++fd) {
      ::close(static_cast<int>(fd));
    }
  };
  if (keep_fd < 3) {
    close_between(3, ~0U);
    return;
  }
  close_between(3, static_cast<unsigned>(keep_fd) - 1);
  close_between(static_cast<unsigned>(keep_fd) + 1, ~0U);
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

std::variant<ChildProcess, ChildProcess::StartFailure> ChildProcess::start(
    const std::vector<std::string>& argv, const ChildProcessOptions& options) {
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
  const std::string output = options.output_file ? options.output_file->string() : std::string();
  const pid_t parent = ::getpid();

  // exec's errno comes back through this pipe; it is closed by a successful exec.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw_os_error("cannot create a pipe", errno);
  }
  // Block the signals zeus may catch around fork so that the child cannot run zeus's handler: it
  // restores the dispositions from before the watches first, then the old mask (a pending signal
  // then acts as usual).
  sigset_t blocked;
  sigset_t old_mask;
  sigemptyset(&blocked);
  for (const int signal : kHandledSignals) {
    sigaddset(&blocked, signal);
  }
  std::array<bool, kHandledSignals.size()> ignored{};
  for (std::size_t i = 0; i < kHandledSignals.size(); ++i) {
    ignored[i] = forwarding::was_ignored(kHandledSignals[i]);
  }
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  const int last_fd = static_cast<int>(
      open_max < 0 ? kFallbackLastFd : std::min<long>(open_max - 1, kFallbackLastFd));
  ::pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const auto fail = [&fds](int error_number) {
      [[maybe_unused]] const ssize_t written = ::write(fds[1], &error_number, sizeof error_number);
      ::_exit(127);
    };
    if (options.parent_death_signal) {
      ::prctl(PR_SET_PDEATHSIG, *options.parent_death_signal);
      if (::getppid() != parent) {
        ::_exit(127);  // the parent died before the request took effect
      }
    }
    if (options.own_process_group) {
      ::setpgid(0, 0);
    }
    if (options.output_file) {
      const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (out < 0) {
        fail(errno);
      }
      const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) {
        fail(errno);
      }
    }
    // Only the exec-error pipe crosses exec besides 0-2: a descriptor zeus opened (an output
    // file, a socket) must not be written to, or held open, by the command.
    close_descriptors_from_3_except(fds[1], last_fd);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    struct sigaction ignore_action = default_action;
    ignore_action.sa_handler = SIG_IGN;
    for (std::size_t i = 0; i < kHandledSignals.size(); ++i) {
      // A signal ignored now (without a handler of zeus) stays ignored across exec, as it would.
      struct sigaction current {};
      ::sigaction(kHandledSignals[i], nullptr, &current);
      if (current.sa_handler != SIG_IGN) {
        ::sigaction(kHandledSignals[i], ignored[i] ? &ignore_action : &default_action, nullptr);
      }
    }
    ::sigaction(SIGCHLD, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    if (options.search_path) {
      ::execvp(args[0], args.data());
    } else {
      ::execv(args[0], args.data());
    }
    fail(errno);
  }
  const int fork_errno = errno;
  if (pid > 0) {
    forwarding::child_started(pid);
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
  forwarding::child_ending(pid_);
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

std::optional<ChildExit> ChildProcess::wait_for(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    if (auto done = reap(false)) {
      return done;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ChildProcess::send_signal(int signal) {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, signal);
  }
}

const std::vector<int>& passed_on_signals() {
  static const std::vector<int> signals = {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return signals;
}

SupervisedExit supervise_child(ChildProcess& child, SignalWatch& watch, const Clock& clock,
                               const SupervisionOptions& options) {
  SupervisedExit result;
  std::optional<std::int64_t> kill_at_ns;  // set while the grace period runs
  int grace_signal = SIGTERM;              // the stop signal that started it
  const double kill_after_s = options.kill_after_s;
  const std::string grace = format_duration(kill_after_s);
  const auto start_grace_period = [&](int signal) {
    if (!kill_at_ns) {
      grace_signal = signal;
      const std::int64_t now_ns = clock.now_ns();
      const std::int64_t grace_ns = units::nanoseconds_from_seconds(kill_after_s);
      kill_at_ns = grace_ns > INT64_MAX - now_ns ? INT64_MAX : now_ns + grace_ns;
    }
  };
  const auto send_kill = [&](std::string reason) {
    if (result.kill_reason.empty()) {
      child.send_signal(SIGKILL);
      result.kill_reason = std::move(reason);
    }
  };
  while (true) {
    if (const auto exited = child.try_wait()) {
      result.exit = *exited;
      return result;
    }
    std::optional<double> timeout_s;
    const auto wake_within = [&timeout_s](double seconds) {
      timeout_s = std::min(timeout_s.value_or(seconds), seconds);
    };
    if (options.time_limit_s && !result.limit_reached) {
      const double remaining_s = *options.time_limit_s -
                                 units::seconds_from_nanoseconds(clock.now_ns() - options.start_ns);
      if (remaining_s <= 0.0) {
        child.send_signal(SIGTERM);
        result.limit_reached = true;
        start_grace_period(SIGTERM);
      } else {
        wake_within(remaining_s);
      }
    }
    if (kill_at_ns && result.kill_reason.empty()) {
      const double remaining_s = units::seconds_from_nanoseconds(*kill_at_ns - clock.now_ns());
      if (remaining_s <= 0.0) {
        send_kill(kill_after_s > 0.0
                      ? fmt::format("sent SIGKILL after the {} grace period", grace)
                      : fmt::format("sent SIGKILL right after {}", signal_name(grace_signal)));
        continue;
      }
      wake_within(remaining_s);
    }
    // Woken by SIGCHLD, a signal zeus received (forwarded by the handler) or a deadline.
    const std::optional<int> signal = watch.next_signal(timeout_s);
    // A stop signal that was ignored before zeus is ignored by the command too: it asks nothing.
    if (signal && (*signal == SIGINT || *signal == SIGTERM) && !forwarding::was_ignored(*signal)) {
      if (kill_at_ns) {
        send_kill(fmt::format("sent SIGKILL on {} during the {} grace period", signal_name(*signal),
                              grace));
      } else {
        start_grace_period(*signal);
      }
    }
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

}  // namespace zeus
