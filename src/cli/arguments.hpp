// Parsing values given on the command line: durations ("10s", "500ms", "2m", "1h", "0.5") and
// device index lists ("0,1").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zeus::cli {

// A non-negative duration in seconds: a decimal number followed by an optional unit, `ms`, `s`,
// `m` (or `min`), `h`; no unit means seconds. Throws Error(kInvalidArgument) naming `what` (the
// flag, e.g. "--interval") and quoting `text` when it is malformed, negative or not finite.
double parse_duration_s(std::string_view text, std::string_view what);

// A short human form of a duration for messages: "1 ms", "0.5 s", "2 min".
std::string format_duration(double duration_s);

// "0,1,3" -> {0, 1, 3}. Throws Error(kInvalidArgument) naming `what` (the flag) and quoting `text`
// for anything else: an empty item, a negative or non-numeric index, a repeated index.
std::vector<int> parse_index_list(std::string_view text, std::string_view what);

// Throws Error(kInvalidArgument) when an index of `indices` is not in `valid`, naming `what` (the
// flag) and `device` ("GPU", "CPU package") and listing the valid indices.
void check_indices(const std::vector<int>& indices, const std::vector<int>& valid,
                   std::string_view what, std::string_view device);

}  // namespace zeus::cli
