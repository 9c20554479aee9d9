// The process-wide registry behind PowerLimitOptimizer's restoring of power limits. Internal:
// users program against the optimizer, which registers and releases itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zeus/device/gpu.hpp"

namespace zeus::runtime {

// The process-wide registry of live optimizers per GPU (guarded by a mutex), and the restoring
// of power limits. A GPU is set back to its maximum only when the last live optimizer over it
// goes away (or on SIGINT/SIGTERM, for optimizers that ask), and only when its limit is still the
// one an optimizer set last: a limit changed since by someone else is left alone, and a live
// optimizer's limit is never undone by another one going away. The newest live optimizer over a
// GPU is its owner. On a signal the handler only writes to a pipe; a watcher thread restores and
// then lets the signal take its course (the previous handler, or the default action).
class PowerLimitRestorer {
 public:
  // Registers a live optimizer over `gpus` whose maximum is `restore_mw`; returns its handle.
  static int register_gpus(const std::vector<std::shared_ptr<device::Gpu>>& gpus,
                           std::uint32_t restore_mw, bool restore_on_signal);
  // Sets the limit on the handle's GPUs and records it as the one an optimizer set last.
  static void set_power_limit(int handle, std::uint32_t power_limit_mw);
  // The handle of the newest live optimizer managing `gpu`, if any.
  static std::optional<int> owner(const device::Gpu& gpu);
  // Unregisters the optimizer, restoring by the rule above each GPU no other one manages.
  static void release(int handle);
};

}  // namespace zeus::runtime
