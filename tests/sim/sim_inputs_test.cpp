// The simulator's file and number inputs (issue 15): every number of a trace or arrivals file is
// bounded where it is read and named by file:line; duplicate rows are refused naming both lines;
// a row with a corrupted workload name is reported, not silently dropped; FIFOs and directories
// are refused without blocking; counts that would exhaust memory are refused up front. All over
// small synthetic files, so that these tests run without ../shared/data.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::ErrorKind;
using zeus::sim::load_trace;
using zeus::sim::Workload;
using zeus::sim::WorkloadTrace;
using zeus::testing::expect_error;
using zeus::testing::TempDir;

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

const std::string kTrainHeader =
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
const std::string kPowerHeader =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";

// Two batch sizes, two power limits; b0 = 16 converges.
const std::string kTrainRows =
    "toy,net,8,sgd,1e-3,1,0.5,4\n"
    "toy,net,8,sgd,1e-3,2,0.5,5\n"
    "toy,net,16,sgd,1e-3,1,0.5,2\n"
    "toy,net,16,sgd,1e-3,2,0.5,3\n"
    "toy,net,16,sgd,1e-3,1,0.6,6\n";
const std::string kPowerRows =
    "toy,net,8,sgd,100,20.0,90.0\n"
    "toy,net,8,sgd,200,10.0,150.0\n"
    "toy,net,16,sgd,100,7.0,95.0\n"
    "toy,net,16,sgd,200,6.0,180.0\n";

Workload toy() {
  return Workload{"toy", "net", "sgd", 0.5, 10, 16, true};
}

void write_toy(const fs::path& dir, const std::string& train_rows = kTrainRows,
               const std::string& power_rows = kPowerRows) {
  write_file(dir / "summary_train.csv", kTrainHeader + train_rows);
  write_file(dir / "summary_power_toy1.csv", kPowerHeader + power_rows);
}

// ---- Numbers in trace files ----

TEST(TraceBounds, EveryNumberIsCheckedWhereItIsRead) {
  TempDir dir;
  // A train row appended after the valid ones (line 7), with one field replaced.
  const auto train_row = [](const std::string& batch, const std::string& lr, const std::string& run,
                            const std::string& metric, const std::string& epoch) {
    return "toy,net," + batch + ",sgd," + lr + "," + run + "," + metric + "," + epoch + "\n";
  };
  struct Case {
    std::string row;
    std::string column;
  };
  const std::vector<Case> train_cases = {
      {train_row("1e308", "1e-3", "3", "0.5", "2"), "batch_size"},
      {train_row("20000000", "1e-3", "3", "0.5", "2"), "batch_size"},
      {train_row("0", "1e-3", "3", "0.5", "2"), "batch_size"},
      {train_row("16", "inf", "3", "0.5", "2"), "learning_rate"},
      {train_row("16", "-1", "3", "0.5", "2"), "learning_rate"},
      {train_row("16", "1e-3", "3e9", "0.5", "2"), "run"},
      {train_row("16", "1e-3", "3", "inf", "2"), "target_metric"},
      {train_row("16", "1e-3", "3", "1e309", "2"), "target_metric"},
      {train_row("16", "1e-3", "3", "0.5", "inf"), "target_epoch"},
      {train_row("16", "1e-3", "3", "0.5", "1e308"), "target_epoch"},
      {train_row("16", "1e-3", "3", "0.5", "2000000"), "target_epoch"},
      {train_row("16", "1e-3", "3", "0.5", "-3"), "target_epoch"},
  };
  for (const Case& c : train_cases) {
    write_toy(dir.path(), kTrainRows + c.row);
    expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
                 {"summary_train.csv:7: column '" + c.column + "'", "out of range"});
  }
  const auto power_row = [](const std::string& limit, const std::string& time,
                            const std::string& power) {
    return "toy,net,16,sgd," + limit + "," + time + "," + power + "\n";
  };
  const std::vector<Case> power_cases = {
      {power_row("1e309", "6.0", "180"), "power_limit"},
      {power_row("200000", "6.0", "180"), "power_limit"},
      {power_row("150", "1e308", "180"), "time_per_epoch"},
      {power_row("150", "inf", "180"), "time_per_epoch"},
      {power_row("150", "nan", "180"), "time_per_epoch"},
      {power_row("150", "1e-9", "180"), "time_per_epoch"},
      {power_row("150", "0", "180"), "time_per_epoch"},
      {power_row("150", "6.0", "1e308"), "average_power"},
      {power_row("150", "6.0", "-nan"), "average_power"},
  };
  for (const Case& c : power_cases) {
    write_toy(dir.path(), kTrainRows, kPowerRows + c.row);
    expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
                 {"summary_power_toy1.csv:6: column '" + c.column + "'", "out of range"});
  }
  // The message: what was read and the range.
  write_toy(dir.path(), kTrainRows, kPowerRows + power_row("150", "1e308", "180"));
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"column 'time_per_epoch' (read \"1e308\") is out of range (1e-06 to 1000000000 s)",
                "fix or remove the row"});
  // Text that is no number at all says what the column must be.
  write_toy(dir.path(), kTrainRows + train_row("16", "fast", "3", "0.5", "2"));
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"summary_train.csv:7:", "learning_rate", "fast"});
}

