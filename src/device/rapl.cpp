// Placeholder: replaced by the RAPL backend.
#include "zeus/device/rapl.hpp"

namespace zeus {

std::filesystem::path default_powercap_root() { return "/sys/class/powercap"; }

CpuDiscovery discover_rapl_cpus(const std::filesystem::path& powercap_root) {
  CpuDiscovery result;
  result.root = powercap_root;
  result.message = "RAPL backend not built yet";
  return result;
}

}  // namespace zeus
