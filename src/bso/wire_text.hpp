// Text helpers the wire format's parsing and its errors share. Internal.
#pragma once

#include <cstddef>
#include <string>

namespace zeus::bso {

// At most `limit` bytes of `text` for a message, cut on a UTF-8 boundary, with "..." when cut;
// made valid UTF-8.
std::string excerpt(const std::string& text, std::size_t limit = 40);

// The message of a number beyond a double's range, quoting (an excerpt of) its text.
std::string out_of_range_message(const std::string& number);

}  // namespace zeus::bso
