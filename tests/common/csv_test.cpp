#include "common/csv.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::csv::LineReader;
using zeus::csv::Reader;
using zeus::csv::Table;

struct Row {
  int line;
  std::vector<std::string> fields;
};

std::vector<Row> rows_of(const Reader& reader) {
  std::vector<Row> rows;
  reader.for_each_row([&](int line, const std::vector<std::string_view>& fields) {
    rows.push_back({line, std::vector<std::string>(fields.begin(), fields.end())});
  });
  return rows;
}

std::string error_of(const Reader& reader) {
  try {
    rows_of(reader);
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    return error.what();
  }
  return "";
}

// `open` fails for the missing trace file `path` as text::read_file does.
void expect_missing(const std::filesystem::path& path, const std::function<void()>& open) {
  try {
    open();
    FAIL() << "no error for a missing file";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_EQ(std::string(error.what()),
              "cannot read the trace file " + path.string() + ": No such file or directory");
  }
}

TEST(Csv, SplitFieldsTrimsBlanksAndKeepsEmptyFields) {
  EXPECT_EQ(zeus::csv::split_fields(" a ,\tb,, c\r"),
            (std::vector<std::string_view>{"a", "b", "", "c"}));
  EXPECT_EQ(zeus::csv::split_fields(""), (std::vector<std::string_view>{""}));
}

TEST(Csv, NumbersMustFillTheWholeField) {
  EXPECT_EQ(zeus::csv::to_double("1.5"), 1.5);
  EXPECT_EQ(zeus::csv::to_double("-2e3"), -2000.0);
  EXPECT_FALSE(zeus::csv::to_double(""));
  EXPECT_FALSE(zeus::csv::to_double("1.5x"));
  EXPECT_EQ(zeus::csv::to_int("42"), 42);
  EXPECT_EQ(zeus::csv::to_int("3.0"), 3);
  EXPECT_FALSE(zeus::csv::to_int("3.5"));
  EXPECT_FALSE(zeus::csv::to_int("nan"));
  EXPECT_FALSE(zeus::csv::to_int("1e20"));
  EXPECT_FALSE(zeus::csv::to_int(""));
}

TEST(Csv, PicksColumnsByNameInTheRequestedOrder) {
  const Reader reader =
      Reader::from_text("t.csv", "b,extra,a\r\n2,x,1\r\n\n  \n4,y,3\n", {"a", "b"});
  const std::vector<Row> rows = rows_of(reader);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(rows[1].line, 5);  // blank lines count
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"3", "4"}));
}

TEST(Csv, AUtf8ByteOrderMarkBeforeTheHeaderIsSkipped) {
  const Reader reader = Reader::from_text("t.csv",
                                          "\xEF\xBB\xBF"
                                          "a,b\n1,2\n",
                                          {"a", "b"});
  const std::vector<Row> rows = rows_of(reader);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"1", "2"}));
}

TEST(Csv, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(error_of(Reader::from_text("t.csv", "a,c\n1,2\n", {"a", "b"})),
            "t.csv:1: the header has no column 'b' (expected the columns a,b)");
  EXPECT_EQ(error_of(Reader::from_text("t.csv", "a,b\n1,2\n1\n", {"a", "b"})),
            "t.csv:3: expected 2 fields, found 1");
  EXPECT_EQ(error_of(Reader::from_text("t.csv", "\n \n", {"a"})),
            "t.csv:1: the file is empty; expected the header a");
  const Reader reader = Reader::from_text("t.csv", "a\n", {"a"});
  try {
    reader.fail(7, "bad value");
    FAIL() << "fail() returned";
  } catch (const zeus::Error& error) {
    EXPECT_STREQ(error.what(), "t.csv:7: bad value");
  }
}

TEST(Csv, ReadsAFileAndNamesAMissingOne) {
  const zeus::testing::TempDir dir("zeus-csv-test");
  const auto path = dir.path() / "x.csv";
  std::ofstream(path) << "a\n1\n";
  const std::vector<Row> rows = rows_of(Reader(path, {"a"}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"1"}));
  expect_missing(dir.path() / "missing.csv",
                 [&] { Reader(dir.path() / "missing.csv", {"a"}, "trace file"); });
}

