// CSV files, the one reader: LineReader splits a file, a stream or text into fields line by line
// (never holding the whole file), and two header-aware readers sit on it: Reader checks fixed
// columns and names `file:line` (the simulator's traces, job arrivals, carbon intensity series),
// Table looks columns up by name and streams rows ("file: line N: ..."; `zeus report`'s inputs,
// the `zeus monitor --timeline` file). No quoting: none of our files needs it, and field_fits
// tells a writer whether a field can be written as it is. Errors name the file and the 1-based
// line, so that a user can open the file at the right place. The formats of the monitor layer
// (its timeline and window log) live in src/monitor/timeline_csv.hpp and window_log.hpp.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::csv {

// The blanks trimmed from every field (a CRLF file leaves '\r' at the end of each line).
inline constexpr std::string_view kFieldBlanks = " \t\r";

// How a line becomes fields. A line's final '\r' (a CRLF line end) is dropped first; then
// `line_blanks` are trimmed from both ends of the line, and a line left empty is skipped (it still
// counts in the line numbers); the rest is split at commas, each field trimmed of `field_blanks`.
struct Dialect {
  std::string_view line_blanks = kFieldBlanks;
  std::string_view field_blanks = kFieldBlanks;
};
// Fields trimmed of spaces and of the quotes some writers put around every field; only an empty
// line is skipped (`zeus report`'s inputs).
inline constexpr Dialect kQuotesTrimmed{.line_blanks = "", .field_blanks = " \""};
// Fields exactly as written; a line empty but for carriage returns is skipped (the window log).
inline constexpr Dialect kVerbatim{.line_blanks = "\r", .field_blanks = ""};

// One line split at commas, each field trimmed of `blanks`; empty fields kept. The views point
// into `line`.
std::vector<std::string_view> split_fields(std::string_view line,
                                           std::string_view blanks = kFieldBlanks);

// Whether `field` can be written as one field of a line as it is: no comma and no line break
// (nothing is quoted, and the readers above do not unquote).
bool field_fits(std::string_view field);

// The whole field as a number; nullopt for an empty field, trailing text, or out of range.
// Accepts what std::from_chars accepts ("1.5", "-2", "1e3", "nan", "inf"; no leading '+').
std::optional<double> to_double(std::string_view field);
// A whole number, possibly written as a float ("3" or "3.0"); nullopt otherwise.
std::optional<int> to_int(std::string_view field);

// A timestamp in Unix seconds at or beyond this (about the year 5138) is no date but a corrupted
// row: no later tool could print it.
inline constexpr double kMaxUnixTimeS = 1e11;

// Reads lines one at a time and splits them into fields: the streaming mode every reader here
// uses.
class LineReader {
 public:
  // Streams `path`, a regular file (else the errors of text::read_file, `description` naming the
  // kind of file: "cannot read the <description> <path>: <reason>"); a UTF-8 byte-order mark
  // (spreadsheets write one) is skipped.
  LineReader(const std::filesystem::path& path, std::string_view description, Dialect dialect = {});
  // Streams `in`, from where it stands, as it is (the caller keeps it alive); `name` stands for
  // the path in errors.
  LineReader(std::string name, std::istream& in, Dialect dialect = {});
  // Lines of `text` (the caller keeps it alive), after any byte-order mark.
  static LineReader over_text(std::string name, std::string_view text, Dialect dialect = {});

  LineReader(LineReader&&) noexcept;
  LineReader& operator=(LineReader&&) noexcept;
  ~LineReader();

  const std::string& name() const { return name_; }

  // The fields of the next line that is not blank; false at the end. The views stay valid until
  // the next call. Throws Error(kIo) "<name>: reading failed after line <n>" when the stream
  // fails.
  bool next(std::vector<std::string_view>& fields);
  // The 1-based number of the line next() returned last (0 before the first).
  int line() const { return line_number_; }

  // Throws Error(kInvalidArgument) "<name>:<line>: <what>".
  [[noreturn]] void fail(int line, const std::string& what) const;

 private:
  LineReader(std::string name, Dialect dialect);
  bool next_line();

  std::string name_;
  Dialect dialect_;
  std::unique_ptr<std::istream> owned_;  // the file, when reading a path
  std::istream* in_ = nullptr;           // null: reading text_
  std::string_view text_;
  std::size_t position_ = 0;
  std::string buffer_;     // the line read from the stream
  std::string_view line_;  // the current line, in buffer_ or text_
  int line_number_ = 0;
  bool skip_bom_ = false;  // on the first line: reading a file or text
};

// A CSV file with fixed columns, walked row by row with the fields of the requested columns.
class Reader {
 public:
  // Checks that `path` is a regular file that can be read (else the errors of text::read_file,
  // `description` naming the kind of file in them: "cannot read the <description> <path>:
  // <reason>"); for_each_row then streams it.
  Reader(const std::filesystem::path& path, std::vector<std::string> columns,
         std::string_view description = "CSV file");
  // The same over text already in memory; `name` stands for the path in errors.
  static Reader from_text(std::string name, std::string text, std::vector<std::string> columns);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

  // Throws Error(kInvalidArgument) "<path>:<line>: <what>".
  [[noreturn]] void fail(int line, const std::string& what) const;

  // Calls `row(line, fields)` once per non-blank data line, fields[i] being columns()[i]. The
  // first non-blank line is the header; it must name every column (else fail()). A data line
  // with a different number of fields than the header fails; so does a file with no header.
  using RowFn = std::function<void(int line, const std::vector<std::string_view>& fields)>;
  void for_each_row(const RowFn& row) const;

 private:
  Reader(std::string path, std::optional<std::string> text, std::vector<std::string> columns,
         std::string description);
  std::string expected_header() const;

  std::string path_;
  std::optional<std::string> text_;  // from_text's; none: the file at path_ is streamed
  std::vector<std::string> columns_;
  std::string description_;
};

// A CSV stream whose first non-blank line is its header, read row by row: columns looked up by
// name, each row checked to have as many fields as the header, fields read as numbers. Every
// error is Error(kInvalidArgument) naming the input, "<name>: <what>" or "<name>: line <n>:
// <what>", a failed read included (a bad input, whatever went wrong).
class Table {
 public:
  struct Row {
    int line = 0;
    std::vector<std::string> fields;
  };

  // Reads the header: the first line that is not blank (none: header() is empty).
  explicit Table(LineReader lines);

  const std::string& name() const { return lines_.name(); }
  const std::vector<std::string>& header() const { return header_; }
  std::optional<std::size_t> find_column(std::string_view column) const;
  bool has_column(std::string_view column) const { return find_column(column).has_value(); }
  // The index of each of `names` in the header, or an error naming the missing ones: "the <what>
  // lacks the column(s) ...; its header must have <names> (read "<header>"); <how>".
  std::vector<std::size_t> columns(std::span<const std::string_view> names, std::string_view what,
                                   std::string_view how) const;

  // The next data row; false at the end. A row with another number of fields than the header
  // fails.
  bool next(Row& row);
  // Every remaining row.
  std::vector<Row> read_all();

  // The field as a finite number: "line <n>: <column> is not a number ("<text>")" otherwise.
  double number(const Row& row, std::size_t column) const;
  // The field as a whole number of at most 1e9 in magnitude.
  int integer(const Row& row, std::size_t column) const;

  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail(int line, const std::string& what) const;

 private:
  bool next_fields();

  LineReader lines_;
  std::vector<std::string_view> fields_;
  std::vector<std::string> header_;
};

}  // namespace zeus::csv
