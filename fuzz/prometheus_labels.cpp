// Text that ends up in the Prometheus exposition (zeus/metrics/prometheus.hpp and the internal
// metrics/exposition.hpp): label values (window names, GPU names and UUIDs), HELP text and sample
// values. The input is escaped and read back by an independent reader of the text format 0.0.4,
// and used as the window name of WindowHistograms, whose whole /metrics rendering must then parse
// line by line, with the window label reading back as the name and every histogram's +Inf bucket
// equal to its count.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/utf8.hpp"
#include "fuzz_check.hpp"
#include "metrics/exposition.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/measurement.hpp"

namespace {

namespace metrics = zeus::metrics;

// Reads an escaped label value up to (not including) its closing quote; nullopt when the text
// has a raw newline, an unknown escape, or no closing quote. `at` ends on the closing quote.
std::optional<std::string> read_label_value(std::string_view text, std::size_t& at) {
  std::string out;
  while (at < text.size()) {
    const char c = text[at];
    if (c == '"') {
      return out;
    }
    if (c == '\n') {
      return std::nullopt;
    }
    if (c == '\\') {
      if (at + 1 >= text.size()) {
        return std::nullopt;
      }
      const char next = text[at + 1];
      if (next == '\\') {
        out += '\\';
      } else if (next == '"') {
        out += '"';
      } else if (next == 'n') {
        out += '\n';
      } else {
        return std::nullopt;
      }
      at += 2;
      continue;
    }
    out += c;
    ++at;
  }
  return std::nullopt;
}

std::optional<std::string> unescape_help(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      return std::nullopt;
    }
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (i + 1 >= text.size() || (text[i + 1] != '\\' && text[i + 1] != 'n')) {
      return std::nullopt;
    }
    out += text[i + 1] == 'n' ? '\n' : '\\';
    ++i;
  }
  return out;
}

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

std::size_t read_name(std::string_view line, std::size_t at) {
  const std::size_t start = at;
  while (at < line.size() && is_name_char(line[at], at == start)) {
    ++at;
  }
  return at;
}

