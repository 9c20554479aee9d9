// The settings ledger: records, pidfd watching, restoring. See ledger.hpp for the rules.
#include "daemon/ledger.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "common/log.hpp"
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

struct ProcStat {
  char state = '?';
  std::uint64_t start_time = 0;  // clock ticks after boot
};

// Fields 3 (state) and 22 (starttime) of the /proc/<pid>/stat opened as `file`; nullopt when it
// cannot be read.
std::optional<ProcStat> parse_proc_stat(std::ifstream& file) {
  if (!file) {
    return std::nullopt;
  }
  std::string text;
  try {
    // libstdc++ throws from the read when the process exits after the open (ESRCH); that is an
    // unreadable file like any other, not a reason to end the watcher thread (and the daemon).
    text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // The command name (field 2) is in parentheses and may itself contain ") ".
  const std::size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(text.substr(close_paren + 1));
  ProcStat stat;
  std::string field;
  fields >> stat.state;  // field 3
  for (int number = 4; number < 22; ++number) {
    fields >> field;
  }
  if (!(fields >> stat.start_time)) {
    return std::nullopt;
  }
  return stat;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  return parse_proc_stat(file);
}

bool is_dead_state(char state) {
  return state == 'Z' || state == 'X' || state == 'x';
}

// The polling fallback's liveness test.
bool process_alive(pid_t pid, const std::optional<std::uint64_t>& start_time) {
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (stat) {
    return !is_dead_state(stat->state) && (!start_time || stat->start_time == *start_time);
  }
  if (start_time) {
    return false;  // /proc worked when the owner was recorded: the process is gone
  }
  return kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

std::optional<char> proc_stat_state(std::ifstream& opened_stat_file) {
  const std::optional<ProcStat> stat = parse_proc_stat(opened_stat_file);
  if (!stat) {
    return std::nullopt;
  }
  return stat->state;
}

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
  if (options_.poll_interval_ms <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("settings ledger: poll interval must be positive, got {} ms",
                            options_.poll_interval_ms));
  }
  if (!options_.force_polling) {
    const int probe_fd = pidfd_open(getpid());
    if (probe_fd >= 0) {
      close(probe_fd);
      use_pidfd_ = true;
    } else {
      log().warn(
          "settings ledger: pidfd_open unavailable ({}); watching owners by polling every {} ms",
          errno_text(errno), options_.poll_interval_ms);
    }
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    throw Error(ErrorKind::kOperatingSystem,
                "settings ledger: eventfd failed: " + errno_text(errno));
  }
  watcher_ = std::thread([this] { run_watcher(); });
}

SettingsLedger::~SettingsLedger() {
  if (watcher_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_watcher();
    watcher_.join();
  }
  for (auto& [pid, owner] : owners_) {
    if (owner.pidfd >= 0) {
      close(owner.pidfd);
    }
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
  }
  if (!entries_.empty()) {
    log().warn("settings ledger: stopped with {} setting(s) still changed (not restored)",
               entries_.size());
  }
}