TEST(TraceBounds, TheLimitsThemselvesAreAccepted) {
  TempDir dir;
  write_toy(dir.path(), kTrainRows + "toy,net,16,sgd,1e6,3,0.5,1000000\n",
            kPowerRows + "toy,net,16,sgd,100000,1e9,100000\n");
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  const auto& b16 = trace.at_batch_size(16);
  ASSERT_EQ(b16.power.size(), 3u);
  EXPECT_EQ(b16.power.back().power_limit_w, 100000);
  EXPECT_EQ(b16.power.back().time_per_epoch_s, 1e9);
  EXPECT_EQ(b16.target_epochs.back(), 1000000);
  // The largest products stay finite: the oracle over this trace is a number.
  EXPECT_TRUE(std::isfinite(zeus::sim::compute_oracle(trace, 0.5).expected_cost));
}

// ---- Duplicate rows ----

TEST(TraceDuplicates, ARepeatedTrainRowNamesBothLines) {
  TempDir dir;
  // A repeat at a target metric other than the simulated one: accepted before (it never reached
  // the join), refused now, like a repeated power row.
  write_toy(dir.path(), kTrainRows + "toy,net,16,sgd,1e-3,1,0.6,6\n");
  expect_error(
      [&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
      {"summary_train.csv:7: duplicate of line 6", "run 1", "batch size 16", "target_metric 0.6"});
  // The same run with another epoch is the same row (a row is identified by workload, batch size,
  // run and target metric).
  write_toy(dir.path(), kTrainRows + "toy,net,16,sgd,1e-3,2,0.50,9\n");
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"summary_train.csv:7: duplicate of line 5", "run 2"});
  // Another workload's repeat is refused as well: the file is wrong whichever cell reads it.
  write_toy(dir.path(),
            kTrainRows + "other,net,16,sgd,1e-3,1,0.5,2\nother,net,16,sgd,1e-3,1,0.5,2\n");
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"summary_train.csv:8: duplicate of line 7", "other/net/sgd"});
}

TEST(TraceDuplicates, ARepeatedPowerRowNamesBothLines) {
  TempDir dir;
  write_toy(dir.path(), kTrainRows, kPowerRows + "toy,net,8,sgd,100,21.0,91.0\n");
  expect_error(
      [&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
      {"summary_power_toy1.csv:6: duplicate of line 2", "batch size 8", "power limit 100 W"});
}

// ---- Corrupted names ----

bool has_note(const WorkloadTrace& trace, const std::vector<std::string>& fragments) {
  return std::any_of(trace.notes.begin(), trace.notes.end(), [&](const std::string& note) {
    return std::all_of(fragments.begin(), fragments.end(), [&](const std::string& fragment) {
      return note.find(fragment) != std::string::npos;
    });
  });
}

std::string notes_text(const WorkloadTrace& trace) {
  std::string text;
  for (const std::string& note : trace.notes) {
    text += note + "\n";
  }
  return text;
}

TEST(TraceNames, ACorruptedNetworkNameIsReportedWithItsLine) {
  TempDir dir;
  // Line 3 is toy/net/sgd with its network garbled: it used to vanish from batch size 8 without a
  // word (the batch size then had one run instead of two).
  write_toy(dir.path(),
            "toy,net,8,sgd,1e-3,1,0.5,4\n"
            "toy,nte,8,sgd,1e-3,2,0.5,5\n"
            "toy,net,16,sgd,1e-3,1,0.5,2\n"
            "toy,net,16,sgd,1e-3,2,0.5,3\n");
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  EXPECT_TRUE(has_note(trace, {"summary_train.csv:3:", "1 row of toy/nte/sgd",
                               "left out of toy/net/sgd", "network 'nte'", "corrupted 'net'"}))
      << notes_text(trace);
  EXPECT_EQ(trace.at_batch_size(8).target_epochs.size(), 1u);
}

// Found by fuzz/trace_csv: a name with the workload key's separator in it (0x1f) split into four
// parts and was read past the end of a three-name array. A control character in a name is
// corruption: refused, naming the line and the column.
TEST(TraceNames, AControlCharacterInANameIsRefused) {
  TempDir dir;
  write_toy(dir.path(), kTrainRows, kPowerRows + "\x1fsh0,net,8,sgd,150,15.0,120.0\n");
  expect_error(
      [&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
      {"summary_power_toy1.csv:6:", "column 'dataset' contains the control character 0x1f"});
  write_toy(dir.path(), kTrainRows + "toy,n\tet,8,sgd,1e-3,3,0.5,4\n");
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"summary_train.csv:7:", "column 'network' contains the control character 0x09"});
}

