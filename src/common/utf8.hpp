// UTF-8 checks for text that comes from outside (HTTP bodies, query strings, file names): JSON
// writers refuse invalid UTF-8, so error messages that quote such text must be cleaned first.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zeus {

// The offset of the first byte that does not start a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF are not well-formed), or npos when `text` is
// valid UTF-8.
std::size_t first_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) {
  return first_invalid_utf8(text) == std::string_view::npos;
}

// `text` with every byte that is not part of a well-formed sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view text);

// `text` safe to print on a terminal: control characters (C0 but newline and tab, DEL, C1) and
// bytes that are not well-formed UTF-8 become \xNN, so that an error quoting a file's content
// can neither garble the terminal with escape sequences nor print mojibake.
std::string to_printable(std::string_view text);

}  // namespace zeus