// Every non-blank line of `lines` with its number.
std::vector<Row> lines_of(LineReader lines) {
  std::vector<Row> rows;
  std::vector<std::string_view> fields;
  while (lines.next(fields)) {
    rows.push_back({lines.line(), std::vector<std::string>(fields.begin(), fields.end())});
  }
  return rows;
}

bool operator==(const Row& a, const Row& b) {
  return a.line == b.line && a.fields == b.fields;
}

TEST(Csv, LineReaderStreamsAStreamLineByLine) {
  std::istringstream in(" a , b \r\n\n \t\n\"c\",d");
  const std::vector<Row> rows = lines_of(LineReader("in", in));
  EXPECT_EQ(rows, (std::vector<Row>{{1, {"a", "b"}}, {4, {"\"c\"", "d"}}}));
  std::istringstream empty;
  EXPECT_TRUE(lines_of(LineReader("in", empty)).empty());
}

TEST(Csv, DialectsSayWhatIsTrimmedAndWhatIsBlank) {
  const std::string text = "\"a\", b\r\n  \r\n\r\n x ,\ty\n";
  // `zeus report`'s inputs: quotes and spaces trimmed; only an empty line is blank.
  EXPECT_EQ(lines_of(LineReader::over_text("t", text, zeus::csv::kQuotesTrimmed)),
            (std::vector<Row>{{1, {"a", "b"}}, {2, {""}}, {4, {"x", "\ty"}}}));
  // The window log: fields as written; a line of carriage returns is blank.
  EXPECT_EQ(lines_of(LineReader::over_text("t", text, zeus::csv::kVerbatim)),
            (std::vector<Row>{{1, {"\"a\"", " b"}}, {2, {"  "}}, {4, {" x ", "\ty"}}}));
  // The default: blanks trimmed, a line of blanks skipped.
  EXPECT_EQ(lines_of(LineReader::over_text("t", text)),
            (std::vector<Row>{{1, {"\"a\"", "b"}}, {4, {"x", "y"}}}));
}

TEST(Csv, LineReaderReadsAFileAfterItsByteOrderMark) {
  const zeus::testing::TempDir dir("zeus-csv-test");
  const auto path = dir.path() / "x.csv";
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  std::ofstream(path) << kBom << "a,b\n" << kBom << "1,2\n";
  LineReader lines(path, "trace file");
  EXPECT_EQ(lines.name(), path.string());
  // Only the file's start: a mark further on is data.
  const std::string marked = std::string(kBom) + "1";
  EXPECT_EQ(lines_of(std::move(lines)), (std::vector<Row>{{1, {"a", "b"}}, {2, {marked, "2"}}}));
  expect_missing(dir.path() / "missing.csv",
                 [&] { LineReader(dir.path() / "missing.csv", "trace file"); });
  // A FIFO is refused before it is opened (which would wait for a writer).
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  try {
    LineReader fifo(dir.path() / "fifo", "trace file");
    FAIL() << "a FIFO was accepted";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("named pipe"), std::string::npos) << error.what();
  }
  EXPECT_THROW(Reader(dir.path() / "fifo", {"a"}), zeus::Error);
  try {
    LineReader::over_text("t.csv", "").fail(3, "bad");
    FAIL() << "fail() returned";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    EXPECT_STREQ(error.what(), "t.csv:3: bad");
  }
}

TEST(Csv, ReaderStreamsItsFile) {
  const zeus::testing::TempDir dir("zeus-csv-test");
  const auto path = dir.path() / "x.csv";
  std::ofstream(path) << "a\n1\n";
  const Reader reader(path, {"a"});
  // Read when walked, not when constructed.
  std::ofstream(path, std::ios::app) << "2\n";
  const std::vector<Row> rows = rows_of(reader);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"2"}));
}

