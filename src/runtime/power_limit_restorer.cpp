// The process-wide registry of live power-limit optimizers, and restoring power limits when an
// optimizer goes away or the process is stopped by SIGINT/SIGTERM.
//
// Several optimizers may manage the same GPU at once (a notebook cell re-run rebinds the variable:
// the new optimizer exists before the old one is collected). Restoring the maximum whenever any of
// them goes away would undo the limit the live one just chose, so a GPU is restored only by the
// last optimizer over it to go, and only when its limit is still the one an optimizer set last
// (nobody changed it by hand or with another tool since).
//
// On a signal a SignalWatch (nothing but write() in its handler) wakes a watcher thread, which
// restores by the same rule and then lets the signal take its course.
#include "runtime/power_limit_restorer.hpp"

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

// One GPU that at least one live optimizer manages.
struct ManagedGpu {
  std::shared_ptr<device::Gpu> gpu;  // keeps the object (and so its address, the key) alive
  std::uint32_t restore_mw = 0;
  std::uint32_t last_set_mw = 0;  // the limit an optimizer set last (0: none has set one yet)
  int last_setter = -1;           // which optimizer set it
};

struct Optimizer {
  std::vector<const device::Gpu*> gpus;
  bool restore_on_signal = false;
};

struct Registry {
  std::mutex mutex;
  std::map<int, Optimizer> optimizers;  // live optimizers; a larger handle is a newer optimizer
  std::map<const device::Gpu*, ManagedGpu> gpus;
  int next_handle = 0;
  SignalWatch* watch = nullptr;  // made at the first registration that asks, never destroyed
};

// Never destroyed: the watcher thread and the handler may outlive static destruction.
Registry& registry() {
  static Registry* instance = new Registry;
  return *instance;
}

int live_optimizers_of(const Registry& r, const device::Gpu* gpu, int except_handle) {
  int count = 0;
  for (const auto& [handle, optimizer] : r.optimizers) {
    if (handle == except_handle) {
      continue;
    }
    for (const device::Gpu* managed : optimizer.gpus) {
      if (managed == gpu) {
        ++count;
        break;
      }
    }
  }
  return count;
}

// Sets the GPU back to its maximum when its limit is still the one an optimizer set last.
void restore_if_unchanged(const ManagedGpu& managed, const char* when) {
  if (managed.last_set_mw == 0) {
    return;  // no optimizer set anything: nothing to undo
  }
  try {
    std::uint32_t current_mw = 0;
    bool known = true;
    try {
      current_mw = managed.gpu->power_limit_mw();
    } catch (const std::exception& error) {
      // Cannot tell whether someone changed it: undo what we set, as before this rule existed.
      log().debug("cannot read the power limit before restoring it: {}", error.what());
      known = false;
    }
    if (known && current_mw != managed.last_set_mw) {
      log().info(
          "not restoring the power limit {}: it is {} mW, not the {} mW the optimizer set "
          "(changed by someone else since)",
          when, current_mw, managed.last_set_mw);
      return;
    }
    managed.gpu->set_power_limit_mw(managed.restore_mw);
  } catch (const std::exception& error) {
    log().error("could not restore the maximum power limit {}: {}", when, error.what());
  }
}

void restore_on_signal() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::map<const device::Gpu*, bool> wanted;
  for (const auto& [handle, optimizer] : r.optimizers) {
    if (optimizer.restore_on_signal) {
      for (const device::Gpu* gpu : optimizer.gpus) {
        wanted[gpu] = true;
      }
    }
  }
  for (const auto& [gpu, unused] : wanted) {
    restore_if_unchanged(r.gpus.at(gpu), "on a signal");
  }
}

void watch(SignalWatch& signals) {
  while (true) {
    const std::optional<int> signal_number = signals.next_signal(std::nullopt);
    if (!signal_number) {
      continue;
    }
    restore_on_signal();
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

int PowerLimitRestorer::register_gpus(const std::vector<std::shared_ptr<device::Gpu>>& gpus,
                                      std::uint32_t restore_mw, bool restore_on_signal) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (restore_on_signal) {
    install_locked(r);
  }
  const int handle = r.next_handle++;
  Optimizer& optimizer = r.optimizers[handle];
  optimizer.restore_on_signal = restore_on_signal;
  for (const auto& gpu : gpus) {
    optimizer.gpus.push_back(gpu.get());
    ManagedGpu& managed = r.gpus[gpu.get()];
    managed.gpu = gpu;
    managed.restore_mw = restore_mw;
  }
  return handle;
}

void PowerLimitRestorer::set_power_limit(int handle, std::uint32_t power_limit_mw) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const device::Gpu* gpu : r.optimizers.at(handle).gpus) {
    ManagedGpu& managed = r.gpus.at(gpu);
    managed.gpu->set_power_limit_mw(power_limit_mw);
    managed.last_set_mw = power_limit_mw;
    managed.last_setter = handle;
  }
}

std::optional<int> PowerLimitRestorer::owner(const device::Gpu& gpu) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::optional<int> newest;
  for (const auto& [handle, optimizer] : r.optimizers) {
    for (const device::Gpu* managed : optimizer.gpus) {
      if (managed == &gpu) {
        newest = handle;
      }
    }
  }
  return newest;
}

void PowerLimitRestorer::release(int handle) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto entry = r.optimizers.find(handle);
  if (entry == r.optimizers.end()) {
    return;
  }
  for (const device::Gpu* gpu : entry->second.gpus) {
    if (live_optimizers_of(r, gpu, handle) > 0) {
      continue;  // another live optimizer manages this GPU: its limit stands
    }
    const auto managed = r.gpus.find(gpu);
    if (managed != r.gpus.end()) {
      restore_if_unchanged(managed->second, "as the optimizer goes away");
      r.gpus.erase(managed);
    }
  }
  r.optimizers.erase(entry);
}

}  // namespace zeus::runtime
