// Small helpers for reading sysfs/procfs style files (one value per file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace zeus::sysfs {

// The whole file, with trailing whitespace removed. Throws Error with kind kNoPermission
// (EACCES/EPERM), kNotFound (ENOENT) or kIo, naming the file.
std::string read_text(const std::filesystem::path& path);

// The file parsed as an unsigned decimal integer. Throws Error(kIo) when it is not one.
std::uint64_t read_uint64(const std::filesystem::path& path);

// The file parsed as a signed decimal integer (hwmon's readings may be negative). Throws
// Error(kIo) naming the file when it is not one.
std::int64_t read_int64(const std::filesystem::path& path);

// The entries of folder `dir` (full paths, in the order listed), or as many as were listed
// before `error` was set (then also when `dir` itself cannot be opened). Never throws: a device
// tree's folders come and go.
std::vector<std::filesystem::path> list_entries(const std::filesystem::path& dir,
                                                std::error_code& error);

}  // namespace zeus::sysfs
