#include "common/temp_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "zeus/common/error.hpp"

namespace zeus {

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error(ErrorKind::kIo, "cannot create a temporary directory from " + pattern + ": " +
                                    std::strerror(errno));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  if (!keep_) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

}  // namespace zeus