TEST(TraceNames, CorruptedDatasetAndOptimizerInThePowerFileToo) {
  TempDir dir;
  write_toy(dir.path(), kTrainRows,
            kPowerRows +
                "t0y,net,16,sgd,150,6.5,120.0\n"
                "toy,net,16,s9d,150,6.5,120.0\n"
                "toy,net,8,s9d,150,15.0,120.0\n");
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  EXPECT_TRUE(
      has_note(trace, {"summary_power_toy1.csv:6:", "1 row of t0y/net/sgd", "dataset 't0y'"}))
      << notes_text(trace);
  EXPECT_TRUE(
      has_note(trace, {"summary_power_toy1.csv:7:", "2 rows of toy/net/s9d", "optimizer 's9d'"}))
      << notes_text(trace);
}

TEST(TraceNames, OtherWorkloadsAreNotNoted) {
  TempDir dir;
  // "other" is in both files (a workload of its own); toy/net/adam is in the power file only,
  // but "adam" is a name the train file uses (as the reference's V100 power trace has
  // cifar100/shufflenetv2/adam); mnist/lenet/sgd differs in two names.
  write_toy(dir.path(),
            kTrainRows +
                "other,net,16,sgd,1e-3,1,0.5,1\n"
                "big,net,16,adam,1e-3,1,0.5,1\n",
            kPowerRows +
                "other,net,16,sgd,300,1.0,250.0\n"
                "toy,net,16,adam,150,6.5,120.0\n"
                "mnist,lenet,16,sgd,150,6.5,120.0\n");
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  EXPECT_TRUE(trace.notes.empty()) << notes_text(trace);
}

// ---- Non-regular files ----

TEST(TraceFiles, AFifoOrADirectoryIsRefusedWithoutBlocking) {
  TempDir dir;
  write_toy(dir.path());
  fs::remove(dir.path() / "summary_train.csv");
  ASSERT_EQ(mkfifo((dir.path() / "summary_train.csv").c_str(), 0600), 0);
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"summary_train.csv", "FIFO"});
  fs::remove(dir.path() / "summary_train.csv");
  write_toy(dir.path());
  fs::remove(dir.path() / "summary_power_toy1.csv");
  fs::create_directory(dir.path() / "summary_power_toy1.csv");
  try {
    load_trace(dir.path(), "toy1", toy());
    FAIL() << "a directory was read as a trace file";
  } catch (const zeus::Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("summary_power_toy1.csv"), std::string::npos) << what;
    EXPECT_NE(what.find("directory"), std::string::npos) << what;
    EXPECT_EQ(what.find("empty"), std::string::npos) << what;
  }
}

// ---- Job arrivals ----

