// The text exposition format: escaping, value spelling, family headers.
#include "metrics/exposition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/utf8.hpp"
#include "zeus/common/error.hpp"

namespace zeus::metrics {

std::string escape_label_value(std::string_view raw) {
  // Prometheus refuses a whole scrape over one invalid UTF-8 label value: replace bad bytes.
  const std::string value = to_valid_utf8(raw);
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string escape_help(std::string_view raw) {
  const std::string text = to_valid_utf8(raw);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", value);  // shortest round-trip form
}

void write_family_header(std::string& out, std::string_view name, std::string_view type,
                         std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help),
                 name, type);
}

}  // namespace zeus::metrics
