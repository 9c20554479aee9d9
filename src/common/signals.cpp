#include "common/signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus {
namespace {

constexpr int kMaxWatches = 8;
constexpr int kMaxSignal = 64;  // signal numbers are bits of a 64-bit mask

std::uint64_t bit(int signal) {
  return std::uint64_t{1} << static_cast<unsigned>(signal);
}

// One alive watch, as the handler sees it. Lock-free atomics only: the handler may run on any
// thread, at any time. write_fd is published last and withdrawn first.
struct Slot {
  std::atomic<int> write_fd{-1};
  std::atomic<std::uint64_t> heard{0};     // signals that wake this watch
  std::atomic<std::uint64_t> stops{0};     // the stop signals among them
  std::atomic<std::uint64_t> forwards{0};  // the signals it forwards to the child
  std::atomic<int> stop_signal{0};
};

std::array<Slot, kMaxWatches> g_slots;
std::atomic<int> g_in_handler{0};  // handlers running now (a watch waits for 0 before closing)

std::atomic<pid_t> g_child_pid{0};      // the running child, 0 when none
std::atomic<int> g_deferred_signal{0};  // a signal to forward once the child exists
std::array<std::atomic<bool>, kMaxSignal> g_ignored_before{};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
              std::atomic<std::uint64_t>::is_always_lock_free);

// The dispositions, touched only outside the handler, under the mutex.
struct Installed {
  std::mutex mutex;
  std::array<int, kMaxSignal> users{};
  std::array<struct sigaction, kMaxSignal> before{};
  std::array<bool, kMaxWatches> slot_used{};
};

// Never destroyed: a watch may outlive static destruction (the restorer's lives forever).
Installed& installed() {
  static Installed* instance = new Installed;
  return *instance;
}

void forward_to_child(int signal) {
  const pid_t child = g_child_pid.load();
  if (child > 0) {
    ::kill(child, signal);
    return;
  }
  // No child yet: keep the signal for child_started(), which forwards it. Whichever of this
  // handler and child_started() sees both the pid and the signal sends it, exactly once.
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
  g_in_handler.fetch_add(1);
  bool forward = false;
  for (Slot& slot : g_slots) {
    const int fd = slot.write_fd.load();
    if (fd < 0 || (slot.heard.load() & bit(signal)) == 0) {
      continue;
    }
    if ((slot.stops.load() & bit(signal)) != 0) {
      int expected = 0;
      slot.stop_signal.compare_exchange_strong(expected, signal);
    }
    forward = forward || (slot.forwards.load() & bit(signal)) != 0;
    const auto byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);  // EAGAIN: already awake
  }
  if (forward && info != nullptr && (info->si_code == SI_USER || info->si_code == SI_QUEUE)) {
    forward_to_child(signal);
  }
  g_in_handler.fetch_sub(1);
  errno = saved_errno;
}

[[noreturn]] void throw_os_error(const std::string& what, int error_number) {
  throw Error(ErrorKind::kOperatingSystem,
              what + ": " + std::system_category().message(error_number));
}

// The disposition `signal` has without zeus: the saved one while a handler is installed.
struct sigaction disposition_before(Installed& state, int signal) {
  if (state.users[static_cast<std::size_t>(signal)] > 0) {
    return state.before[static_cast<std::size_t>(signal)];
  }
  struct sigaction current {};
  ::sigaction(signal, nullptr, &current);
  return current;
}

void release_locked(Installed& state, int signal) {
  const auto index = static_cast<std::size_t>(signal);
  if (--state.users[index] == 0) {
    ::sigaction(signal, &state.before[index], nullptr);
    g_ignored_before[index].store(false);
  }
}

void acquire_locked(Installed& state, int signal) {
  const auto index = static_cast<std::size_t>(signal);
  if (state.users[index] == 0) {
    struct sigaction action {};
    action.sa_sigaction = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_RESTART | (signal == SIGCHLD ? SA_NOCLDSTOP : 0);
    if (::sigaction(signal, &action, &state.before[index]) != 0) {
      throw_os_error("cannot install a handler for " + std::to_string(signal), errno);
    }
    g_ignored_before[index].store(state.before[index].sa_handler == SIG_IGN);
  }
  ++state.users[index];
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

sigset_t sigpipe_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

}  // namespace

