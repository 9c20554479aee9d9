// Small helpers for reading sysfs/procfs style files (one value per file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace zeus::sysfs {

// The whole file, with trailing whitespace removed. Throws Error with kind kNoPermission
// (EACCES/EPERM), kNotFound (ENOENT) or kIo, naming the file.
std::string read_text(const std::filesystem::path& path);

// The file parsed as an unsigned decimal integer. Throws Error(kIo) when it is not one.
std::uint64_t read_uint64(const std::filesystem::path& path);

// The file parsed as a signed decimal integer (hwmon's readings may be negative). Throws
// Error(kIo) naming the file when it is not one.
std::int64_t read_int64(const std::filesystem::path& path);

}  // namespace zeus::sysfs
