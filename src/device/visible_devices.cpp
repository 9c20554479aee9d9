#include "device/visible_devices.hpp"

#include <algorithm>
#include <cctype>

#include "common/log.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {
namespace {

bool is_integer(const std::string& text) {
  std::size_t start = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  return text.size() > start && std::all_of(text.begin() + static_cast<long>(start), text.end(),
                                            [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

std::vector<int> resolve_visible_devices(const std::string& variable,
                                         const std::optional<std::string>& value,
                                         const std::vector<std::string>& physical_uuids) {
  const int count = static_cast<int>(physical_uuids.size());
  std::vector<int> visible;
  if (!value) {
    for (int i = 0; i < count; ++i) {
      visible.push_back(i);
    }
    return visible;
  }
  const std::string quoted = variable + "=\"" + *value + "\"";
  if (text::trim(*value).empty()) {
    log().warn("{} hides every GPU", quoted);
    return visible;
  }

  // First parse every entry, so that a syntax error anywhere is reported even after a point
  // where CUDA would stop reading.
  const std::vector<std::string> entries = text::split_to_strings(*value, ',');
  for (const std::string& entry : entries) {
    if (entry.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  quoted +
                      " has an empty entry; write comma-separated GPU indices or UUIDs, e.g. "
                      "\"0,1\" or \"GPU-8e6f...\"");
    }
    if (text::ascii_lower(entry).rfind("mig-", 0) == 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  quoted + " selects a MIG instance (" + entry +
                      "); MIG instances cannot be measured or power-limited on their own. Select "
                      "whole GPUs by index or GPU-UUID");
    }
    if (!is_integer(entry) && text::ascii_lower(entry).rfind("gpu-", 0) != 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  quoted + " has the entry \"" + entry +
                      "\", which is neither a GPU index nor a GPU UUID (\"GPU-...\")");
    }
  }

  for (const std::string& entry : entries) {
    int physical = -1;
    std::string why_not;
    if (is_integer(entry)) {
      long long index = -1;
      try {
        index = std::stoll(entry);
      } catch (const std::out_of_range&) {
        index = -1;
      }
      if (index >= 0 && index < count) {
        physical = static_cast<int>(index);
      } else {
        why_not =
            "index " + entry + " names no GPU (this machine has " + std::to_string(count) + ")";
      }
    } else {
      const std::string wanted = text::ascii_lower(entry);
      std::vector<int> matches;
      for (int i = 0; i < count; ++i) {
        if (text::ascii_lower(physical_uuids[static_cast<std::size_t>(i)]).rfind(wanted, 0) == 0) {
          matches.push_back(i);
        }
      }
      if (matches.size() > 1) {
        throw Error(
            ErrorKind::kInvalidArgument,
            quoted + ": \"" + entry + "\" is a prefix of several GPU UUIDs; give more of it");
      }
      if (matches.empty()) {
        why_not = "no GPU has the UUID " + entry;
      } else {
        physical = matches.front();
      }
    }
    if (physical >= 0 && std::find(visible.begin(), visible.end(), physical) != visible.end()) {
      why_not = entry + " repeats a GPU already listed";
      physical = -1;
    }
    if (physical < 0) {
      // CUDA stops at the first entry it cannot use; the GPUs before it stay visible.
      if (entry != "-1") {
        log().warn("{}: {}; as CUDA does, GPUs listed from there on are ignored", quoted, why_not);
      }
      break;
    }
    visible.push_back(physical);
  }
  return visible;
}

}  // namespace zeus::device
