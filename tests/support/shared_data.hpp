// Where the tests find the data sets of ../shared/data (the NSDI'23 traces, the power-limit
// profiles): next to the checkout, never in it (docs/testing.md). The one place that spells the
// path, so that every test that reads it can be pointed elsewhere: ZEUS_SHARED_DATA, when set,
// replaces it. CTest runs each suite that includes this header once more with ZEUS_SHARED_DATA
// naming a folder that does not exist (<suite>_without_shared_data): a test that needs the data
// must skip (GTEST_SKIP) when it is absent, never fail.
#pragma once

#include <cstdlib>
#include <filesystem>

#ifndef ZEUS_SOURCE_DIR
#error "support/shared_data.hpp needs ZEUS_SOURCE_DIR (the checkout) defined for the test target"
#endif

namespace zeus::testing {

// ZEUS_SHARED_DATA when set and not empty, else <checkout>/../shared/data. It may not exist.
inline std::filesystem::path shared_data_dir() {
  if (const char* configured = std::getenv("ZEUS_SHARED_DATA");
      configured != nullptr && *configured != '\0') {
    return configured;
  }
  return std::filesystem::path(ZEUS_SOURCE_DIR) / ".." / "shared" / "data";
}

}  // namespace zeus::testing
