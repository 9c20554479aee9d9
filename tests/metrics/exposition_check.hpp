// Checks of rendered text exposition shared by the metrics tests.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace zeus::metrics {

// The value of the one sample line `series` (name plus labels exactly as rendered).
inline std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      const std::string value = line.substr(series.size() + 1);
      if (value == "+Inf") {
        return std::numeric_limits<double>::infinity();
      }
      return std::stod(value);
    }
  }
  return std::nullopt;
}

// Every line is a comment (# HELP/# TYPE) or a sample `name{labels} value`, and every sample's
// family was declared before it.
inline void expect_valid_exposition(const std::string& text) {
  static const std::regex sample_line(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*)?\})? ([-+0-9.eE]+|\+Inf|-Inf|NaN)$)");
  static const std::regex type_line(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  std::set<std::string> declared;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_match(line, match, type_line)) {
      EXPECT_TRUE(declared.insert(match[1]).second) << "family declared twice: " << line;
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) {
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, match, sample_line)) << "not a sample line: " << line;
    std::string family = match[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (!declared.count(family) && family.size() > s.size() &&
          family.compare(family.size() - s.size(), s.size(), s) == 0) {
        family = family.substr(0, family.size() - s.size());
      }
    }
    EXPECT_TRUE(declared.count(family)) << "sample before its # TYPE: " << line;
  }
}

}  // namespace zeus::metrics
