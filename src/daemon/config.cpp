#include "daemon/config.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace zeus::daemon {

bool DaemonConfig::enabled(ApiGroup group) const {
  return std::find(enabled_groups.begin(), enabled_groups.end(), group) != enabled_groups.end();
}

std::string_view setting_field(Setting setting) {
  switch (setting) {
    case Setting::kPowerLimit:
      return "power_limit_mw";
    case Setting::kPersistenceMode:
      return "persistence_mode";
    case Setting::kGpuLockedClocks:
      return "gpu_locked_clocks_mhz";
    case Setting::kMemoryLockedClocks:
      return "mem_locked_clocks_mhz";
  }
  return "unknown";
}

std::string value_text(Setting setting, const SettingValue& value) {
  switch (setting) {
    case Setting::kPowerLimit:
      return std::to_string(value.power_limit_mw);
    case Setting::kPersistenceMode:
      return value.persistence_mode ? "true" : "false";
    case Setting::kGpuLockedClocks:
    case Setting::kMemoryLockedClocks:
      if (!value.locked_clocks_mhz) {
        return "unknown";
      }
      return fmt::format("{}-{}", value.locked_clocks_mhz->min_mhz,
                         value.locked_clocks_mhz->max_mhz);
  }
  return "unknown";
}

}  // namespace zeus::daemon
