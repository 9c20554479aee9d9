// Whether this process may change GPU settings itself.
#pragma once

#include <filesystem>

namespace zeus::device {

// True when the effective uid is 0 or CapEff (from `proc_status`, normally /proc/self/status)
// has CAP_SYS_ADMIN (bit 21).
bool has_sys_admin(const std::filesystem::path& proc_status = "/proc/self/status");

}  // namespace zeus::device
