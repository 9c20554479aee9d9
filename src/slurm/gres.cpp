// Slurm's GPU lists (gres.hpp).
#include "slurm/gres.hpp"

#include <algorithm>
#include <charconv>

#include "common/text.hpp"

namespace zeus::slurm {

namespace {

constexpr int kMaxGpuIndex = 4095;

std::optional<int> parse_index(std::string_view text) {
  int value = -1;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0 || value > kMaxGpuIndex) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::optional<std::vector<int>> parse_gpu_list(std::string_view text) {
  std::vector<int> ids;
  for (const std::string_view item : text::split(text, ',')) {
    const auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      const auto id = parse_index(item);
      if (!id) {
        return std::nullopt;
      }
      ids.push_back(*id);
      continue;
    }
    const auto first = parse_index(item.substr(0, dash));
    const auto last = parse_index(item.substr(dash + 1));
    if (!first || !last || *first > *last) {
      return std::nullopt;
    }
    for (int id = *first; id <= *last; ++id) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::optional<std::vector<int>> gpus_in_gres_detail(std::string_view detail) {
  std::vector<int> ids;
  std::size_t position = 0;
  while (position < detail.size()) {
    // One entry: up to the next ',' outside parentheses.
    std::size_t end = position;
    int depth = 0;
    while (end < detail.size() && (detail[end] != ',' || depth > 0)) {
      depth += detail[end] == '(' ? 1 : detail[end] == ')' ? -1 : 0;
      ++end;
    }
    const std::string_view entry = detail.substr(position, end - position);
    position = end + 1;
    // The GRES name ends at the type's ':' or at the '(' of "gpu(CNT:2)".
    if (entry.substr(0, entry.find_first_of(":(")) != "gpu") {
      continue;
    }
    const auto open = entry.find("(IDX:");
    if (open == std::string_view::npos) {
      if (entry.find('(') == std::string_view::npos) {
        continue;  // "gpu:0": none on this node
      }
      return std::nullopt;
    }
    const auto close = entry.find(')', open);
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    const std::string_view list = entry.substr(open + 5, close - open - 5);
    if (list == "N/A") {
      continue;
    }
    const auto parsed = parse_gpu_list(list);
    if (!parsed) {
      return std::nullopt;
    }
    ids.insert(ids.end(), parsed->begin(), parsed->end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace zeus::slurm
