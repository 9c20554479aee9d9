#include "common/sysfs.hpp"

#include <cerrno>
#include <cstdlib>
#include <system_error>
#include <vector>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::sysfs {

std::string read_text(const std::filesystem::path& path) {
  std::string content;
  try {
    content = text::read_file(path);
  } catch (const Error& error) {
    // A sysfs attribute that is not a file (a directory, a FIFO) is a broken device tree, not a
    // bad argument from the user.
    if (error.kind() != ErrorKind::kInvalidArgument) {
      throw;
    }
    throw Error(ErrorKind::kIo, error.what());
  }
  content.erase(content.find_last_not_of(text::kBlanks) + 1);  // trailing blanks only
  return content;
}

namespace {

// The text of `path` when it is a decimal integer, with a sign when `is_signed`; else throws
// Error(kIo) naming the file and showing at most 32 characters of what it holds.
std::string read_decimal(const std::filesystem::path& path, bool is_signed) {
  std::string text = read_text(path);
  const std::size_t sign = is_signed && !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos ||
      text.size() > 20) {
    // The file may be anything but a sysfs attribute.
    const std::string shown = text.size() > 32 ? text.substr(0, 32) + "..." : text;
    throw Error(ErrorKind::kIo, path.string() + " does not hold " +
                                    (is_signed ? "an integer" : "an unsigned integer") +
                                    " (read \"" + shown + "\")");
  }
  return text;
}

// After strtoull/strtoll with errno cleared before.
void check_range(const std::filesystem::path& path) {
  if (errno == ERANGE) {
    throw Error(ErrorKind::kIo, path.string() + " holds a value too large for 64 bits");
  }
}

}  // namespace

std::uint64_t read_uint64(const std::filesystem::path& path) {
  const std::string text = read_decimal(path, false);
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  check_range(path);
  return value;
}

std::int64_t read_int64(const std::filesystem::path& path) {
  const std::string text = read_decimal(path, true);
  errno = 0;
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  check_range(path);
  return value;
}

std::vector<std::filesystem::path> list_entries(const std::filesystem::path& dir,
                                                std::error_code& error) {
  std::vector<std::filesystem::path> entries;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    entries.push_back(it->path());
  }
  return entries;
}

}  // namespace zeus::sysfs
