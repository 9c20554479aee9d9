#include "cli/arguments.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <system_error>
#include <utility>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::cli {

std::vector<int> parse_index_list(std::string_view text, std::string_view what) {
  std::vector<int> indices;
  const auto malformed_list = [&](std::string_view why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("{} \"{}\" is not a valid index list: {}; expected indices "
                             "separated by commas, e.g. 0,1",
                             what, text, why));
  };
  for (const std::string_view item : text::split_trimmed(text, ',', false, " ")) {
    if (item.empty()) {
      throw malformed_list("an item is empty");
    }
    int index = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
    if (ec != std::errc() || end != item.data() + item.size() || index < 0) {
      throw malformed_list(fmt::format("\"{}\" is not a non-negative integer", item));
    }
    if (std::find(indices.begin(), indices.end(), index) != indices.end()) {
      throw malformed_list(fmt::format("{} is repeated", index));
    }
    indices.push_back(index);
  }
  return indices;
}

void check_indices(const std::vector<int>& indices, const std::vector<int>& valid,
                   std::string_view what, std::string_view device) {
  for (const int index : indices) {
    if (std::find(valid.begin(), valid.end(), index) != valid.end()) {
      continue;
    }
    if (valid.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: there is no {} {}: this machine has none that zeus can read "
                              "(`zeus show-env` says why)",
                              what, device, index));
    }
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: there is no {} {}; the valid {} indices are {}", what, device,
                            index, device, fmt::join(valid, ", ")));
  }
}

}  // namespace zeus::cli
