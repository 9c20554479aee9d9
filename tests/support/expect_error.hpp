// Test helper: a call must throw zeus::Error of one kind whose message has every given fragment.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zeus/common/error.hpp"

namespace zeus::testing {

template <typename Body>
void expect_error(Body&& body, ErrorKind kind, const std::vector<std::string>& fragments) {
  try {
    body();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << error.what();
    }
  }
}

}  // namespace zeus::testing