SettingsLedger::Owner SettingsLedger::watch_owner(pid_t pid) {
  Owner owner;
  if (use_pidfd_) {
    owner.pidfd = pidfd_open(pid);
    if (owner.pidfd < 0) {
      const int error_number = errno;
      if (error_number == ESRCH) {
        throw Error(
            ErrorKind::kNotFound,
            fmt::format("process {} has already exited; refusing a change it would own", pid));
      }
      throw Error(ErrorKind::kOperatingSystem,
                  fmt::format("cannot watch process {}: pidfd_open failed: {}", pid,
                              errno_text(error_number)));
    }
    return owner;
  }
  const std::optional<ProcStat> stat = read_proc_stat(pid);
  if (stat) {
    if (is_dead_state(stat->state)) {
      throw Error(
          ErrorKind::kNotFound,
          fmt::format("process {} has already exited; refusing a change it would own", pid));
    }
    owner.start_time = stat->start_time;
  } else if (kill(pid, 0) != 0 && errno == ESRCH) {
    throw Error(ErrorKind::kNotFound,
                fmt::format("process {} has already exited; refusing a change it would own", pid));
  }
  return owner;
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
  bool new_owner = false;
  {
    std::lock_guard lock(mutex_);
    auto owner_it = owners_.find(owner_pid);
    if (owner_it == owners_.end()) {
      owner_it = owners_.emplace(owner_pid, watch_owner(owner_pid)).first;
      new_owner = true;
    } else if (owner_it->second.exited) {
      throw Error(
          ErrorKind::kNotFound,
          fmt::format("process {} has already exited; refusing a change it would own", owner_pid));
    }
    const Key key{gpu_index, setting};
    auto entry_it = entries_.find(key);
    if (entry_it == entries_.end()) {
      entries_.emplace(key, Entry{original_value, owner_pid});
      ++owner_it->second.entry_count;
      log().info("settings ledger: GPU {} {} changed by pid {}; original {} recorded", gpu_index,
                 setting_name(setting), owner_pid, describe_setting_value(setting, original_value));
    } else if (entry_it->second.owner_pid != owner_pid) {
      const pid_t previous_pid = entry_it->second.owner_pid;
      entry_it->second.owner_pid = owner_pid;
      ++owner_it->second.entry_count;
      release_owner_locked(previous_pid);
      log().info(
          "settings ledger: GPU {} {} changed by pid {}; ownership passes from pid {}, "
          "original stays {}",
          gpu_index, setting_name(setting), owner_pid, previous_pid,
          describe_setting_value(setting, entry_it->second.original));
    }
  }
  if (new_owner) {
    wake_watcher();
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
  const pid_t owner_pid = entry_it->second.owner_pid;
  log().info("settings ledger: GPU {} {} reset by pid {}{}; no longer restored", gpu_index,
             setting_name(setting), requester_pid,
             owner_pid == requester_pid ? std::string(" (its owner)")
                                        : fmt::format(" (owner was pid {})", owner_pid));
  entries_.erase(entry_it);
  release_owner_locked(owner_pid);
  return true;
}

void SettingsLedger::release_owner_locked(pid_t pid) {
  const auto owner_it = owners_.find(pid);
  if (owner_it != owners_.end() && owner_it->second.entry_count > 0 &&
      --owner_it->second.entry_count == 0) {
    wake_watcher();  // so that it closes the pidfd
  }
}

void SettingsLedger::wake_watcher() {
  if (wake_fd_ < 0) {
    return;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof(one));
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
    std::vector<std::pair<Key, Entry>> taken;
    {
      std::lock_guard lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->first.gpu_index == gpu_index &&
            (!owner_pid || it->second.owner_pid == *owner_pid)) {
          taken.emplace_back(*it);
          release_owner_locked(it->second.owner_pid);
          it = entries_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const auto& [key, entry] : taken) {
      const std::string value = describe_setting_value(key.setting, entry.original);
      try {
        apply_setting(*gpus_[static_cast<std::size_t>(key.gpu_index)], key.setting, entry.original);
        ++restored;
        log().info("settings ledger: restored GPU {} {} to {} ({}; owner pid {})", key.gpu_index,
                   setting_name(key.setting), value, why, entry.owner_pid);
      } catch (const std::exception& error) {
        log().error("settings ledger: could not restore GPU {} {} to {} ({}; owner pid {}): {}",
                    key.gpu_index, setting_name(key.setting), value, why, entry.owner_pid,
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
  for (const auto& [key, entry] : entries_) {
    result.push_back(LedgerEntry{key.gpu_index, key.setting, entry.original, entry.owner_pid});
  }
  return result;
}

std::size_t SettingsLedger::restored_count() const {
  std::lock_guard lock(mutex_);
  return restored_count_;
}

void SettingsLedger::run_watcher() {
  while (true) {
    std::vector<pid_t> exited_pids;
    std::vector<pollfd> poll_fds{{wake_fd_, POLLIN, 0}};
    std::vector<pid_t> poll_pids{0};  // parallel to poll_fds
    std::vector<std::pair<pid_t, std::optional<std::uint64_t>>> polled_owners;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        return;
      }
      for (auto it = owners_.begin(); it != owners_.end();) {
        Owner& owner = it->second;
        if (owner.entry_count == 0) {
          // Only this thread closes pidfds, so none is closed while poll() watches it.
          if (owner.pidfd >= 0) {
            close(owner.pidfd);
          }
          it = owners_.erase(it);
          continue;
        }
        if (owner.exited) {
          exited_pids.push_back(it->first);
        } else if (owner.pidfd >= 0) {
          poll_fds.push_back({owner.pidfd, POLLIN, 0});
          poll_pids.push_back(it->first);
        } else {
          polled_owners.emplace_back(it->first, owner.start_time);
        }
        ++it;
      }
    }

    if (!exited_pids.empty()) {
      for (const pid_t pid : exited_pids) {
        std::set<int> gpu_indices;
        {
          std::lock_guard lock(mutex_);
          for (const auto& [key, entry] : entries_) {
            if (entry.owner_pid == pid) {
              gpu_indices.insert(key.gpu_index);
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
              if (it->first.gpu_index == gpu_index && it->second.owner_pid == pid) {
                release_owner_locked(pid);
                it = entries_.erase(it);
              } else {
                ++it;
              }
            }
          }
        }
      }
      continue;  // the emptied owners are closed at the top of the loop
    }

    const int timeout_ms = polled_owners.empty() ? -1 : options_.poll_interval_ms;
    const int ready = poll(poll_fds.data(), poll_fds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      log().error("settings ledger: poll failed: {}; owner watching stops", errno_text(errno));
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
    for (const auto& [pid, start_time] : polled_owners) {
      if (!process_alive(pid, start_time)) {
        dead_pids.push_back(pid);
      }
    }
    if (!dead_pids.empty()) {
      std::lock_guard lock(mutex_);
      for (const pid_t pid : dead_pids) {
        const auto owner_it = owners_.find(pid);
        if (owner_it != owners_.end()) {
          owner_it->second.exited = true;
        }
      }
    }
  }
}

}  // namespace zeus::daemon
