// Test helper: a full disk, simulated for this process. While it lives, no file this process
// writes can grow past `limit` bytes (RLIMIT_FSIZE): writes beyond fail with EFBIG, which SQLite
// reports as a disk I/O error or "database or disk is full", as on a full file system. SIGXFSZ,
// which the kernel sends on such a write, is ignored meanwhile. Regular files only: pipes,
// sockets and terminals are not limited.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <system_error>

namespace zeus::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(std::uintmax_t limit) {
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) {
      throw std::runtime_error(std::string("getrlimit: ") + std::strerror(errno));
    }
    previous_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(limit);
    if (::setrlimit(RLIMIT_FSIZE, &lowered) != 0) {
      ::signal(SIGXFSZ, previous_handler_);
      throw std::runtime_error(std::string("setrlimit: ") + std::strerror(errno));
    }
    active_ = true;
  }
  ~FileSizeLimit() { lift(); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  // Space again (the soft limit is raised back to what it was).
  void lift() {
    if (active_) {
      ::setrlimit(RLIMIT_FSIZE, &saved_);
      ::signal(SIGXFSZ, previous_handler_);
      active_ = false;
    }
  }

  // The size of the largest of these files that exist: a limit just above it lets no write
  // append to any of them.
  static std::uintmax_t largest(std::initializer_list<std::filesystem::path> files) {
    std::uintmax_t size = 0;
    for (const std::filesystem::path& file : files) {
      std::error_code error;
      const std::uintmax_t bytes = std::filesystem::file_size(file, error);
      if (!error && bytes > size) {
        size = bytes;
      }
    }
    return size;
  }

 private:
  rlimit saved_{};
  sighandler_t previous_handler_ = SIG_DFL;
  bool active_ = false;
};

}  // namespace zeus::testing
