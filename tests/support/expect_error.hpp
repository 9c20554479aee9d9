// Test helpers: a call must throw zeus::Error of one kind whose message has every given fragment;
// the error a call throws.
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

// The zeus::Error `body` throws; a test failure (and an empty error) when it throws none.
template <typename Body>
Error error_of(Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no zeus::Error thrown";
  return Error(ErrorKind::kUnknown, "");
}

}  // namespace zeus::testing
