// A temporary directory for one test, removed with everything in it when the object goes: the
// one of common/ (zeus::TempDir) with a prefix that says it is a test's.
#pragma once

#include <string>

#include "common/temp_dir.hpp"

namespace zeus::testing {

class TempDir : public zeus::TempDir {
 public:
  // The directory is <system temp>/<prefix>-XXXXXX.
  explicit TempDir(const std::string& prefix = "zeus-test") : zeus::TempDir(prefix) {}
};

}  // namespace zeus::testing
