// Reading small CSV files with a header row: the simulator's trace files, job arrivals, the
// report's inputs. No quoting (none of our files need it); fields are trimmed of blanks; columns
// are picked by header name, so extra columns and any column order are accepted. Errors name the
// file and the 1-based line, so that a user can open the file at the right place.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::csv {

// The blanks trimmed from every field (a CRLF file leaves '\r' at the end of each line).
inline constexpr std::string_view kFieldBlanks = " \t\r";

// One line split at commas, each field trimmed of kFieldBlanks; empty fields kept. The views
// point into `line`.
std::vector<std::string_view> split_fields(std::string_view line);

// The whole field as a number; nullopt for an empty field, trailing text, or out of range.
// Accepts what std::from_chars accepts ("1.5", "-2", "1e3", "nan", "inf"; no leading '+').
std::optional<double> to_double(std::string_view field);
// A whole number, possibly written as a float ("3" or "3.0"); nullopt otherwise.
std::optional<int> to_int(std::string_view field);

// A CSV file read whole, then walked row by row with the fields of the requested columns.
class Reader {
 public:
  // Reads `path` (text::read_file: a regular file). `description` names the kind of file in the
  // error when it cannot be read ("cannot read the <description> <path>: <reason>").
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
  Reader(std::string path, std::string text, std::vector<std::string> columns);
  std::string expected_header() const;

  std::string path_;
  std::string text_;
  std::vector<std::string> columns_;
};

}  // namespace zeus::csv
