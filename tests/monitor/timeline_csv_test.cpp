// The `zeus monitor --timeline` CSV (src/monitor/timeline_csv.hpp): the bytes the writer puts
// down, read back equal, the layout before temperature rows still read, and bad rows named.
#include "monitor/timeline_csv.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::monitor::PowerDomain;
using zeus::monitor::PowerSample;
using zeus::monitor::TemperatureSample;
using zeus::monitor::timeline_csv::Reader;
using zeus::monitor::timeline_csv::Row;
using zeus::monitor::timeline_csv::Writer;
using zeus::testing::TempDir;

constexpr std::int64_t kSteadyStartNs = 5'000'000'000;
constexpr std::int64_t kWallStartUs = 1'700'000'000'000'000;

struct ReadRow {
  int line;
  double unix_s;
  std::string device;
  std::string domain;
  double watts;
  double celsius;
  bool operator==(const ReadRow&) const = default;
};

std::vector<ReadRow> read_rows(const fs::path& path) {
  Reader reader(path);
  std::vector<ReadRow> rows;
  Row row;
  while (reader.next(row)) {
    rows.push_back({row.line, row.unix_s, std::string(row.device), std::string(row.domain),
                    row.watts, row.celsius});
  }
  return rows;
}

std::string error_of(const fs::path& path) {
  try {
    read_rows(path);
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    return error.what();
  }
  return "";
}

