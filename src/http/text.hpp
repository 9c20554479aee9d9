// The HTTP host's small text helpers (ASCII case, optional whitespace), internal to the layer.
#pragma once

#include <string>
#include <string_view>

#include "common/text.hpp"

namespace zeus::http::detail {

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = ascii_lower(c);
  }
  return out;
}

// Without the spaces and tabs around it (RFC 9110's optional whitespace).
inline std::string_view trim_blanks(std::string_view text) {
  return zeus::text::trim(text, " \t");
}

}  // namespace zeus::http::detail
