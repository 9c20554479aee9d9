#include "zeus/monitor/replay_monitor.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "support/shared_data.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::ErrorKind;
using zeus::monitor::ReplayMonitor;
using zeus::testing::TempDir;
using zeus::testing::write_file;

std::filesystem::path shared_data() {
  return zeus::testing::shared_data_dir();
}

TEST(ReplayMonitor, PlaysRowsInOrder) {
  TempDir dir;
  write_file(dir.path() / "log.csv",
             "start_time,window_name,elapsed_time,gpu0_energy,gpu2_energy\n"
             "1700000000.5,a,1.5,10.25,20\n"
             "1700000002.0,b,2,30,40.5");
  ReplayMonitor replay(dir.path() / "log.csv");
  EXPECT_EQ(replay.gpu_indices(), (std::vector<int>{0, 2}));
  replay.begin_window("a");
  EXPECT_THROW(replay.begin_window("a"), zeus::Error);
  const zeus::monitor::Measurement a = replay.end_window("a");
  EXPECT_EQ(a.time_s, 1.5);
  EXPECT_EQ(a.gpu_energy_j.at(0), 10.25);
  EXPECT_EQ(a.gpu_energy_j.at(2), 20.0);
  replay.begin_window("x");
  replay.end_window("x", {.cancel = true});  // consumes no row
  replay.begin_window("b");
  EXPECT_EQ(replay.end_window("b").gpu_energy_j.at(2), 40.5);
  replay.begin_window("c");
  try {
    replay.end_window("c");
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(error.what()).find("exhausted"), std::string::npos);
  }
}

TEST(ReplayMonitor, NameMismatchIsAnErrorUnlessNamesAreIgnored) {
  TempDir dir;
  write_file(dir.path() / "log.csv", "start_time,window_name,elapsed_time,gpu0_energy\n0,a,1,2");
  ReplayMonitor strict(dir.path() / "log.csv");
  strict.begin_window("b");
  EXPECT_THROW(strict.end_window("b"), zeus::Error);
  ReplayMonitor lenient(dir.path() / "log.csv", /*match_window_name=*/false);
  lenient.begin_window("b");
  EXPECT_EQ(lenient.end_window("b").gpu_energy_j.at(0), 2.0);
}

TEST(ReplayMonitor, MalformedLogsNameTheLine) {
  TempDir dir;
  const auto expect_error = [&](const std::string& text, const std::string& fragment) {
    write_file(dir.path() / "bad.csv", text);
    try {
      ReplayMonitor replay(dir.path() / "bad.csv");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_error("time,name,elapsed,gpu0_energy", "bad.csv:1");
  expect_error("start_time,window_name,elapsed_time,cpu0_energy", "cpu0_energy");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,1", "bad.csv:2");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,1,x", "gpu0_energy");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy,gpu0_energy\n0,a,1,2,3",
               "names GPU 0 again (also column 4)");
  expect_error("start_time,window_name,elapsed_time,gpu", "\"gpu\" is not of the form");
  // Numbers a ZeusMonitor never writes: infinite, not a number, negative, with blanks.
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,1,inf", "bad.csv:2");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,nan,1", "bad.csv:2");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,1,1e999", "finite");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a,-1,1", "bad.csv:2");
  expect_error("start_time,window_name,elapsed_time,gpu0_energy\n0,a, 1,1", "bad.csv:2");
  // Not a regular file: refused at once (a FIFO without a writer would block).
  expect_error("", "is empty");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo.csv").c_str(), 0600), 0);
  try {
    ReplayMonitor replay(dir.path() / "fifo.csv");
    ADD_FAILURE() << "accepted a FIFO";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("named pipe"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ReplayMonitor(dir.path() / "missing.csv"), zeus::Error);
  EXPECT_THROW(ReplayMonitor(dir.path()), zeus::Error);
}

TEST(ReplayMonitor, AcceptsAByteOrderMarkAndCrlf) {
  TempDir dir;
  write_file(dir.path() / "log.csv",
             "\xEF\xBB\xBFstart_time,window_name,elapsed_time,gpu0_energy\r\n"
             "1700000000.5,a,1.5,10.25\r\n\r\n1700000002,b,2,30\r\n");
  ReplayMonitor replay(dir.path() / "log.csv");
  EXPECT_EQ(replay.gpu_indices(), (std::vector<int>{0}));
  ASSERT_EQ(replay.rows_left(), 2u);
  EXPECT_EQ(replay.rows().back().window_name, "b");
}

TEST(ReplayMonitor, ReadsTheRealProfilingLogs) {
  const auto folder = shared_data() / "plo-profiles";
  if (!std::filesystem::exists(folder)) {
    GTEST_SKIP() << "../shared/data/plo-profiles is absent; skipping the real-log check";
  }
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".csv") {
      continue;
    }
    ++files;
    ReplayMonitor replay(entry.path());
    EXPECT_FALSE(replay.gpu_indices().empty()) << entry.path();
    ASSERT_GT(replay.rows_left(), 0u) << entry.path();
    const zeus::monitor::ReplayRow& first = replay.rows().front();
    EXPECT_TRUE(first.window_name.starts_with("__GlobalPowerLimitOptimizer_")) << entry.path();
    replay.begin_window(first.window_name);
    const zeus::monitor::Measurement measurement = replay.end_window(first.window_name);
    EXPECT_GT(measurement.time_s, 0.0);
    EXPECT_GT(measurement.total_energy_j(), 0.0);
  }
  EXPECT_GT(files, 0);
}

}  // namespace
