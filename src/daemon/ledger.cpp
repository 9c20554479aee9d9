// The settings ledger: records, restoring when an owner exits. See ledger.hpp for the rules.
#include "daemon/ledger.hpp"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "common/log.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {

std::string_view setting_name(Setting setting) {
  switch (setting) {
    case Setting::kPowerLimit:
      return "power_limit";
    case Setting::kGpuLockedClocks:
      return "gpu_locked_clocks";
    case Setting::kMemoryLockedClocks:
      return "memory_locked_clocks";
    case Setting::kPersistenceMode:
      return "persistence_mode";
  }
  return "unknown";
}

SettingValue SettingValue::power_limit(std::uint32_t power_limit_mw) {
  SettingValue value;
  value.power_limit_mw = power_limit_mw;
  return value;
}

SettingValue SettingValue::locked_clocks(std::optional<ClockRangeMhz> clocks_mhz) {
  SettingValue value;
  value.locked_clocks_mhz = clocks_mhz;
  return value;
}

SettingValue SettingValue::persistence(bool enabled) {
  SettingValue value;
  value.persistence_mode = enabled;
  return value;
}

std::string describe_setting_value(Setting setting, const SettingValue& value) {
  switch (setting) {
    case Setting::kPowerLimit:
      return fmt::format("{} mW", value.power_limit_mw);
    case Setting::kGpuLockedClocks:
    case Setting::kMemoryLockedClocks:
      if (!value.locked_clocks_mhz) {
        return "unlocked";
      }
      return fmt::format("{}-{} MHz", value.locked_clocks_mhz->min_mhz,
                         value.locked_clocks_mhz->max_mhz);
    case Setting::kPersistenceMode:
      return value.persistence_mode ? "on" : "off";
  }
  return "?";
}

void apply_setting(device::Gpu& gpu, Setting setting, const SettingValue& value) {
  switch (setting) {
    case Setting::kPowerLimit:
      gpu.set_power_limit_mw(value.power_limit_mw);
      return;
    case Setting::kGpuLockedClocks:
      if (value.locked_clocks_mhz) {
        gpu.set_gpu_locked_clocks_mhz(value.locked_clocks_mhz->min_mhz,
                                      value.locked_clocks_mhz->max_mhz);
      } else {
        gpu.reset_gpu_locked_clocks();
      }
      return;
    case Setting::kMemoryLockedClocks:
      if (value.locked_clocks_mhz) {
        gpu.set_memory_locked_clocks_mhz(value.locked_clocks_mhz->min_mhz,
                                         value.locked_clocks_mhz->max_mhz);
      } else {
        gpu.reset_memory_locked_clocks();
      }
      return;
    case Setting::kPersistenceMode:
      gpu.set_persistence_mode(value.persistence_mode);
      return;
  }
}

SettingsLedger::SettingsLedger(std::vector<std::shared_ptr<device::Gpu>> gpus,
                               LedgerOptions options)
    : gpus_(std::move(gpus)), options_(std::move(options)) {
  if (!options_.enabled) {
    log().info("settings ledger: restore on owner exit is off (--no-restore)");
    return;
  }
  ProcessWatcherOptions watcher_options;
  watcher_options.name = "settings ledger";
  watcher_options.force_polling = options_.force_polling;
  watcher_options.poll_interval_ms = options_.poll_interval_ms;
  watcher_ = std::make_unique<ProcessWatcher>(std::move(watcher_options),
                                              [this](pid_t pid) { on_owner_exit(pid); });
}

SettingsLedger::~SettingsLedger() {
  if (watcher_) {
    watcher_->stop();  // its thread restores on this ledger (and unwatches): stopped first
  }
  if (!entries_.empty()) {
    log().warn("settings ledger: stopped with {} setting(s) still changed (not restored)",
               entries_.size());
  }
}

void SettingsLedger::record_change(int gpu_index, Setting setting,
                                   const SettingValue& original_value, pid_t owner_pid) {
  if (!options_.enabled) {
    return;
  }
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= gpus_.size()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("settings ledger: GPU index {} out of range (0..{})", gpu_index,
                            static_cast<int>(gpus_.size()) - 1));
  }
  if (owner_pid <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("settings ledger: invalid owner pid {}", owner_pid));
  }
  std::lock_guard lock(mutex_);
  if (!watcher_->watch(owner_pid)) {
    throw Error(
        ErrorKind::kNotFound,
        fmt::format("process {} has already exited; refusing a change it would own", owner_pid));
  }
  const Key key{gpu_index, setting};
  Entry& layers = entries_[key];
  if (!layers.empty() && layers.back().owner_pid == owner_pid) {
    return;  // its layer already holds the value before its first change
  }
  layers.push_back(Layer{original_value, owner_pid});
  ++owner_entry_counts_[owner_pid];
  if (layers.size() == 1) {
    log().info("settings ledger: GPU {} {} changed by pid {}; original {} recorded", gpu_index,
               setting_name(setting), owner_pid, describe_setting_value(setting, original_value));
  } else {
    log().info("settings ledger: GPU {} {} changed by pid {} over pid {}'s {}; original stays {}",
               gpu_index, setting_name(setting), owner_pid, layers[layers.size() - 2].owner_pid,
               describe_setting_value(setting, original_value),
               describe_setting_value(setting, layers.front().before));
  }
}