bool is_sample_value(std::string_view text) {
  if (text == "+Inf" || text == "-Inf" || text == "NaN") {
    return true;
  }
  if (text.empty()) {
    return false;
  }
  const std::string copy(text);
  char* end = nullptr;
  std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// One sample line: name{label="value",...} value
std::optional<Sample> parse_sample(std::string_view line) {
  Sample sample;
  std::size_t at = read_name(line, 0);
  if (at == 0) {
    return std::nullopt;
  }
  sample.name = std::string(line.substr(0, at));
  if (at < line.size() && line[at] == '{') {
    ++at;
    while (at < line.size() && line[at] != '}') {
      const std::size_t end = read_name(line, at);
      if (end == at || end + 1 >= line.size() || line[end] != '=' || line[end + 1] != '"') {
        return std::nullopt;
      }
      const std::string label(line.substr(at, end - at));
      at = end + 2;
      auto value = read_label_value(line, at);
      if (!value || !sample.labels.emplace(label, std::move(*value)).second) {
        return std::nullopt;
      }
      ++at;  // the closing quote
      if (at < line.size() && line[at] == ',') {
        ++at;
      }
    }
    if (at >= line.size()) {
      return std::nullopt;
    }
    ++at;  // '}'
  }
  if (at >= line.size() || line[at] != ' ') {
    return std::nullopt;
  }
  sample.value = std::string(line.substr(at + 1));
  if (!is_sample_value(sample.value)) {
    return std::nullopt;
  }
  return sample;
}

void check_label_escaping(std::string_view input) {
  const std::string escaped = metrics::escape_label_value(input);
  ZEUS_FUZZ_CHECK(escaped.find('\n') == std::string::npos);
  // Prometheus refuses a scrape with an invalid UTF-8 label value: bad bytes are replaced.
  ZEUS_FUZZ_CHECK(zeus::is_valid_utf8(escaped));
  std::size_t at = 0;
  const std::string quoted = escaped + "\"";
  const auto back = read_label_value(quoted, at);
  // The first unescaped quote is the closing one: none inside.
  ZEUS_FUZZ_CHECK(back.has_value() && at == escaped.size() && *back == zeus::to_valid_utf8(input));
}

void check_help_escaping(std::string_view input) {
  const std::string escaped = metrics::escape_help(input);
  ZEUS_FUZZ_CHECK(zeus::is_valid_utf8(escaped));
  const auto back = unescape_help(escaped);
  ZEUS_FUZZ_CHECK(back.has_value() && *back == zeus::to_valid_utf8(input));
  std::string header;
  metrics::write_family_header(header, "zeus_fuzz_metric", "gauge", input);
  ZEUS_FUZZ_CHECK(header ==
                  "# HELP zeus_fuzz_metric " + escaped + "\n# TYPE zeus_fuzz_metric gauge\n");
}

void check_value(const std::uint8_t* data, std::size_t size) {
  double value = 0.0;
  std::memcpy(&value, data, std::min(size, sizeof value));
  const std::string text = metrics::format_value(value);
  ZEUS_FUZZ_CHECK(is_sample_value(text));
  if (std::isfinite(value)) {
    ZEUS_FUZZ_CHECK(std::strtod(text.c_str(), nullptr) == value);
  } else {
    ZEUS_FUZZ_CHECK(text == (std::isnan(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf"));
  }
}

void check_histograms(const std::string& window, double energy_j, double time_s) {
  metrics::WindowHistograms histograms;
  zeus::monitor::Measurement measurement;
  measurement.time_s = time_s;
  measurement.gpu_energy_j.set(0, energy_j);
  measurement.gpu_energy_j.set(1, energy_j / 2);
  measurement.cpu_energy_j.set(0, energy_j / 3);
  histograms.observe(window, measurement);
  histograms.observe(window, measurement);
  histograms.observe("other", measurement);
  std::string out;
  histograms.render(out);
  ZEUS_FUZZ_CHECK(!out.empty() && out.back() == '\n');

  // series (name without _bucket/_count, labels without le) -> +Inf bucket and count
  std::map<std::pair<std::string, std::map<std::string, std::string>>,
           std::pair<std::string, std::string>>
      totals;
  std::size_t windows = 0;
  std::size_t start = 0;
  while (start < out.size()) {
    const std::size_t end = out.find('\n', start);
    const std::string_view line(out.data() + start, end - start);
    start = end + 1;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
      continue;
    }
    auto sample = parse_sample(line);
    ZEUS_FUZZ_CHECK(sample.has_value());
    const auto label = sample->labels.find("window");
    ZEUS_FUZZ_CHECK(label != sample->labels.end());
    // The window's name as exposed: invalid UTF-8 replaced.
    const std::string exposed = zeus::to_valid_utf8(window);
    ZEUS_FUZZ_CHECK(label->second == exposed || label->second == "other");
    windows += label->second == exposed ? 1 : 0;
    std::string& name = sample->name;
    if (name.ends_with("_bucket") && sample->labels["le"] == "+Inf") {
      sample->labels.erase("le");
      name.resize(name.size() - 7);
      totals[{name, sample->labels}].first = sample->value;
    } else if (name.ends_with("_count")) {
      name.resize(name.size() - 6);
      totals[{name, sample->labels}].second = sample->value;
    }
  }
  ZEUS_FUZZ_CHECK(windows > 0);
  for (const auto& [series, values] : totals) {
    ZEUS_FUZZ_CHECK(!values.first.empty() && values.first == values.second);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_label_escaping(input);
  check_help_escaping(input);
  check_value(data, size);
  double sum = 0;
  for (std::size_t i = 0; i < size; ++i) {
    sum += data[i];
  }
  check_histograms(input, sum * 1.5, static_cast<double>(size) / 7);
  return 0;
}
