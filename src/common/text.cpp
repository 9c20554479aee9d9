#include "common/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

namespace {
constexpr char ascii_lower_char(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace

std::string ascii_lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    c = ascii_lower_char(c);
  }
  return lower;
}

bool ascii_iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_lower_char(x) == ascii_lower_char(y);
         });
}

bool constant_time_equal(std::string_view given, std::string_view secret) {
  unsigned char difference = given.size() == secret.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    // Compared with the secret repeated, so that a shorter one is read the same way as an equal.
    const char expected = secret.empty() ? '\0' : secret[i % secret.size()];
    difference |= static_cast<unsigned char>(given[i] ^ expected);
  }
  return difference == 0;
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

namespace {

// What a path that is not a regular file is, for the error that refuses it.
std::string_view file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISFIFO(mode)) {
    return "a named pipe (FIFO)";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "not a regular file";
}

std::string naming(const std::filesystem::path& path, std::string_view description) {
  return description.empty() ? path.string()
                             : "the " + std::string(description) + " " + path.string();
}

[[noreturn]] void throw_cannot_read(const std::string& name, int err) {
  const std::string what = "cannot read " + name + ": " + std::strerror(err);
  if (err == EACCES || err == EPERM) {
    throw Error(ErrorKind::kNoPermission, what);
  }
  if (err == ENOENT || err == ENOTDIR) {
    throw Error(ErrorKind::kNotFound, what);
  }
  throw Error(ErrorKind::kIo, what);
}

// A descriptor of `path` opened for reading, or the error read_file() documents; `size_bytes`, when
// given, gets the size fstat saw.
int open_regular(const std::filesystem::path& path, const std::string& name,
                 off_t* size_bytes = nullptr) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below); O_CLOEXEC:
  // a command zeus starts meanwhile must not inherit the descriptor.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    throw_cannot_read(name, errno);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    throw_cannot_read(name, err);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::kInvalidArgument,
                "cannot read " + name + ": it is " + std::string(file_type_name(info.st_mode)) +
                    ", not a regular file; give the path of a file (save piped data to a file "
                    "first)");
  }
  if (size_bytes != nullptr) {
    *size_bytes = info.st_size;
  }
  return fd;
}

}  // namespace

void require_regular_file(const std::filesystem::path& path, std::string_view description) {
  ::close(open_regular(path, naming(path, description)));
}

std::string_view without_utf8_bom(std::string_view text) {
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  return text.starts_with(kUtf8Bom) ? text.substr(kUtf8Bom.size()) : text;
}

std::string_view json_error_text(std::string_view what) {
  constexpr std::string_view kPrefix = "[json.exception.";
  if (!what.starts_with(kPrefix)) {
    return what;
  }
  const std::size_t end = what.find("] ");
  return end == std::string_view::npos ? what : what.substr(end + 2);
}

std::string read_file(const std::filesystem::path& path, std::string_view description) {
  const std::string name = naming(path, description);
  off_t size_bytes = 0;
  const int fd = open_regular(path, name, &size_bytes);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) {
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  std::string content;
  if (size_bytes > 0) {
    content.reserve(static_cast<std::size_t>(size_bytes));
  }
  char buffer[65536];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Error(ErrorKind::kIo, "error while reading " + name + ": " + std::strerror(errno));
    }
    if (got == 0) {
      return content;
    }
    content.append(buffer, static_cast<std::size_t>(got));
  }
}

}  // namespace zeus::text
