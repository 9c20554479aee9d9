// The daemon's settings ledger: which GPU settings a client process changed, what they were
// before, and restoring them when that process exits (or on SIGTERM).
//
// Protocol for the daemon, for every write on behalf of a peer (pid from SO_PEERCRED):
//   1. take the GPU's write lock (the same one `LedgerOptions::gpu_serializer` takes);
//   2. read the current value and call record_change(gpu, setting, current, peer_pid);
//      if it throws (the peer has already exited), reply with the error and do NOT write;
//   3. write the new value; release the lock.
// For an explicit reset request: reset under the lock, then call record_reset().
//
// Rules:
// - Each setting keeps a stack of changes, one layer per writer in the order they wrote, each
//   with the value in force before that writer's change. A writer that is already the top layer
//   adds nothing (its layer keeps the value before its first change).
// - When an owner exits, each of its layers goes: the top one is undone (the setting returns to
//   the value before that owner's change, i.e. the value of the writer below, still alive), a
//   lower one is dropped and the layer above it inherits its "before" value. So a setting always
//   ends at its state before the daemon first touched it once every writer is gone, and while
//   an earlier writer lives, a later writer's exit gives the setting back to it (a Slurm job's cap
//   survives a training process inside the job that set and left its own limit).
// - An explicit reset (by any client) removes the whole stack: the setting is then at its driver
//   default by request, and nobody holds it changed any more.
// - Owners are watched for their exit by a ProcessWatcher (process_watcher.hpp: a pidfd each, or
//   /proc polling every `poll_interval_ms` without pidfd_open); their settings are restored as
//   soon as it reports the exit (well within one second).
// - A peer that has already exited at record time (reaped, or, in the fallback, a zombie) is
//   refused: record_change throws Error(kNotFound) so that the daemon makes no change nobody
//   owns. A zombie seen through a pidfd is accepted and restored at once after the write.
// - If the write fails after record_change, the entry stays; restoring it later writes the value
//   that is already in force, which is harmless.
// - With `enabled = false` (zeusd --no-restore) nothing is recorded and no thread runs.
// - The destructor stops the watcher and restores nothing: call restore_all() on SIGTERM.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/process_watcher.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::daemon {

enum class Setting {
  kPowerLimit,          // SettingValue::power_limit_mw
  kGpuLockedClocks,     // SettingValue::locked_clocks_mhz
  kMemoryLockedClocks,  // SettingValue::locked_clocks_mhz
  kPersistenceMode,     // SettingValue::persistence_mode
};

// "power_limit", "gpu_locked_clocks", "memory_locked_clocks", "persistence_mode".
std::string_view setting_name(Setting setting);

struct ClockRangeMhz {
  std::uint32_t min_mhz = 0;
  std::uint32_t max_mhz = 0;
  bool operator==(const ClockRangeMhz&) const = default;
};

// A setting's value; only the field that belongs to the Setting is meaningful.
struct SettingValue {
  std::uint32_t power_limit_mw = 0;
  // Locked clocks; nullopt = not locked (restored with reset_*_locked_clocks()). The Gpu
  // interface cannot read locked clocks back, so the daemon normally records nullopt.
  std::optional<ClockRangeMhz> locked_clocks_mhz;
  bool persistence_mode = false;

  static SettingValue power_limit(std::uint32_t power_limit_mw);
  static SettingValue locked_clocks(std::optional<ClockRangeMhz> clocks_mhz);
  static SettingValue persistence(bool enabled);
  bool operator==(const SettingValue&) const = default;
};

// "250000 mW", "unlocked", "1000-1500 MHz", "on", "off".
std::string describe_setting_value(Setting setting, const SettingValue& value);

// Writes `value` of `setting` to `gpu` through the Gpu interface.
void apply_setting(device::Gpu& gpu, Setting setting, const SettingValue& value);

// One changed setting: its value before the daemon first touched it, and its latest writer.
struct LedgerEntry {
  int gpu_index = 0;
  Setting setting = Setting::kPowerLimit;
  SettingValue original;
  pid_t owner_pid = 0;
  std::size_t layers = 1;  // how many writers hold it changed (the stack's depth)
};

// Runs `action` (a restore on GPU `gpu_index`) under the daemon's per-GPU write lock.
using GpuSerializer = std::function<void(int gpu_index, const std::function<void()>& action)>;

struct LedgerOptions {
  bool enabled = true;  // false: zeusd --no-restore
  // Defaults to running the action directly.
  GpuSerializer gpu_serializer;
  // Use the /proc + kill(pid, 0) polling fallback even when pidfd_open works (for tests).
  bool force_polling = false;
  int poll_interval_ms = 200;
};

class SettingsLedger {
 public:
  // `gpus[i]` is the GPU the daemon calls index i. Starts the process watcher when enabled.
  SettingsLedger(std::vector<std::shared_ptr<device::Gpu>> gpus, LedgerOptions options = {});
  ~SettingsLedger();
  SettingsLedger(const SettingsLedger&) = delete;
  SettingsLedger& operator=(const SettingsLedger&) = delete;

  bool enabled() const { return options_.enabled; }
  // True when owners are watched with pidfds, false in the polling fallback (or disabled).
  bool uses_pidfd() const { return watcher_ && watcher_->uses_pidfd(); }

  // Call before writing `setting` on `gpu_index` for `owner_pid`, with the value in force now.
  // Throws Error(kInvalidArgument) for a bad index or pid, Error(kNotFound) when the owner has
  // already exited, Error(kOperatingSystem) when the owner cannot be watched. No-op if disabled.
  void record_change(int gpu_index, Setting setting, const SettingValue& original_value,
                     pid_t owner_pid);
  // Call after an explicit reset of `setting` on `gpu_index` requested by `requester_pid`.
  // Returns whether an entry was removed.
  bool record_reset(int gpu_index, Setting setting, pid_t requester_pid);

  // Restores every recorded setting (through the serializer) and forgets them: for SIGTERM and
  // shutdown. Returns how many settings were restored successfully.
  std::size_t restore_all();

  // A snapshot, ordered by GPU index then setting.
  std::vector<LedgerEntry> entries() const;
  // Total number of settings restored so far (on owner exit and by restore_all()).
  std::size_t restored_count() const;

 private:
  struct Key {
    int gpu_index;
    Setting setting;
    auto operator<=>(const Key&) const = default;
  };
  struct Layer {
    SettingValue before;  // in force before this owner's change
    pid_t owner_pid;
  };
  using Entry = std::vector<Layer>;  // bottom (first writer) to top (latest writer)

  // On the watcher's thread: restores the settings `pid` owns.
  void on_owner_exit(pid_t pid);
  // Under the GPU's serializer: undoes the layers on `gpu_index` owned by `owner_pid` (every
  // setting to its original when nullopt). Returns how many settings were written back.
  std::size_t restore_on_gpu(int gpu_index, std::optional<pid_t> owner_pid, std::string_view why);
  void serialize(int gpu_index, const std::function<void()>& action);
  // With mutex_ held: one layer fewer for `pid`; its last one unwatches it.
  void release_owner_locked(pid_t pid);

  const std::vector<std::shared_ptr<device::Gpu>> gpus_;
  const LedgerOptions options_;

  mutable std::mutex mutex_;  // taken before the watcher's own lock, never after
  std::map<Key, Entry> entries_;
  std::map<pid_t, std::size_t> owner_entry_counts_;  // the watched owners, with their layers
  std::size_t restored_count_ = 0;
  std::unique_ptr<ProcessWatcher> watcher_;  // null when disabled
};

}  // namespace zeus::daemon
