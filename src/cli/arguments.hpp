// Parsing values given on the command line: device index lists ("0,1"), and the short form of a
// duration for messages (durations themselves: common/duration.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/duration.hpp"

namespace zeus::cli {

// Durations are parsed with zeus::parse_duration_s (common/duration.hpp, included here).

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
