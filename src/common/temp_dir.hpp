// A temporary directory, removed with everything in it when the object goes (unless kept): the
// demo's work directory, and every test's scratch space (tests/support/temp_dir.hpp).
#pragma once

#include <filesystem>
#include <string>

namespace zeus {

class TempDir {
 public:
  // Creates <system temp>/<prefix>-XXXXXX. Throws Error(kIo) when it cannot.
  explicit TempDir(const std::string& prefix = "zeus");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Leaves the directory in place when this object goes.
  void keep() { keep_ = true; }

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace zeus
