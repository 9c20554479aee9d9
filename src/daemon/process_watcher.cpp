// Watching processes for their exit: pidfds, or /proc polling. See process_watcher.hpp.
#include "daemon/process_watcher.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "common/proc_stat.hpp"
#include "zeus/common/error.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture (Linux 5.3)
#endif

namespace zeus::daemon {
namespace {

int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

std::string errno_text(int error_number) {
  return std::strerror(error_number);
}

}  // namespace

std::optional<char> proc_stat_state(std::ifstream& opened_stat_file) {
  const std::optional<ProcStat> stat = parse_proc_stat(opened_stat_file);
  if (!stat) {
    return std::nullopt;
  }
  return stat->state;
}

ProcessWatcher::ProcessWatcher(ProcessWatcherOptions options, ExitHandler on_exit)
    : options_(std::move(options)), on_exit_(std::move(on_exit)) {
  if (options_.poll_interval_ms <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: poll interval must be positive, got {} ms", options_.name,
                            options_.poll_interval_ms));
  }
  if (!options_.force_polling) {
    const int probe_fd = pidfd_open(getpid());
    if (probe_fd >= 0) {
      close(probe_fd);
      use_pidfd_ = true;
    } else {
      log().warn("{}: pidfd_open unavailable ({}); watching owners by polling every {} ms",
                 options_.name, errno_text(errno), options_.poll_interval_ms);
    }
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    throw Error(ErrorKind::kOperatingSystem,
                fmt::format("{}: eventfd failed: {}", options_.name, errno_text(errno)));
  }
  thread_ = std::thread([this] { run(); });
}

ProcessWatcher::~ProcessWatcher() {
  stop();
  for (auto& [pid, watched] : watched_) {
    if (watched.pidfd >= 0) {
      close(watched.pidfd);
    }
  }
  close(wake_fd_);
}

std::optional<ProcessWatcher::Watched> ProcessWatcher::open(pid_t pid) {
  Watched watched;
  if (use_pidfd_) {
    watched.pidfd = pidfd_open(pid);
    if (watched.pidfd < 0) {
      const int error_number = errno;
      if (error_number == ESRCH) {
        return std::nullopt;
      }
      throw Error(ErrorKind::kOperatingSystem,
                  fmt::format("cannot watch process {}: pidfd_open failed: {}", pid,
                              errno_text(error_number)));
    }
    return watched;
  }
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (stat) {
    if (is_dead_state(stat->state)) {
      return std::nullopt;
    }
    watched.start_time = stat->start_time;
  } else if (kill(pid, 0) != 0 && errno == ESRCH) {
    return std::nullopt;
  }
  return watched;
}

bool ProcessWatcher::watch(pid_t pid) {
  {
    std::lock_guard lock(mutex_);
    const auto it = watched_.find(pid);
    if (it != watched_.end()) {
      if (it->second.exited) {
        return false;
      }
      it->second.unwatched = false;
      return true;
    }
    std::optional<Watched> watched = open(pid);
    if (!watched) {
      return false;
    }
    watched_.emplace(pid, *watched);
  }
  wake();  // so that the thread polls it
  return true;
}

void ProcessWatcher::unwatch(pid_t pid) {
  {
    std::lock_guard lock(mutex_);
    const auto it = watched_.find(pid);
    if (it == watched_.end() || it->second.unwatched) {
      return;
    }
    it->second.unwatched = true;
  }
  wake();  // so that it closes the pidfd
}

void ProcessWatcher::stop() {
  if (!thread_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
}

void ProcessWatcher::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof(one));
}

void ProcessWatcher::run() {
  while (true) {
    std::vector<pollfd> poll_fds{{wake_fd_, POLLIN, 0}};
    std::vector<pid_t> poll_pids{0};  // parallel to poll_fds
    std::vector<std::pair<pid_t, std::optional<std::uint64_t>>> polled;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        return;
      }
      for (auto it = watched_.begin(); it != watched_.end();) {
        Watched& watched = it->second;
        if (watched.unwatched) {
          if (watched.pidfd >= 0) {
            close(watched.pidfd);
          }
          it = watched_.erase(it);
          continue;
        }
        if (!watched.exited) {  // an exited one waits for unwatch()
          if (watched.pidfd >= 0) {
            poll_fds.push_back({watched.pidfd, POLLIN, 0});
            poll_pids.push_back(it->first);
          } else {
            polled.emplace_back(it->first, watched.start_time);
          }
        }
        ++it;
      }
    }

    const int timeout_ms = polled.empty() ? -1 : options_.poll_interval_ms;
    const int ready = poll(poll_fds.data(), poll_fds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      log().error("{}: poll failed: {}; owner watching stops", options_.name, errno_text(errno));
      return;
    }
    if ((poll_fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t got = read(wake_fd_, &count, sizeof(count));
    }
    std::vector<pid_t> dead_pids;
    for (std::size_t i = 1; i < poll_fds.size(); ++i) {
      if (poll_fds[i].revents != 0) {  // POLLIN on exit; POLLERR/POLLHUP count as gone too
        dead_pids.push_back(poll_pids[i]);
      }
    }
    for (const auto& [pid, start_time] : polled) {
      if (!process_alive(pid, start_time)) {
        dead_pids.push_back(pid);
      }
    }
    std::vector<pid_t> exited_pids;
    if (!dead_pids.empty()) {
      std::lock_guard lock(mutex_);
      for (const pid_t pid : dead_pids) {
        const auto it = watched_.find(pid);
        if (it == watched_.end() || it->second.exited) {
          continue;
        }
        it->second.exited = true;  // refused by watch() from now on, unwatched or not
        if (!it->second.unwatched) {
          exited_pids.push_back(pid);
        }
      }
    }
    for (const pid_t pid : exited_pids) {
      on_exit_(pid);
    }
  }
}

}  // namespace zeus::daemon