bool SettingsLedger::record_reset(int gpu_index, Setting setting, pid_t requester_pid) {
  if (!options_.enabled) {
    return false;
  }
  std::lock_guard lock(mutex_);
  const auto entry_it = entries_.find(Key{gpu_index, setting});
  if (entry_it == entries_.end()) {
    return false;
  }
  const pid_t owner_pid = entry_it->second.back().owner_pid;
  log().info("settings ledger: GPU {} {} reset by pid {}{}; no longer restored", gpu_index,
             setting_name(setting), requester_pid,
             owner_pid == requester_pid ? std::string(" (its owner)")
                                        : fmt::format(" (owner was pid {})", owner_pid));
  for (const Layer& layer : entry_it->second) {
    release_owner_locked(layer.owner_pid);
  }
  entries_.erase(entry_it);
  return true;
}

void SettingsLedger::release_owner_locked(pid_t pid) {
  const auto count_it = owner_entry_counts_.find(pid);
  if (count_it != owner_entry_counts_.end() && --count_it->second == 0) {
    owner_entry_counts_.erase(count_it);
    watcher_->unwatch(pid);  // its pidfd is closed
  }
}

void SettingsLedger::serialize(int gpu_index, const std::function<void()>& action) {
  if (options_.gpu_serializer) {
    options_.gpu_serializer(gpu_index, action);
  } else {
    action();
  }
}

std::size_t SettingsLedger::restore_on_gpu(int gpu_index, std::optional<pid_t> owner_pid,
                                           std::string_view why) {
  std::size_t restored = 0;
  serialize(gpu_index, [&] {
    // What to write: the setting, its value, and the owner whose exit undoes it.
    struct Write {
      Setting setting;
      SettingValue value;
      pid_t owner_pid;
    };
    std::vector<Write> writes;
    {
      std::lock_guard lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->first.gpu_index != gpu_index) {
          ++it;
          continue;
        }
        Entry& layers = it->second;
        if (!owner_pid) {
          writes.push_back(
              Write{it->first.setting, layers.front().before, layers.back().owner_pid});
          for (const Layer& layer : layers) {
            release_owner_locked(layer.owner_pid);
          }
          layers.clear();
        } else {
          // Top down: the top layer is undone; a lower one hands its "before" to the one above.
          std::optional<SettingValue> undo;
          for (std::size_t i = layers.size(); i-- > 0;) {
            if (layers[i].owner_pid != *owner_pid) {
              continue;
            }
            if (i + 1 == layers.size()) {
              undo = layers[i].before;
            } else {
              layers[i + 1].before = layers[i].before;
            }
            layers.erase(layers.begin() + static_cast<std::ptrdiff_t>(i));
            release_owner_locked(*owner_pid);
          }
          if (undo) {
            writes.push_back(Write{it->first.setting, *undo, *owner_pid});
          }
        }
        it = layers.empty() ? entries_.erase(it) : std::next(it);
      }
    }
    for (const Write& write : writes) {
      const std::string value = describe_setting_value(write.setting, write.value);
      try {
        apply_setting(*gpus_[static_cast<std::size_t>(gpu_index)], write.setting, write.value);
        ++restored;
        log().info("settings ledger: restored GPU {} {} to {} ({}; owner pid {})", gpu_index,
                   setting_name(write.setting), value, why, write.owner_pid);
      } catch (const std::exception& error) {
        log().error("settings ledger: could not restore GPU {} {} to {} ({}; owner pid {}): {}",
                    gpu_index, setting_name(write.setting), value, why, write.owner_pid,
                    error.what());
      }
    }
    std::lock_guard lock(mutex_);
    restored_count_ += restored;
  });
  return restored;
}

std::size_t SettingsLedger::restore_all() {
  if (!options_.enabled) {
    return 0;
  }
  std::set<int> gpu_indices;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, entry] : entries_) {
      gpu_indices.insert(key.gpu_index);
    }
  }
  std::size_t restored = 0;
  for (const int gpu_index : gpu_indices) {
    try {
      restored += restore_on_gpu(gpu_index, std::nullopt, "restoring all settings");
    } catch (const std::exception& error) {
      log().error("settings ledger: restoring GPU {} failed: {}", gpu_index, error.what());
    }
  }
  log().info("settings ledger: restored {} setting(s) on {} GPU(s)", restored, gpu_indices.size());
  return restored;
}

std::vector<LedgerEntry> SettingsLedger::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<LedgerEntry> result;
  result.reserve(entries_.size());
  for (const auto& [key, layers] : entries_) {
    result.push_back(LedgerEntry{key.gpu_index, key.setting, layers.front().before,
                                 layers.back().owner_pid, layers.size()});
  }
  return result;
}

std::size_t SettingsLedger::restored_count() const {
  std::lock_guard lock(mutex_);
  return restored_count_;
}

void SettingsLedger::on_owner_exit(pid_t pid) {
  std::set<int> gpu_indices;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, layers] : entries_) {
      for (const Layer& layer : layers) {
        if (layer.owner_pid == pid) {
          gpu_indices.insert(key.gpu_index);
        }
      }
    }
  }
  log().info("settings ledger: process {} exited; restoring its settings on {} GPU(s)", pid,
             gpu_indices.size());
  const std::string why = fmt::format("process {} exited", pid);
  for (const int gpu_index : gpu_indices) {
    try {
      restore_on_gpu(gpu_index, pid, why);
    } catch (const std::exception& error) {
      // The serializer itself failed: drop the entries rather than retry forever.
      log().error(
          "settings ledger: restoring GPU {} for pid {} failed: {}; its settings "
          "there are left as they are",
          gpu_index, pid, error.what());
      std::lock_guard lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->first.gpu_index == gpu_index) {
          Entry& layers = it->second;
          for (std::size_t i = layers.size(); i-- > 0;) {
            if (layers[i].owner_pid == pid) {
              layers.erase(layers.begin() + static_cast<std::ptrdiff_t>(i));
              release_owner_locked(pid);
            }
          }
        }
        it = it->second.empty() ? entries_.erase(it) : std::next(it);
      }
    }
  }
}

}  // namespace zeus::daemon
