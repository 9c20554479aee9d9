// CPU package and DRAM energy from Linux RAPL through the powercap sysfs interface.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "zeus/device/cpu.hpp"

namespace zeus::device {

class RaplTracker;  // zeus/device/rapl_tracker.hpp

// /sys/class/powercap, or /zeus_sys/class/powercap (the reference's container mount point) when
// the former has no RAPL zone and the latter does.
std::filesystem::path default_powercap_root();

// The rule behind default_powercap_root(): `primary` when it has a RAPL package zone, else
// `fallback` when that has one, else `primary`.
std::filesystem::path choose_powercap_root(const std::filesystem::path& primary,
                                           const std::filesystem::path& fallback);

struct CpuDiscovery {
  std::vector<std::shared_ptr<Cpu>> cpus;  // sorted by package index
  std::filesystem::path root;              // the powercap root that was searched
  bool available = false;                  // at least one package zone was found and readable
  std::string message;                     // why not available, or a summary of what was found
  bool permission_denied = false;          // zones exist but this process may not read them
  bool through_zeusd = false;              // the packages are read through the zeusd daemon
};

// Finds RAPL package zones (intel-rapl:N, also under an intel-rapl/ subfolder) and their DRAM
// sub-zones below `powercap_root`. Never throws for a missing or unreadable tree: the reason
// goes into `message` (permission problems say how to fix them). The CPUs' zones are timed by
// `tracker`'s clock and tracked by it (Cpu::track_wraparound); RaplTracker::process() when null.
CpuDiscovery discover_rapl_cpus(const std::filesystem::path& powercap_root,
                                std::shared_ptr<RaplTracker> tracker = nullptr);

}  // namespace zeus::device
