// Text helpers the wire format's parsing and its errors share, and that the BSO server's
// messages use. Internal: not part of the installed client API.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace zeus::bso {

// At most `limit` bytes of `text` for a message, cut on a UTF-8 boundary, with "..." when cut;
// made valid UTF-8.
std::string excerpt(const std::string& text, std::size_t limit = 40);

// The message of a number beyond a double's range, quoting (an excerpt of) its text.
std::string out_of_range_message(const std::string& number);

// Parses text as JSON like the reference: a syntax error is a 422 "value_error.jsondecode". A
// number beyond a double's range ("value_error.number.out_of_range") and text that is not UTF-8
// ("value_error.str.utf8") are 422 too, with the "loc" of the value (["body", "max_power"],
// ["body", "batch_sizes", 2]) or of the key.
nlohmann::json parse_body(const std::string& text, const std::string& where = "body");

// Python's repr of a float ("44000.0", "1e-05", "1e+16"), used in messages the reference's
// users grep.
std::string python_float_repr(double value);

}  // namespace zeus::bso
