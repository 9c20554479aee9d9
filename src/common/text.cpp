#include "common/text.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "zeus/common/error.hpp"

namespace zeus::text {

std::string_view trim(std::string_view text, std::string_view chars) {
  const std::size_t first = text.find_first_not_of(chars);
  if (first == std::string_view::npos) {
    return text.substr(text.size());
  }
  const std::size_t last = text.find_last_not_of(chars);
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  while (true) {
    const std::size_t at = text.find(separator);
    pieces.push_back(text.substr(0, at));
    if (at == std::string_view::npos) {
      return pieces;
    }
    text.remove_prefix(at + 1);
  }
}

std::vector<std::string_view> split_trimmed(std::string_view text, char separator, bool drop_empty,
                                            std::string_view chars) {
  std::vector<std::string_view> pieces;
  for (const std::string_view piece : split(text, separator)) {
    const std::string_view trimmed = trim(piece, chars);
    if (!drop_empty || !trimmed.empty()) {
      pieces.push_back(trimmed);
    }
  }
  return pieces;
}

std::vector<std::string> split_to_strings(std::string_view text, char separator, bool drop_empty,
                                          std::string_view chars) {
  std::vector<std::string> pieces;
  for (const std::string_view piece : split_trimmed(text, separator, drop_empty, chars)) {
    pieces.emplace_back(piece);
  }
  return pieces;
}

std::string read_file(const std::filesystem::path& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
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
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    throw Error(ErrorKind::kIo, "error while reading " + path.string());
  }
  return content.str();
}

}  // namespace zeus::text