// A table over `text`, which must outlive it.
Table table_of(const std::string& text) {
  return Table(LineReader::over_text("t.csv", text, zeus::csv::kQuotesTrimmed));
}

std::string table_error(const std::function<void()>& read) {
  try {
    read();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    return error.what();
  }
  return "";
}

TEST(Csv, TableLooksColumnsUpAndStreamsRows) {
  const std::string text = "\n b , \"a\" ,c\n1,2.5,x\n\n-3,4e1,y\n";
  Table table = table_of(text);
  EXPECT_EQ(table.name(), "t.csv");
  EXPECT_EQ(table.header(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(table.find_column("a"), 1u);
  EXPECT_FALSE(table.has_column("d"));
  constexpr std::string_view kWanted[] = {"a", "b"};
  EXPECT_EQ(table.columns(kWanted, "table", "how"), (std::vector<std::size_t>{1, 0}));
  Table::Row row;
  ASSERT_TRUE(table.next(row));
  EXPECT_EQ(row.line, 3);
  EXPECT_EQ(table.integer(row, 0), 1);
  EXPECT_EQ(table.number(row, 1), 2.5);
  const std::vector<Table::Row> rest = table.read_all();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].line, 5);
  EXPECT_EQ(table.integer(rest[0], 0), -3);
  EXPECT_EQ(table.number(rest[0], 1), 40.0);
  EXPECT_FALSE(table.next(row));
  EXPECT_TRUE(table_of("").header().empty());
}

TEST(Csv, TableErrorsNameTheFileAndLine) {
  static constexpr std::string_view kWanted[] = {"a", "b", "c"};
  EXPECT_EQ(table_error([] { table_of("a,x\n").columns(kWanted, "thing", "make one"); }),
            "t.csv: the thing lacks the columns b, c; its header must have a,b,c (read \"a,x\"); "
            "make one");
  EXPECT_EQ(table_error([] { table_of("x,b,a\n").columns(kWanted, "thing", "make one"); }),
            "t.csv: the thing lacks the column c; its header must have a,b,c (read \"x,b,a\"); "
            "make one");
  EXPECT_EQ(table_error([] { table_of("a,b\n1,2\n1\n").read_all(); }),
            "t.csv: line 3: expected 2 fields as in the header, found 1");
  const auto field_error = [](const std::string& field, bool integer) {
    return table_error([&] {
      const std::string text = "n\n" + field + "\n";
      Table table = table_of(text);
      Table::Row row;
      ASSERT_TRUE(table.next(row));
      integer ? (void)table.integer(row, 0) : (void)table.number(row, 0);
    });
  };
  EXPECT_EQ(field_error("lots", false), "t.csv: line 2: n is not a number (\"lots\")");
  EXPECT_EQ(field_error("inf", false), "t.csv: line 2: n is not a number (\"inf\")");
  EXPECT_EQ(field_error("\"\"", false), "t.csv: line 2: n is not a number (\"\")");
  EXPECT_EQ(field_error("1.5", true), "t.csv: line 2: n is not an integer (\"1.5\")");
  EXPECT_EQ(field_error("2e9", true), "t.csv: line 2: n is not an integer (\"2e9\")");
  EXPECT_EQ(table_error([] { table_of("a\n").fail("whole file"); }), "t.csv: whole file");
  EXPECT_EQ(table_error([] { table_of("a\n").fail(7, "one line"); }), "t.csv: line 7: one line");
}

TEST(Csv, FieldsThatFitUnquoted) {
  EXPECT_TRUE(zeus::csv::field_fits("step \"1\"; epoch\t2"));
  EXPECT_TRUE(zeus::csv::field_fits(""));
  EXPECT_FALSE(zeus::csv::field_fits("a,b"));
  EXPECT_FALSE(zeus::csv::field_fits("a\nb"));
  EXPECT_FALSE(zeus::csv::field_fits("a\r"));
  EXPECT_EQ(zeus::csv::split_fields(" \"a\" ,b", " \""), (std::vector<std::string_view>{"a", "b"}));
}

}  // namespace
