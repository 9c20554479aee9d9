#include "common/csv.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::csv::Reader;

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
  try {
    Reader(dir.path() / "missing.csv", {"a"}, "trace file");
    FAIL() << "no error for a missing file";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_EQ(std::string(error.what()), "cannot read the trace file " +
                                             (dir.path() / "missing.csv").string() +
                                             ": No such file or directory");
  }
}

}  // namespace
