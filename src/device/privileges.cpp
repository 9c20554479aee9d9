#include "device/privileges.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

namespace zeus::device {

bool has_sys_admin(const std::filesystem::path& proc_status) {
  if (geteuid() == 0) {
    return true;
  }
  std::ifstream in(proc_status);
  std::string line;
  constexpr unsigned long long kCapSysAdminBit = 1ULL << 21;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      try {
        return (std::stoull(line.substr(7), nullptr, 16) & kCapSysAdminBit) != 0;
      } catch (const std::exception&) {
        return false;
      }
    }
  }
  return false;
}

}  // namespace zeus::device
