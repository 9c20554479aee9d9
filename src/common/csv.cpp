#include "common/csv.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::csv {
namespace {

// `line` split at commas into `fields` (cleared first), each trimmed of `blanks`.
void split_into(std::string_view line, std::string_view blanks,
                std::vector<std::string_view>& fields) {
  fields.clear();
  while (true) {
    const std::size_t comma = line.find(',');
    fields.push_back(text::trim(line.substr(0, comma), blanks));
    if (comma == std::string_view::npos) {
      return;
    }
    line.remove_prefix(comma + 1);
  }
}

}  // namespace

std::vector<std::string_view> split_fields(std::string_view line, std::string_view blanks) {
  std::vector<std::string_view> fields;
  split_into(line, blanks, fields);
  return fields;
}

bool field_fits(std::string_view field) {
  return field.find_first_of(",\r\n") == std::string_view::npos;
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

// ---- LineReader

LineReader::LineReader(std::string name, Dialect dialect)
    : name_(std::move(name)), dialect_(dialect) {}

LineReader::LineReader(const std::filesystem::path& path, std::string_view description,
                       Dialect dialect)
    : LineReader(path.string(), dialect) {
  // Refused before it is opened: a FIFO would block, a directory never ends.
  text::require_regular_file(path, description);
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*file) {
    throw Error(ErrorKind::kIo, "cannot read " + name_ + ": " + std::strerror(errno));
  }
  in_ = file.get();
  owned_ = std::move(file);
  skip_bom_ = true;
}

LineReader::LineReader(std::string name, std::istream& in, Dialect dialect)
    : LineReader(std::move(name), dialect) {
  in_ = &in;
}

LineReader LineReader::over_text(std::string name, std::string_view text, Dialect dialect) {
  LineReader reader(std::move(name), dialect);
  reader.text_ = text;
  reader.skip_bom_ = true;
  return reader;
}

LineReader::LineReader(LineReader&&) noexcept = default;
LineReader& LineReader::operator=(LineReader&&) noexcept = default;
LineReader::~LineReader() = default;

void LineReader::fail(int line, const std::string& what) const {
  throw Error(ErrorKind::kInvalidArgument, name_ + ":" + std::to_string(line) + ": " + what);
}

bool LineReader::next_line() {
  if (in_ == nullptr) {
    if (position_ >= text_.size()) {
      return false;
    }
    std::size_t end = text_.find('\n', position_);
    if (end == std::string_view::npos) {
      end = text_.size();
    }
    line_ = text_.substr(position_, end - position_);
    position_ = end + 1;
  } else {
    if (!std::getline(*in_, buffer_)) {
      if (in_->bad()) {
        throw Error(ErrorKind::kIo,
                    name_ + ": reading failed after line " + std::to_string(line_number_));
      }
      return false;
    }
    line_ = buffer_;
  }
  ++line_number_;
  if (line_number_ == 1 && skip_bom_) {
    line_ = text::without_utf8_bom(line_);
  }
  if (!line_.empty() && line_.back() == '\r') {
    line_.remove_suffix(1);
  }
  line_ = text::trim(line_, dialect_.line_blanks);
  return true;
}

bool LineReader::next(std::vector<std::string_view>& fields) {
  while (next_line()) {
    if (!line_.empty()) {
      split_into(line_, dialect_.field_blanks, fields);
      return true;
    }
  }
  return false;
}

// ---- Reader

Reader::Reader(std::string path, std::optional<std::string> text, std::vector<std::string> columns,
               std::string description)
    : path_(std::move(path)),
      text_(std::move(text)),
      columns_(std::move(columns)),
      description_(std::move(description)) {}

Reader::Reader(const std::filesystem::path& path, std::vector<std::string> columns,
               std::string_view description)
    : Reader(path.string(), std::nullopt, std::move(columns), std::string(description)) {
  text::require_regular_file(path, description);
}

Reader Reader::from_text(std::string name, std::string text, std::vector<std::string> columns) {
  return Reader(std::move(name), std::move(text), std::move(columns), {});
}