SignalWatch::SignalWatch(SignalWatchOptions options) {
  Installed& state = installed();
  std::lock_guard lock(state.mutex);
  const auto free_slot = std::find(state.slot_used.begin(), state.slot_used.end(), false);
  if (free_slot == state.slot_used.end()) {
    throw Error(ErrorKind::kUnavailable,
                "too many signal watches at once (" + std::to_string(kMaxWatches) + ")");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw_os_error("cannot create a pipe", errno);
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];

  std::uint64_t stops = 0;
  std::uint64_t heard = 0;
  std::vector<int> wanted;
  const auto want = [&](int signal, bool keep_ignored) {
    if (signal <= 0 || signal >= kMaxSignal || signal == SIGKILL || signal == SIGSTOP) {
      ::close(read_fd_);
      ::close(write_fd_);
      throw Error(ErrorKind::kInvalidArgument, "cannot watch signal " + std::to_string(signal));
    }
    if ((heard & bit(signal)) != 0 ||
        (keep_ignored && disposition_before(state, signal).sa_handler == SIG_IGN)) {
      return false;
    }
    heard |= bit(signal);
    wanted.push_back(signal);
    return true;
  };
  for (const int signal : options.stop_signals) {
    if (want(signal, options.keep_ignored)) {
      stops |= bit(signal);
    }
  }
  for (const int signal : options.forwarded_signals) {
    want(signal, true);
  }
  const std::uint64_t forwards = options.forward_to_child ? heard : 0;
  if (options.wake_on_child_exit) {
    heard |= bit(SIGCHLD);
    wanted.push_back(SIGCHLD);
  }
  try {
    for (const int signal : wanted) {
      acquire_locked(state, signal);
      installed_.push_back(signal);
    }
  } catch (...) {
    for (const int signal : installed_) {
      release_locked(state, signal);
    }
    ::close(read_fd_);
    ::close(write_fd_);
    throw;
  }
  if (options.forward_to_child) {
    g_deferred_signal.store(0);
  }
  slot_ = static_cast<int>(free_slot - state.slot_used.begin());
  *free_slot = true;
  Slot& slot = g_slots[static_cast<std::size_t>(slot_)];
  slot.stop_signal.store(0);
  slot.heard.store(heard);
  slot.stops.store(stops);
  slot.forwards.store(forwards);
  slot.write_fd.store(write_fd_);
}

SignalWatch::~SignalWatch() {
  Installed& state = installed();
  std::lock_guard lock(state.mutex);
  Slot& slot = g_slots[static_cast<std::size_t>(slot_)];
  slot.write_fd.store(-1);
  // A handler that read the descriptor before it was withdrawn may still write to it.
  while (g_in_handler.load() != 0) {
    std::this_thread::yield();
  }
  slot.heard.store(0);
  slot.stops.store(0);
  slot.forwards.store(0);
  for (const int signal : installed_) {
    release_locked(state, signal);
  }
  state.slot_used[static_cast<std::size_t>(slot_)] = false;
  ::close(read_fd_);
  ::close(write_fd_);
}

std::optional<int> SignalWatch::next_signal(std::optional<double> timeout_s) {
  int timeout_ms = -1;
  if (timeout_s) {
    const double ms = std::ceil(units::milliseconds_from_seconds(std::max(0.0, *timeout_s)));
    timeout_ms = ms >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(ms);
  }
  while (true) {
    unsigned char byte = 0;
    if (::read(read_fd_, &byte, 1) == 1) {
      return byte;
    }
    pollfd entry{read_fd_, POLLIN, 0};
    const int ready = ::poll(&entry, 1, timeout_ms);
    if (ready == 0) {
      return std::nullopt;
    }
    if (ready < 0 && errno != EINTR) {
      throw_os_error("cannot wait for a signal", errno);
    }
    // EINTR: a signal interrupted poll; its byte is read at the top of the loop.
  }
}

bool SignalWatch::wait(std::optional<double> timeout_s) {
  if (!next_signal(timeout_s)) {
    return false;
  }
  unsigned char buffer[64];
  while (::read(read_fd_, buffer, sizeof buffer) > 0) {
  }
  return true;
}

