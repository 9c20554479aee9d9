// Restoring power limits on SIGINT/SIGTERM. Nothing but write() happens in the signal handler;
// a watcher thread does the work and then lets the signal take its course.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<int, std::pair<std::vector<std::shared_ptr<Gpu>>, std::uint32_t>> entries;
  int next_handle = 0;
  bool installed = false;
  int pipe_fds[2] = {-1, -1};
  struct sigaction previous_int {};
  struct sigaction previous_term {};
};

// Never destroyed: the watcher thread and the handler may outlive static destruction.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

// Global so that the handler touches nothing but a file descriptor.
int g_write_fd = -1;

void on_signal(int signal_number) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t written = write(g_write_fd, &byte, 1);
  errno = saved_errno;
}

void restore_all() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto& [handle, entry] : r.entries) {
    for (const auto& gpu : entry.first) {
      try {
        gpu->set_power_limit_mw(entry.second);
      } catch (const std::exception& error) {
        log().error("could not restore a power limit on signal: {}", error.what());
      }
    }
  }
}

void watch() {
  Registry& r = registry();
  while (true) {
    unsigned char byte = 0;
    const ssize_t got = read(r.pipe_fds[0], &byte, 1);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return;
    }
    const int signal_number = byte;
    restore_all();
    // Let the signal do what it would have done without us: the previous handler, or the
    // default action (termination), by putting the old disposition back and sending it again.
    const struct sigaction& previous = signal_number == SIGINT ? r.previous_int : r.previous_term;
    if (previous.sa_handler == SIG_IGN) {
      continue;
    }
    sigaction(signal_number, &previous, nullptr);
    kill(getpid(), signal_number);
    // Our handler is gone for this signal; the GPUs were restored once, which is what matters.
  }
}

void install_locked(Registry& r) {
  if (r.installed) {
    return;
  }
  if (pipe2(r.pipe_fds, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::kOperatingSystem,
                "cannot create the signal pipe for power-limit restore");
  }
  g_write_fd = r.pipe_fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &r.previous_int);
  sigaction(SIGTERM, &action, &r.previous_term);
  // A process that ignores a signal keeps ignoring it.
  if (r.previous_int.sa_handler == SIG_IGN) {
    sigaction(SIGINT, &r.previous_int, nullptr);
  }
  if (r.previous_term.sa_handler == SIG_IGN) {
    sigaction(SIGTERM, &r.previous_term, nullptr);
  }
  std::thread(watch).detach();
  r.installed = true;
}

}  // namespace

int PowerLimitRestorer::register_gpus(std::vector<std::shared_ptr<Gpu>> gpus,
                                      std::uint32_t power_limit_mw) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  install_locked(r);
  const int handle = r.next_handle++;
  r.entries[handle] = {std::move(gpus), power_limit_mw};
  return handle;
}

void PowerLimitRestorer::unregister(int handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.entries.erase(handle);
}

}  // namespace zeus
