// zeusd's GPU write path: one worker thread per GPU, so that writes to a GPU (the clients', and
// the ledger's restores through run_serialized) run one at a time, in arrival order, each
// reported to the hooks with its typed setting and values.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/config.hpp"
#include "daemon/reply.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

// A change to one GPU (a request makes the same one on each of its GPUs), validated already.
struct GpuWrite {
  // For the logs: setting_field(settings[0]), or "locked_clocks_mhz" for both clock domains.
  std::string field;
  // The settings it changes: one, or both locked-clock settings (/gpu/reset_locked_clocks).
  std::vector<Setting> settings;
  // The new value of settings[0] (written with apply_setting); nullopt: a reset, done by `reset`.
  std::optional<SettingValue> value;
  std::function<void(device::Gpu&)> reset;
};

// The value of `setting` in force on `gpu` now, as restoring it would write it (locked clocks
// cannot be read back: "not locked").
SettingValue current_value(device::Gpu& gpu, Setting setting);

class GpuWriters {
 public:
  // `gpus` must outlive this. The hooks run on the GPU's worker (see DaemonHooks).
  GpuWriters(device::Gpus& gpus, WriteHook before_write, WriteHook on_write);
  // Finishes every queued task, then joins the workers.
  ~GpuWriters();
  GpuWriters(const GpuWriters&) = delete;
  GpuWriters& operator=(const GpuWriters&) = delete;

  // Runs `action` on GPU `gpu_index`'s worker and waits for it, rethrowing what it throws.
  // Error(kInvalidArgument) for an index without a GPU. Never call it from a hook.
  void run_serialized(int gpu_index, const std::function<void()>& action);

  // Queues `write` on GPU `gpu_index`'s worker: before_write for each setting, the device call,
  // then on_write for each. The future gives the failure (nullopt: written).
  std::future<std::optional<DeviceFailure>> submit(int gpu_index, GpuWrite write,
                                                   PeerCredentials peer);

 private:
  class Worker;
  void write_now(int gpu_index, const GpuWrite& write, const PeerCredentials& peer);

  device::Gpus& gpus_;
  WriteHook before_write_;
  WriteHook on_write_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace zeus::daemon