// Writes two sweeps of GPUs 0 and 1, and temperature changes after the first.
void write_timeline(const fs::path& path) {
  Writer writer(zeus::OutputFile(path), kSteadyStartNs, kWallStartUs);
  writer.write(
      std::vector<PowerSample>{{kSteadyStartNs + 1'000, 0, PowerDomain::kDeviceInstant, 251.25},
                               {kSteadyStartNs + 1'000, 1, PowerDomain::kMemoryAverage, 40.0004}});
  writer.write(std::vector<TemperatureSample>{{kSteadyStartNs + 1'000, 0, 54},
                                              {kSteadyStartNs + 1'000, 1, -3}});
  writer.write(std::vector<PowerSample>{
      {kSteadyStartNs + 1'500'250'000, 0, PowerDomain::kDeviceAverage, 0.0}});
  ASSERT_TRUE(writer.finish());
}

TEST(TimelineCsv, WritesTheDocumentedBytes) {
  TempDir dir;
  write_timeline(dir.path() / "t.csv");
  EXPECT_EQ(zeus::text::read_file(dir.path() / "t.csv"),
            "timestamp,device,domain,watts,celsius\n"
            "1700000000.000001,gpu0,device_instant,251.250,\n"
            "1700000000.000001,gpu1,memory_average,40.000,\n"
            "1700000000.000001,gpu0,temperature,,54\n"
            "1700000000.000001,gpu1,temperature,,-3\n"
            "1700000001.500250,gpu0,device_average,0.000,\n");
}

TEST(TimelineCsv, WhatIsWrittenIsReadBack) {
  TempDir dir;
  write_timeline(dir.path() / "t.csv");
  const std::vector<ReadRow> expected = {
      {2, 1700000000.000001, "gpu0", "device_instant", 251.25, 0.0},
      {3, 1700000000.000001, "gpu1", "memory_average", 40.0, 0.0},
      {4, 1700000000.000001, "gpu0", "temperature", 0.0, 54.0},
      {5, 1700000000.000001, "gpu1", "temperature", 0.0, -3.0},
      {6, 1700000001.50025, "gpu0", "device_average", 0.0, 0.0}};
  EXPECT_EQ(read_rows(dir.path() / "t.csv"), expected);
}

TEST(TimelineCsv, ReadsTheLayoutBeforeTemperatureRows) {
  TempDir dir;
  zeus::testing::write_file(dir.path() / "old.csv",
                            "timestamp,device,domain,watts\n"
                            "1700000000.5,gpu0,device_instant,100.000\n"
                            "1700000001.5,gpu0,device_instant,120.500");
  const std::vector<ReadRow> expected = {{2, 1700000000.5, "gpu0", "device_instant", 100.0, 0.0},
                                         {3, 1700000001.5, "gpu0", "device_instant", 120.5, 0.0}};
  EXPECT_EQ(read_rows(dir.path() / "old.csv"), expected);
  // ... where a temperature row has nowhere to be.
  zeus::testing::write_file(dir.path() / "old.csv",
                            "timestamp,device,domain,watts\n1,gpu0,temperature,40");
  EXPECT_EQ(error_of(dir.path() / "old.csv"),
            (dir.path() / "old.csv").string() +
                ": line 2: a temperature row, but the header has no celsius column "
                "(timestamp,device,domain,watts,celsius)");
}

TEST(TimelineCsv, ReadsAnyColumnOrderQuotesCrlfAndAByteOrderMark) {
  TempDir dir;
  zeus::testing::write_file(
      dir.path() / "t.csv",
      "\xEF\xBB\xBF\"celsius\",\"watts\",\"domain\",\"device\",\"timestamp\"\r\n"
      "\r\n"
      ", 99.5 ,\"device_instant\",gpu3,1700000000\r\n"
      "41,,temperature,gpu3,1700000000\r");
  const std::vector<ReadRow> expected = {{3, 1700000000.0, "gpu3", "device_instant", 99.5, 0.0},
                                         {4, 1700000000.0, "gpu3", "temperature", 0.0, 41.0}};
  EXPECT_EQ(read_rows(dir.path() / "t.csv"), expected);
}

TEST(TimelineCsv, BadRowsAreNamedByLine) {
  TempDir dir;
  const fs::path path = dir.path() / "t.csv";
  const auto error_for = [&](const std::string& text) {
    zeus::testing::write_file(path, text);
    return error_of(path);
  };
  const std::string where = path.string() + ": ";
  EXPECT_EQ(error_for("timestamp,device,watts\n1,gpu0,100"),
            where +
                "the power timeline lacks the column domain; its header must have "
                "timestamp,device,domain,watts (read \"timestamp,device,watts\"); it is the file "
                "that `zeus monitor --timeline` writes");
  EXPECT_EQ(error_for("timestamp,device,domain,watts\n1,gpu0,instant,lots"),
            where + "line 2: watts is not a number (\"lots\")");
  EXPECT_EQ(error_for("timestamp,device,domain,watts\n1,gpu0,100"),
            where + "line 2: expected 4 fields as in the header, found 3");
  EXPECT_EQ(error_for("timestamp,device,domain,watts\n1.7e68,gpu0,instant,1"),
            where + "line 2: timestamp 1.7e68 is not a Unix time in seconds (0 to 1e+11)");
  EXPECT_EQ(error_for("timestamp,device,domain,watts,celsius\n1,gpu0,temperature,,hot"),
            where + "line 2: celsius is not a number (\"hot\")");
  EXPECT_EQ(error_for("timestamp,device,domain,watts,celsius\n1,gpu0,temperature,,1e9"),
            where + "line 2: celsius 1e9 is not a GPU temperature");
  EXPECT_EQ(error_for("timestamp,device,domain,watts,celsius\n1,gpu0,instant,,40"),
            where + "line 2: watts is not a number (\"\")");
}

TEST(TimelineCsv, TellsATimelineFromOtherFiles) {
  TempDir dir;
  const auto recognised = [&](const std::string& header) {
    zeus::testing::write_file(dir.path() / "x.csv", header);
    return Reader::recognises(zeus::csv::Table(
        zeus::csv::LineReader(dir.path() / "x.csv", "CSV file", Reader::kDialect)));
  };
  EXPECT_TRUE(recognised("timestamp,device,domain,watts,celsius"));
  EXPECT_TRUE(recognised("\"watts\""));
  EXPECT_FALSE(recognised("start_time,window_name,elapsed_time,gpu0_energy"));
  EXPECT_FALSE(recognised(""));
}

}  // namespace