void Reader::fail(int line, const std::string& what) const {
  throw Error(ErrorKind::kInvalidArgument, path_ + ":" + std::to_string(line) + ": " + what);
}

std::string Reader::expected_header() const {
  return fmt::format("{}", fmt::join(columns_, ","));
}

void Reader::for_each_row(const RowFn& row) const {
  LineReader lines = text_ ? LineReader::over_text(path_, *text_)
                           : LineReader(std::filesystem::path(path_), description_);
  std::vector<std::string_view> fields;
  if (!lines.next(fields)) {
    fail(1, "the file is empty; expected the header " + expected_header());
  }
  std::vector<std::size_t> indices;
  for (const std::string& column : columns_) {
    const auto it = std::find(fields.begin(), fields.end(), column);
    if (it == fields.end()) {
      fail(lines.line(), "the header has no column '" + column + "' (expected the columns " +
                             expected_header() + ")");
    }
    indices.push_back(static_cast<std::size_t>(it - fields.begin()));
  }
  const std::size_t header_size = fields.size();
  std::vector<std::string_view> picked(columns_.size());
  while (lines.next(fields)) {
    if (fields.size() != header_size) {
      fail(lines.line(), "expected " + std::to_string(header_size) + " fields, found " +
                             std::to_string(fields.size()));
    }
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      picked[i] = fields[indices[i]];
    }
    row(lines.line(), picked);
  }
}

// ---- Table

Table::Table(LineReader lines) : lines_(std::move(lines)) {
  if (next_fields()) {
    header_.assign(fields_.begin(), fields_.end());
  }
}

void Table::fail(const std::string& what) const {
  throw Error(ErrorKind::kInvalidArgument, name() + ": " + what);
}

void Table::fail(int line, const std::string& what) const {
  fail(fmt::format("line {}: {}", line, what));
}

bool Table::next_fields() {
  try {
    return lines_.next(fields_);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, error.what());
  }
}

std::optional<std::size_t> Table::find_column(std::string_view column) const {
  const auto found = std::find(header_.begin(), header_.end(), column);
  if (found == header_.end()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(found - header_.begin());
}

std::vector<std::size_t> Table::columns(std::span<const std::string_view> names,
                                        std::string_view what, std::string_view how) const {
  std::vector<std::size_t> indices;
  std::vector<std::string_view> missing;
  for (const std::string_view column : names) {
    if (const std::optional<std::size_t> index = find_column(column)) {
      indices.push_back(*index);
    } else {
      missing.push_back(column);
    }
  }
  if (!missing.empty()) {
    fail(fmt::format("the {} lacks the column{} {}; its header must have {} (read \"{}\"); {}",
                     what, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                     fmt::join(names, ","), fmt::join(header_, ","), how));
  }
  return indices;
}

bool Table::next(Row& row) {
  if (!next_fields()) {
    return false;
  }
  row.line = lines_.line();
  if (fields_.size() != header_.size()) {
    fail(row.line, fmt::format("expected {} fields as in the header, found {}", header_.size(),
                               fields_.size()));
  }
  row.fields.resize(fields_.size());
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    row.fields[i].assign(fields_[i]);
  }
  return true;
}

std::vector<Table::Row> Table::read_all() {
  std::vector<Row> rows;
  Row row;
  while (next(row)) {
    rows.push_back(row);
  }
  return rows;
}

double Table::number(const Row& row, std::size_t column) const {
  const std::string& field = row.fields.at(column);
  const std::optional<double> value = to_double(field);
  if (!value || !std::isfinite(*value)) {
    fail(row.line, fmt::format("{} is not a number (\"{}\")", header_.at(column), field));
  }
  return *value;
}

int Table::integer(const Row& row, std::size_t column) const {
  const double value = number(row, column);
  if (value != std::floor(value) || std::fabs(value) > 1e9) {
    fail(row.line,
         fmt::format("{} is not an integer (\"{}\")", header_.at(column), row.fields.at(column)));
  }
  return static_cast<int>(value);
}

}  // namespace zeus::csv
