// Parsing values given on the command line: device index lists ("0,1") (durations, and their
// short form for messages: common/duration.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/duration.hpp"

namespace zeus::cli {

// Durations are parsed with zeus::parse_duration_s and shown with zeus::format_duration
// (common/duration.hpp, included here).

// "0,1,3" -> {0, 1, 3}. Throws Error(kInvalidArgument) naming `what` (the flag) and quoting `text`
// for anything else: an empty item, a negative or non-numeric index, a repeated index.
std::vector<int> parse_index_list(std::string_view text, std::string_view what);

// Throws Error(kInvalidArgument) when an index of `indices` is not in `valid`, naming `what` (the
// flag) and `device` ("GPU", "CPU package") and listing the valid indices.
void check_indices(const std::vector<int>& indices, const std::vector<int>& valid,
                   std::string_view what, std::string_view device);

}  // namespace zeus::cli