std::optional<int> SignalWatch::stop_signal() const {
  const int signal = g_slots[static_cast<std::size_t>(slot_)].stop_signal.load();
  return signal == 0 ? std::nullopt : std::optional<int>(signal);
}

void SignalWatch::reraise(int signal) {
  if (signal <= 0 || signal >= kMaxSignal) {
    return;
  }
  Installed& state = installed();
  std::lock_guard lock(state.mutex);
  const struct sigaction before = disposition_before(state, signal);
  if (before.sa_handler == SIG_IGN) {
    return;
  }
  ::sigaction(signal, &before, nullptr);
  ::kill(::getpid(), signal);
}

namespace forwarding {

bool was_ignored(int signal) {
  return signal > 0 && signal < kMaxSignal &&
         g_ignored_before[static_cast<std::size_t>(signal)].load();
}

void child_started(pid_t pid) {
  g_child_pid.store(pid);
  const int deferred = g_deferred_signal.exchange(0);
  if (deferred != 0) {
    ::kill(pid, deferred);
  }
}

void child_ending(pid_t pid) {
  pid_t expected = pid;
  g_child_pid.compare_exchange_strong(expected, 0);
}

}  // namespace forwarding

SigpipeGuard::SigpipeGuard() {
  const sigset_t pipe_only = sigpipe_set();
  sigset_t before;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  blocked_here_ = sigismember(&before, SIGPIPE) == 0;
}

SigpipeGuard::~SigpipeGuard() {
  if (!blocked_here_) {
    return;
  }
  const sigset_t pipe_only = sigpipe_set();
  // SIGPIPE from a write is sent to the writing thread; while blocked it waits here. Take it
  // (without waiting) before unblocking, or it would be delivered then.
  sigset_t pending;
  sigemptyset(&pending);
  while (::sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
    const timespec no_wait{0, 0};
    if (::sigtimedwait(&pipe_only, nullptr, &no_wait) != SIGPIPE && errno != EINTR) {
      break;
    }
  }
  ::pthread_sigmask(SIG_UNBLOCK, &pipe_only, nullptr);
}

sigset_t block_stop_signals() {
  const sigset_t set = stop_set();
  sigset_t before;
  ::pthread_sigmask(SIG_BLOCK, &set, &before);
  return before;
}

std::optional<int> wait_for_stop_signal(std::optional<double> timeout_s) {
  const sigset_t set = stop_set();
  if (!timeout_s) {
    int received = 0;
    ::sigwait(&set, &received);
    return received;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(units::nanoseconds_from_seconds(*timeout_s));
  while (true) {
    const auto left_ns =
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
    timespec timeout{};
    timeout.tv_sec = static_cast<std::time_t>(left_ns / 1'000'000'000);
    timeout.tv_nsec = static_cast<long>(left_ns % 1'000'000'000);
    const int received = ::sigtimedwait(&set, nullptr, &timeout);
    if (received > 0) {
      return received;
    }
    if (errno != EINTR) {
      return std::nullopt;  // EAGAIN: the time passed
    }
  }
}

int serve_until_signal(const std::function<void()>& serve, const std::function<void()>& stop,
                       const ServeUntilSignalOptions& options) {
  block_stop_signals();
  std::atomic<bool> served{false};
  std::atomic<bool> released{false};
  std::atomic<int> received{0};
  std::thread waiter([&] {
    const int signal = *wait_for_stop_signal(std::nullopt);
    if (released.load()) {
      return;
    }
    received.store(signal);
    if (options.on_signal) {
      options.on_signal(signal);
    }
    if (!options.repeat_stop_every_s) {
      stop();
      return;
    }
    const auto every = std::chrono::nanoseconds(
        units::nanoseconds_from_seconds(std::max(0.001, *options.repeat_stop_every_s)));
    while (!served.load()) {
      stop();
      std::this_thread::sleep_for(every);
    }
  });
  const auto release_waiter = [&] {
    served.store(true);
    if (received.load() == 0) {
      released.store(true);
      ::pthread_kill(waiter.native_handle(), SIGTERM);  // taken by its sigwait
    }
    waiter.join();
  };
  try {
    serve();
  } catch (...) {
    release_waiter();
    throw;
  }
  release_waiter();
  return received.load();
}

}  // namespace zeus
