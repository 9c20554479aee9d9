// Restoring power limits on SIGINT/SIGTERM. A SignalWatch (nothing but write() in its handler)
// wakes a watcher thread, which does the work and then lets the signal take its course.
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "zeus/common/error.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus::runtime {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<int, std::pair<std::vector<std::shared_ptr<device::Gpu>>, std::uint32_t>> entries;
  int next_handle = 0;
  SignalWatch* watch = nullptr;  // made at the first registration, never destroyed
};

// Never destroyed: the watcher thread and the handler may outlive static destruction.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
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

void watch(SignalWatch& signals) {
  while (true) {
    const std::optional<int> signal_number = signals.next_signal(std::nullopt);
    if (!signal_number) {
      continue;
    }
    restore_all();
    // Let the signal do what it would have done without us: the previous handler, or the
    // default action (termination). Our handler is gone for this signal then; the GPUs were
    // restored once, which is what matters.
    SignalWatch::reraise(*signal_number);
  }
}

void install_locked(Registry& r) {
  if (r.watch != nullptr) {
    return;
  }
  // A process that ignores a signal keeps ignoring it.
  r.watch = new SignalWatch(SignalWatchOptions{.keep_ignored = true});
  std::thread(watch, std::ref(*r.watch)).detach();
}

}  // namespace

int PowerLimitRestorer::register_gpus(std::vector<std::shared_ptr<device::Gpu>> gpus,
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

}  // namespace zeus::runtime
