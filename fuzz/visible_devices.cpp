// CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES -> resolve_visible_devices
// (device/visible_devices.hpp) against a small model of the rules its header documents. The first
// byte picks the variable's name (bit 0: CUDA or HIP) and whether it is unset (bit 1); the rest is
// the value, then, after a NUL, the physical GPUs' UUIDs one per line (without a NUL: four GPUs
// whose UUIDs share prefixes, so that prefixes can be ambiguous).
//
// The result must be what the model says: the same indices, or a zeus::Error where the model
// expects an error; every index names a GPU, and none repeats.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "device/visible_devices.hpp"
#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"

namespace {

const std::vector<std::string> kDefaultUuids = {
    "GPU-5a1f3c2e-9b7d-4e61-a0c3-2f8e1d6b7a90",
    "GPU-5a1f9d04-1c2b-47aa-8e0f-6b3c9d2e1f07",
    "GPU-c0ffee00-0000-4000-8000-000000000001",
    "GPU-C0FFEE00-0000-4000-8000-000000000002",
};

std::string_view trim(std::string_view text) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const std::size_t first = text.find_first_not_of(kBlanks);
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(kBlanks) - first + 1);
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (prefix.size() > text.size()) {
    return false;
  }
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (lower(text[i]) != lower(prefix[i])) {
      return false;
    }
  }
  return true;
}

// An optional sign and at least one digit; `value` is -1 for a negative or too large number.
bool parse_index(std::string_view entry, long long& value) {
  bool negative = false;
  if (!entry.empty() && (entry[0] == '+' || entry[0] == '-')) {
    negative = entry[0] == '-';
    entry.remove_prefix(1);
  }
  if (entry.empty()) {
    return false;
  }
  value = 0;
  for (const char c : entry) {
    if (c < '0' || c > '9') {
      return false;
    }
    if (value >= 0) {
      value = value * 10 + (c - '0');
      if (value > 1'000'000) {
        value = -1;  // beyond any GPU count, and never overflows
      }
    }
  }
  if (negative && value != 0) {
    value = -1;
  }
  return true;
}

// What the header promises: the visible physical indices, or nullopt for an error.
std::optional<std::vector<int>> model(const std::optional<std::string>& value,
                                      const std::vector<std::string>& uuids) {
  const int count = static_cast<int>(uuids.size());
  std::vector<int> visible;
  if (!value) {
    for (int i = 0; i < count; ++i) {
      visible.push_back(i);
    }
    return visible;
  }
  if (trim(*value).empty()) {
    return visible;
  }
  std::vector<std::string_view> entries;
  std::string_view rest = *value;
  while (true) {
    const std::size_t comma = rest.find(',');
    entries.push_back(trim(rest.substr(0, comma)));
    if (comma == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  // Syntax errors anywhere in the list, before any device is looked up.
  for (const std::string_view entry : entries) {
    long long index = 0;
    if (entry.empty() || starts_with_nocase(entry, "mig-") ||
        (!parse_index(entry, index) && !starts_with_nocase(entry, "gpu-"))) {
      return std::nullopt;
    }
  }
  for (const std::string_view entry : entries) {
    long long index = -1;
    int physical = -1;
    if (parse_index(entry, index)) {
      physical = (index >= 0 && index < count) ? static_cast<int>(index) : -1;
    } else {
      int matches = 0;
      for (int i = 0; i < count; ++i) {
        if (starts_with_nocase(uuids[static_cast<std::size_t>(i)], entry)) {
          ++matches;
          physical = i;
        }
      }
      if (matches > 1) {
        return std::nullopt;  // an ambiguous prefix before the list ends
      }
    }
    for (const int earlier : visible) {
      if (earlier == physical) {
        physical = -1;
      }
    }
    if (physical < 0) {
      break;
    }
    visible.push_back(physical);
  }
  return visible;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::uint8_t mode = data[0];
  const std::string variable = (mode & 1) != 0 ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t nul = rest.find('\0');
  std::optional<std::string> value;
  if ((mode & 2) == 0) {
    value = std::string(rest.substr(0, nul));
  }
  std::vector<std::string> uuids = kDefaultUuids;
  if (nul != std::string_view::npos) {
    uuids.clear();
    std::string_view list = rest.substr(nul + 1);
    while (!list.empty() && uuids.size() < 64) {
      const std::size_t newline = list.find('\n');
      uuids.emplace_back(list.substr(0, newline));
      list.remove_prefix(newline == std::string_view::npos ? list.size() : newline + 1);
    }
  }

  const std::optional<std::vector<int>> expected = model(value, uuids);
  std::vector<int> visible;
  try {
    visible = zeus::device::resolve_visible_devices(variable, value, uuids);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find(variable) != std::string_view::npos);
    ZEUS_FUZZ_CHECK(!expected);
    return 0;
  }
  ZEUS_FUZZ_CHECK(expected && visible == *expected);
  ZEUS_FUZZ_CHECK(visible.size() <= uuids.size());
  for (std::size_t i = 0; i < visible.size(); ++i) {
    ZEUS_FUZZ_CHECK(visible[i] >= 0 && static_cast<std::size_t>(visible[i]) < uuids.size());
    for (std::size_t j = 0; j < i; ++j) {
      ZEUS_FUZZ_CHECK(visible[j] != visible[i]);
    }
  }
  return 0;
}