TEST(Arrivals, TimesAreFiniteNonNegativeAndBounded) {
  TempDir dir;
  const fs::path path = dir.path() / "jobs.csv";
  struct Case {
    std::string rows;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"0,inf\n", "column 'end_time' (read \"inf\") is out of range"},
      {"0,1e309\n", "column 'end_time' (read \"1e309\") is out of range"},
      {"nan,10\n", "column 'start_time'"},
      {"-5,10\n", "column 'start_time' (read \"-5\") is out of range (0 to 1000000000000 s)"},
      {"0,2e12\n", "column 'end_time'"},
      {"0,abc\n", "column 'end_time' must be a number of seconds (read \"abc\")"},
      {"10,5\n", "end_time (5) must be after start_time (10)"},
  };
  for (const Case& c : cases) {
    write_file(path, "start_time,end_time\n0,10\n" + c.rows);
    expect_error([&] { zeus::sim::load_arrivals(path); }, ErrorKind::kInvalidArgument,
                 {path.string() + ":3:", c.fragment});
  }
  for (const std::string ratio : {"0", "-1", "inf", "2e6"}) {
    write_file(path, "start_time,end_time,runtime_ratio\n0,10," + ratio + "\n");
    expect_error([&] { zeus::sim::load_arrivals(path); }, ErrorKind::kInvalidArgument,
                 {path.string() + ":2:", "column 'runtime_ratio'", "out of range"});
  }
  write_file(path, "start_time,end_time\n");
  expect_error([&] { zeus::sim::load_arrivals(path); }, ErrorKind::kInvalidArgument,
               {"lists no job"});
  write_file(path, "begin,end_time\n0,10\n");
  expect_error([&] { zeus::sim::load_arrivals(path); }, ErrorKind::kInvalidArgument,
               {path.string() + ":1:", "start_time"});
}

TEST(Arrivals, ReadAsCsvWithAByteOrderMarkAndAnyColumnOrder) {
  TempDir dir;
  const fs::path path = dir.path() / "jobs.csv";
  write_file(path, "\xEF\xBB\xBFstart_time,end_time\r\n0,10\r\n\r\n5, 1e3\r\n");
  std::vector<zeus::sim::JobArrival> jobs = zeus::sim::load_arrivals(path);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].end_s, 1000.0);
  EXPECT_EQ(jobs[1].runtime_ratio, 1.0);
  write_file(path, "\xEF\xBB\xBFruntime_ratio,end_time,start_time\n0.5,10,0\n");
  jobs = zeus::sim::load_arrivals(path);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].runtime_ratio, 0.5);
  EXPECT_EQ(jobs[0].start_s, 0.0);
  EXPECT_EQ(jobs[0].end_s, 10.0);
}

TEST(Arrivals, AFifoOrADirectoryIsRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path() / "jobs.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { zeus::sim::load_arrivals(fifo); }, ErrorKind::kInvalidArgument,
               {"job arrivals file", fifo.string(), "FIFO"});
  expect_error([&] { zeus::sim::load_arrivals(dir.path()); }, ErrorKind::kInvalidArgument,
               {"job arrivals file", "directory"});
  expect_error([&] { zeus::sim::load_arrivals(dir.path() / "absent.csv"); }, ErrorKind::kNotFound,
               {"job arrivals file", "absent.csv"});
}

// ---- Counts ----

WorkloadTrace tiny_trace() {
  TempDir dir;
  write_toy(dir.path());
  return load_trace(dir.path(), "toy1", toy());
}

TEST(SimulationBounds, CountsThatWouldExhaustMemoryAreRefusedUpFront) {
  const WorkloadTrace trace = tiny_trace();
  zeus::sim::SimulationConfig config;
  config.recurrences = 2'000'000'000;  // was std::bad_alloc from reserving the history
  expect_error(
      [&] { zeus::sim::simulate_recurring(trace, zeus::sim::PolicyKind::kDefault, config); },
      ErrorKind::kInvalidArgument, {"2000000000", "10000000"});
  config.recurrences = 0;
  config.max_tries = std::numeric_limits<int>::max();  // Grid adds to it: an int overflow
  expect_error([&] { zeus::sim::simulate_recurring(trace, zeus::sim::PolicyKind::kGrid, config); },
               ErrorKind::kInvalidArgument, {"max_tries", "1000000"});
  config.max_tries = 20;
  config.window_size = 20'000'000;
  expect_error([&] { zeus::sim::simulate_recurring(trace, zeus::sim::PolicyKind::kZeus, config); },
               ErrorKind::kInvalidArgument, {"window_size", "10000000"});
  config.window_size = 0;
  // 10 seeds x 10,000,000 recurrences: refused before any history is allocated.
  config.recurrences = 10'000'000;
  std::vector<std::uint64_t> seeds(10);
  std::iota(seeds.begin(), seeds.end(), 1);
  expect_error([&] { zeus::sim::run_cell(trace, zeus::sim::PolicyKind::kDefault, config, seeds); },
               ErrorKind::kInvalidArgument, {"10 seeds x 10000000 recurrences", "50000000"});
}

}  // namespace
