#include "zeus/common/sysfs.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "zeus/common/error.hpp"

namespace zeus::sysfs {

std::string read_text(const std::filesystem::path& path) {
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    const std::string what = "cannot read " + path.string() + ": " + std::strerror(err);
    if (err == EACCES || err == EPERM) {
      throw Error(ErrorKind::kNoPermission, what);
    }
    if (err == ENOENT || err == ENOTDIR) {
      throw Error(ErrorKind::kNotFound, what);
    }
    throw Error(ErrorKind::kIo, what);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw Error(ErrorKind::kIo, "error while reading " + path.string());
  }
  std::string value = text.str();
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ' || value.back() == '\t' ||
                            value.back() == '\r')) {
    value.pop_back();
  }
  return value;
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

}  // namespace zeus::sysfs
