#include "common/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::csv {

std::vector<std::string_view> split_fields(std::string_view line) {
  return text::split_trimmed(line, ',', /*drop_empty=*/false, kFieldBlanks);
}

std::optional<double> to_double(std::string_view field) {
  double value = 0.0;
  const char* last = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), last, value);
  if (ec != std::errc() || ptr != last || field.empty()) {
    return std::nullopt;
  }
  return value;
}

std::optional<int> to_int(std::string_view field) {
  int value = 0;
  const char* last = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), last, value);
  if (ec == std::errc() && ptr == last && !field.empty()) {
    return value;
  }
  const std::optional<double> real = to_double(field);
  if (!real || !std::isfinite(*real) || std::floor(*real) != *real ||
      std::fabs(*real) > static_cast<double>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  return static_cast<int>(*real);
}

Reader::Reader(std::string path, std::string text, std::vector<std::string> columns)
    : path_(std::move(path)), text_(std::move(text)), columns_(std::move(columns)) {}

Reader::Reader(const std::filesystem::path& path, std::vector<std::string> columns,
               std::string_view description)
    : path_(path.string()),
      text_(text::read_file(path, description)),
      columns_(std::move(columns)) {}

Reader Reader::from_text(std::string name, std::string text, std::vector<std::string> columns) {
  return Reader(std::move(name), std::move(text), std::move(columns));
}

void Reader::fail(int line, const std::string& what) const {
  throw Error(ErrorKind::kInvalidArgument, path_ + ":" + std::to_string(line) + ": " + what);
}

std::string Reader::expected_header() const {
  std::string header;
  for (const std::string& column : columns_) {
    header.append(header.empty() ? "" : ",").append(column);
  }
  return header;
}

void Reader::for_each_row(const RowFn& row) const {
  // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name.
  std::size_t position = text_.size() - text::without_utf8_bom(text_).size();
  int line_number = 0;
  std::vector<std::size_t> indices;
  std::size_t header_size = 0;
  bool have_header = false;
  std::vector<std::string_view> picked(columns_.size());
  while (position < text_.size()) {
    std::size_t end = text_.find('\n', position);
    if (end == std::string::npos) {
      end = text_.size();
    }
    const std::string_view line(text_.data() + position, end - position);
    position = end + 1;
    ++line_number;
    if (text::trim(line, kFieldBlanks).empty()) {
      continue;
    }
    const std::vector<std::string_view> fields = split_fields(line);
    if (!have_header) {
      header_size = fields.size();
      for (const std::string& column : columns_) {
        const auto it = std::find(fields.begin(), fields.end(), column);
        if (it == fields.end()) {
          fail(line_number, "the header has no column '" + column + "' (expected the columns " +
                                expected_header() + ")");
        }
        indices.push_back(static_cast<std::size_t>(it - fields.begin()));
      }
      have_header = true;
      continue;
    }
    if (fields.size() != header_size) {
      fail(line_number, "expected " + std::to_string(header_size) + " fields, found " +
                            std::to_string(fields.size()));
    }
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      picked[i] = fields[indices[i]];
    }
    row(line_number, picked);
  }
  if (!have_header) {
    fail(1, "the file is empty; expected the header " + expected_header());
  }
}

}  // namespace zeus::csv
