#include "common/sysfs.hpp"

#include <cerrno>
#include <cstdlib>

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

std::uint64_t read_uint64(const std::filesystem::path& path) {
  const std::string text = read_text(path);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 20) {
    throw Error(ErrorKind::kIo,
                path.string() + " does not hold an unsigned integer (read \"" + text + "\")");
  }
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) {
    throw Error(ErrorKind::kIo, path.string() + " holds a value too large for 64 bits");
  }
  return value;
}

std::int64_t read_int64(const std::filesystem::path& path) {
  const std::string text = read_text(path);
  const std::size_t digits = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (text.size() == digits || text.find_first_not_of("0123456789", digits) != std::string::npos ||
      text.size() > 20) {
    // At most 32 characters of what was read: the file may be anything but a sysfs attribute.
    const std::string shown = text.size() > 32 ? text.substr(0, 32) + "..." : text;
    throw Error(ErrorKind::kIo,
                path.string() + " does not hold an integer (read \"" + shown + "\")");
  }
  errno = 0;
  const long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) {
    throw Error(ErrorKind::kIo, path.string() + " holds a value too large for 64 bits");
  }
  return value;
}

}  // namespace zeus::sysfs
