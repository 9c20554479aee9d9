// `zeus report`, run as a user would run it: the three input kinds, the page it writes (no
// external resource, one chart per plot), bad inputs, and the files `zeus monitor --timeline` and
// `zeus sim --out` add for it. The page is drawn in a browser by tests/report/chromium_check.py.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "report_page_check.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Result = zeus::testing::SplitOutput;
using zeus::testing::read_file;

using zeus::testing::contains;
using zeus::testing::page_data;
using zeus::testing::run_zeus_in;
using zeus::testing::write_file;

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

const char* const kProfile = R"({"measurements": [
  {"power_limit": 300, "energy": 900.0, "time": 3.0},
  {"power_limit": 250, "energy": 780.0, "time": 3.3},
  {"power_limit": 200, "energy": 700.0, "time": 3.9},
  {"power_limit": 150, "energy": 690.0, "time": 5.0}]})";

class ReportCli : public testing::Test {
 protected:
  void SetUp() override { dir_ = zeus::testing::fresh_test_dir("zeus_report_"); }
  void TearDown() override {
    if (!HasFailure()) {
      fs::remove_all(dir_);
    }
  }

  // The three inputs, made by the real commands (and a profile written here).
  void make_inputs() {
    Result monitor = run_zeus_in(dir_, "monitor --timeline t.csv --duration 300ms --interval 20ms",
                                 "ZEUS_SIMULATED_GPUS=2:h200");
    ASSERT_EQ(monitor.exit_code, 0) << monitor.err;
    Result sim = run_zeus_in(dir_,
                             "sim --workload cifar100 --gpu v100 --policy all --seeds 1-2 "
                             "--out sim --threads 2");
    ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;
    write_file(dir_ / "profile.json", kProfile);
  }

  fs::path dir_;
};

TEST_F(ReportCli, MonitorTimelineRecordsItsWindow) {
  make_inputs();
  const std::string windows = read_file(dir_ / "t.csv.windows.csv");
  std::istringstream lines(windows);
  std::string header;
  std::string row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(header, "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy");
  EXPECT_TRUE(row.rfind("17", 0) == 0 || row.rfind("18", 0) == 0 || row.rfind("19", 0) == 0)
      << "start_time should be a Unix time: " << row;
  EXPECT_TRUE(contains(row, ",zeus.monitor,")) << row;
  std::string extra;
  EXPECT_FALSE(std::getline(lines, extra) && !extra.empty()) << "one window expected";
}

TEST_F(ReportCli, SimWritesEveryConfiguration) {
  make_inputs();
  const std::string csv = read_file(dir_ / "sim" / "configurations_cifar100_v100.csv");
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "batch_size,power_limit_w,time_s,energy_j,cost,default,oracle,pareto");
  int rows = 0;
  int defaults = 0;
  int oracles = 0;
  int pareto = 0;
  bool oracle_on_front = false;
  while (std::getline(lines, line)) {
    std::vector<std::string> fields;
    std::stringstream stream(line);
    for (std::string field; std::getline(stream, field, ',');) {
      fields.push_back(field);
    }
    ASSERT_EQ(fields.size(), 8U) << line;
    ++rows;
    defaults += fields[5] == "1";
    oracles += fields[6] == "1";
    pareto += fields[7] == "1";
    oracle_on_front = oracle_on_front || (fields[6] == "1" && fields[7] == "1");
    EXPECT_GT(std::stod(fields[2]), 0.0);
    EXPECT_GT(std::stod(fields[3]), 0.0);
  }
  EXPECT_GT(rows, 10);
  EXPECT_EQ(defaults, 1);
  EXPECT_EQ(oracles, 1);
  EXPECT_GE(pareto, 1);
  EXPECT_TRUE(oracle_on_front) << "the cost-optimal configuration is Pareto-optimal";
}

TEST_F(ReportCli, WritesOneSelfContainedPageWithAChartPerPlot) {
  make_inputs();
  const Result report = run_zeus_in(dir_, "report t.csv sim profile.json --out report.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_TRUE(report.out.empty()) << report.out;
  const std::string html = read_file(dir_ / "report.html");

  // Nothing is loaded from elsewhere: no src/href/url() to a URL, no import, and a policy that
  // forbids it; the only "http" strings are Chart.js's licence banner.
  const std::regex external(
      R"re((src|href|action)\s*=\s*["']?\s*([a-z]+:)?//|[^a-z0-9_]url\s*\(|@import|\bfetch\s*\(|XMLHttpRequest|<link|<iframe)re",
      std::regex::icase);
  EXPECT_FALSE(std::regex_search(html, external));
  EXPECT_TRUE(contains(html, "Content-Security-Policy\" content=\"default-src 'none'"));
  std::size_t urls = count(html, "http://") + count(html, "https://");
  EXPECT_LE(urls, 2U) << "only Chart.js's banner comment names its homepage";
  EXPECT_TRUE(contains(html, "Chart.js v3.")) << "Chart.js is embedded";

  // One canvas per plot: a timeline per GPU and one of the GPUs' temperatures, three plots per
  // simulated (workload, GPU), one per profile.
  EXPECT_EQ(count(html, "<canvas id=\"chart-"), 7U);
  EXPECT_EQ(count(html, "data-chart=\"timeline\""), 3U);
  EXPECT_EQ(count(html, "data-chart=\"sim-cost\""), 1U);
  EXPECT_EQ(count(html, "data-chart=\"sim-choice\""), 1U);
  EXPECT_EQ(count(html, "data-chart=\"sim-scatter\""), 1U);
  EXPECT_EQ(count(html, "data-chart=\"profile\""), 1U);

  const json data = page_data(html);
  ASSERT_EQ(data["charts"].size(), 7U);
  for (const auto& [id, spec] : data["charts"].items()) {
    EXPECT_TRUE(contains(html, "<canvas id=\"" + id + "\"")) << id;
  }
  // The cost per recurrence is plotted for every simulated policy, the paper's and low-regret
  // side by side.
  std::vector<std::string> cost_series;
  for (const auto& [id, spec] : data["charts"].items()) {
    if (spec["kind"] == "sim-cost") {
      for (const auto& series : spec["series"]) {
        cost_series.push_back(series["label"].get<std::string>());
      }
    }
  }
  EXPECT_NE(std::find(cost_series.begin(), cost_series.end(), "zeus"), cost_series.end());
  EXPECT_NE(std::find(cost_series.begin(), cost_series.end(), "low-regret"), cost_series.end());
  // The timeline's window (from t.csv.windows.csv) is shaded.
  const json& timeline = data["charts"]["chart-1"];
  EXPECT_EQ(timeline["kind"], "timeline");
  ASSERT_EQ(timeline["bands"].size(), 1U);
  EXPECT_EQ(timeline["bands"][0]["label"], "zeus.monitor");
  EXPECT_GE(timeline["series"].size(), 1U);
  EXPECT_GT(timeline["series"][0]["points"].size(), 3U);
  // The scatter marks Default, the oracle and Zeus's final choice, and draws the Pareto front.
  const json& scatter = data["charts"]["chart-6"];
  EXPECT_EQ(scatter["kind"], "sim-scatter");
  std::vector<std::string> markers;
  for (const json& marker : scatter["markers"]) {
    markers.push_back(marker["label"]);
  }
  EXPECT_NE(std::find(markers.begin(), markers.end(), "Default"), markers.end());
  EXPECT_NE(std::find(markers.begin(), markers.end(), "Oracle"), markers.end());
  EXPECT_NE(std::find(markers.begin(), markers.end(), "Zeus final"), markers.end());
  EXPECT_GE(scatter["pareto"].size(), 1U);
  // The default selector is ZeusCost(eta=0.5), as the optimizer's: 0.5 E + 0.5 x 300 W x T is
  // lowest at 250 W (885 J).
  const json& profile = data["charts"]["chart-7"];
  EXPECT_EQ(profile["kind"], "profile");
  EXPECT_EQ(profile["chosen"], 250);
  EXPECT_TRUE(contains(profile["selector"].get<std::string>(), "0.5"));
  // Axis labels carry units.
  for (const char* label :
       {"Power (W)", "Time since the first sample (s)", "Cost per recurrence (J, log scale)",
        "Power limit (W)", "Expected energy per recurrence (J)", "Expected time per recurrence (s)",
        "Energy (J)", "Time (s)"}) {
    EXPECT_TRUE(contains(html, label)) << label;
  }
}

TEST_F(ReportCli, SelectorPicksTheMarkedLimit) {
  write_file(dir_ / "profile.json", kProfile);
  const Result report =
      run_zeus_in(dir_, "report profile.json --selector energy --title 'My <profile>' -o r.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = read_file(dir_ / "r.html");
  EXPECT_EQ(page_data(html)["charts"]["chart-1"]["chosen"], 150);
  EXPECT_TRUE(contains(html, "<title>My &lt;profile&gt;</title>"));
  EXPECT_FALSE(contains(html, "My <profile>"));
}

TEST_F(ReportCli, WindowLogAloneIsATable) {
  write_file(dir_ / "log.csv",
             "start_time,window_name,elapsed_time,gpu0_energy\n1700000000.5,epoch,12.5,3000\n"
             "1700000013,epoch,11.0,2800\n");
  const Result report = run_zeus_in(dir_, "report log.csv --out r.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = read_file(dir_ / "r.html");
  EXPECT_EQ(count(html, "<canvas id=\"chart-"), 0U);
  EXPECT_EQ(count(html, "<td>epoch</td>"), 2U);
}

TEST_F(ReportCli, WindowLogShadesATimeline) {
  write_file(dir_ / "t.csv",
             "timestamp,device,domain,watts\n1700000000.0,gpu0,device_instant,100\n"
             "1700000001.0,gpu0,device_instant,200\n1700000002.0,gpu0,device_instant,150\n");
  write_file(dir_ / "log.csv",
             "start_time,window_name,elapsed_time,gpu0_energy\n1700000000.5,step,1.0,150\n"
             "1800000000,elsewhere,1.0,1\n");
  const Result report = run_zeus_in(dir_, "report log.csv t.csv --out r.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json chart = page_data(read_file(dir_ / "r.html"))["charts"]["chart-1"];
  ASSERT_EQ(chart["bands"].size(), 1U) << "only the window that overlaps the timeline";
  EXPECT_EQ(chart["bands"][0]["label"], "step");
  EXPECT_DOUBLE_EQ(chart["bands"][0]["from"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(chart["bands"][0]["to"].get<double>(), 1.5);
}

// `zeus monitor --timeline` writes temperature changes beside power (a fifth column, celsius):
// the page plots them as held steps on their own chart; timelines without them still read.
TEST_F(ReportCli, TemperatureRowsGetTheirOwnChart) {
  write_file(dir_ / "t.csv",
             "timestamp,device,domain,watts,celsius\n"
             "1700000000.0,gpu0,device_instant,100.000,\n1700000000.0,gpu0,temperature,,40\n"
             "1700000001.0,gpu0,device_instant,300.000,\n1700000001.0,gpu0,temperature,,55\n"
             "1700000003.0,gpu0,device_instant,300.000,\n");
  const Result report = run_zeus_in(dir_, "report t.csv --out r.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json charts = page_data(read_file(dir_ / "r.html"))["charts"];
  ASSERT_EQ(charts.size(), 2U) << charts.dump();
  const json& power = charts["chart-1"];
  ASSERT_EQ(power["series"].size(), 1U) << "temperature is not a power domain";
  EXPECT_EQ(power["series"][0]["label"], "device_instant");
  const json& temperature = charts["chart-2"];
  EXPECT_EQ(temperature["title"], "GPU temperature");
  EXPECT_TRUE(temperature["stepped"].get<bool>());
  ASSERT_EQ(temperature["series"].size(), 1U);
  EXPECT_EQ(temperature["series"][0]["label"], "gpu0");
  // Each change, then the last one held to the end of the timeline (3 s).
  EXPECT_EQ(temperature["series"][0]["points"],
            json::parse("[[0.0, 40.0], [1.0, 55.0], [3.0, 55.0]]"));
}

// Every bad input: exit code 2 and a message that names the file and what was expected.
struct BadInput {
  const char* name;
  const char* file;     // written under the test directory; "" for none
  const char* content;  // file content, or "DIR" for an empty directory
  const char* expected;
};

class ReportBadInput : public ReportCli, public testing::WithParamInterface<BadInput> {};

TEST_P(ReportBadInput, IsAUsageErrorNamingTheFile) {
  const BadInput& bad = GetParam();
  const fs::path path = dir_ / bad.file;
  if (std::string(bad.content) == "DIR") {
    fs::create_directories(path);
  } else if (std::string(bad.content) == "SIMDIR") {
    fs::create_directories(path);
    write_file(path / "summary.json",
               R"({"eta": 0.5, "cells": [{"workload": "cifar100", "gpu": "v100",
                   "policy": "zeus", "oracle_expected_cost": 1.0, "oracle_batch_size": 128,
                   "oracle_power_limit_w": 100}]})");
  } else if (std::string(bad.content) == "HUGESIM") {
    // A batch size no int holds (found by the fuzzer: get<int> of it was undefined behaviour).
    fs::create_directories(path);
    write_file(path / "summary.json",
               R"({"eta": 0.5, "cells": [{"workload": "cifar100", "gpu": "v100",
                   "policy": "zeus", "oracle_expected_cost": 1.0,
                   "oracle_batch_size": 6466666666666666666666666666666666,
                   "oracle_power_limit_w": 100}]})");
  } else if (std::string(bad.content) == "EMPTYSIM") {
    fs::create_directories(path);
    write_file(path / "summary.json", R"({"eta": 0.5, "cells": []})");
  } else if (std::string(bad.content) == "FIFO") {
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);  // no writer: opening it would block
  } else if (std::string(bad.content) != "NONE") {
    write_file(path, bad.content);
  }
  const Result report = run_zeus_in(dir_, std::string("report ") + bad.file + " --out r.html");
  EXPECT_EQ(report.exit_code, 2) << report.err;
  EXPECT_TRUE(contains(report.err, bad.file)) << report.err;
  EXPECT_TRUE(contains(report.err, bad.expected)) << report.err;
  EXPECT_EQ(std::count(report.err.begin(), report.err.end(), '\n'), 1) << report.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.html")) << "no page is written";
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, ReportBadInput,
    testing::Values(
        BadInput{"MissingColumn", "t.csv", "timestamp,device,watts\n1,gpu0,100\n",
                 "lacks the column domain"},
        BadInput{"EmptyTimeline", "t.csv", "timestamp,device,domain,watts\n", "empty"},
        BadInput{"BadNumber", "t.csv", "timestamp,device,domain,watts\n1,gpu0,instant,lots\n",
                 "line 2: watts is not a number"},
        BadInput{"ShortRow", "t.csv", "timestamp,device,domain,watts\n1,gpu0,100\n",
                 "line 2: expected 4 fields"},
        BadInput{"UnknownCsv", "x.csv", "a,b,c\n1,2,3\n", "expected a `zeus monitor --timeline`"},
        BadInput{"TemperatureWithoutCelsiusColumn", "t.csv",
                 "timestamp,device,domain,watts\n1,gpu0,temperature,40\n",
                 "line 2: a temperature row, but the header has no celsius column"},
        BadInput{"TemperatureNotANumber", "t.csv",
                 "timestamp,device,domain,watts,celsius\n1,gpu0,instant,100,\n"
                 "1,gpu0,temperature,,hot\n",
                 "line 3: celsius is not a number"},
        BadInput{"TemperatureOutOfRange", "t.csv",
                 "timestamp,device,domain,watts,celsius\n1,gpu0,instant,100,\n"
                 "1,gpu0,temperature,,1e9\n",
                 "line 3: celsius 1e9 is not a GPU temperature"},
        BadInput{"PowerRowWithoutWatts", "t.csv",
                 "timestamp,device,domain,watts,celsius\n1,gpu0,instant,,40\n",
                 "line 2: watts is not a number"},
        // A file's content quoted in an error cannot drive the terminal or print mojibake.
        BadInput{"ControlCharactersEscaped", "x.csv", "a\x1b[2J\xff,b\n1,2\n",
                 "first line \"a\\x1b[2J\\xff,b\""},
        BadInput{"EmptyFile", "x.csv", "", "the file is empty"},
        BadInput{"EmptyWindowLog", "w.csv", "start_time,window_name,elapsed_time\n", "no window"},
        BadInput{"DirectoryWithoutResults", "results", "DIR", "without summary.json"},
        BadInput{"MissingHistory", "results", "SIMDIR", "cifar100_v100_zeus.csv is missing"},
        BadInput{"NoCells", "results", "EMPTYSIM", "no results"},
        BadInput{"BatchSizeOutOfRange", "results", "HUGESIM",
                 "\"oracle_batch_size\" is out of range (6.46666666666666"},
        BadInput{"JsonWithoutMeasurements", "x.json", "{\"a\": 1}", "without \"measurements\""},
        BadInput{"BadProfile", "p.json", "{\"measurements\": []}", "p.json"},
        BadInput{"NotJson", "p.json", "{\"measurements\": ", "not valid JSON"},
        // A number no double holds: `zeus report` said "internal error: [json.exception..." (exit
        // 1) where `zeus plo show` named the problem; both now go through the profile's reader.
        BadInput{"ProfileNumberOverflow", "p.json",
                 "{\"measurements\": [{\"power_limit\": 300, \"energy\": 5, \"time\": 2},\n"
                 "{\"power_limit\": 200, \"energy\": 1e999, \"time\": 2}]}",
                 "power-limit profile p.json: not valid JSON (number overflow parsing '1e999') in "
                 "measurement 1, \"energy\""},
        BadInput{"JsonNumberOverflow", "x.json", "{\"a\": -1e999}",
                 "not valid JSON (number overflow parsing '-1e999')"},
        BadInput{"Missing", "nowhere.csv", "NONE", "no such file or directory"},
        BadInput{"Fifo", "t.csv", "FIFO", "named pipe (FIFO), not a regular file"},
        // Found by fuzz/report_timeline: a time beyond time_t (undefined conversion), or with no
        // calendar year (fmt aborted), made `zeus report` crash while printing dates.
        BadInput{"TimestampBeyondAnyDate", "t.csv",
                 "timestamp,device,domain,watts\n1.7e68,gpu0,instant,1\n",
                 "line 2: timestamp 1.7e68 is not a Unix time in seconds"},
        BadInput{"WindowStartBeyondAnyDate", "w.csv",
                 "start_time,window_name,elapsed_time\n70000000000000005,a,1\n",
                 "w.csv:2: start_time 70000000000000005 is not a Unix time"}),
    [](const testing::TestParamInfo<BadInput>& param_info) {
      return std::string(param_info.param.name);
    });

// A timeline saved by a spreadsheet starts with a UTF-8 byte-order mark; it is read all the same.
TEST_F(ReportCli, ReadsInputsWithAByteOrderMark) {
  write_file(
      dir_ / "t.csv",
      "\xEF\xBB\xBFtimestamp,device,domain,watts\n1.0,gpu0,instant,100\n2.0,gpu0,instant,120\n");
  write_file(dir_ / "p.json", std::string("\xEF\xBB\xBF") + kProfile);
  const Result report = run_zeus_in(dir_, "report t.csv p.json --out r.html");
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(count(read_file(dir_ / "r.html"), "data-chart=\"timeline\""), 1U);
}

// --out never destroys what the user did not ask to write (docs/cli.md, "Output files").
TEST_F(ReportCli, OutputNeverReplacesAnInputALinkOrADevice) {
  write_file(dir_ / "t.csv", "timestamp,device,domain,watts\n1.0,gpu0,instant,100\n");
  const std::string timeline = read_file(dir_ / "t.csv");
  // The output is one of the inputs, directly, through a link, or inside a `zeus sim` directory.
  fs::create_symlink("t.csv", dir_ / "alias.csv");
  for (const char* out : {"t.csv", "alias.csv", "./t.csv"}) {
    const Result report = run_zeus_in(dir_, std::string("report t.csv -o ") + out);
    EXPECT_EQ(report.exit_code, 2) << out;
    EXPECT_TRUE(contains(report.err, "is also an input")) << report.err;
  }
  EXPECT_EQ(read_file(dir_ / "t.csv"), timeline);
  const Result sim = run_zeus_in(dir_,
                                 "sim --workload cifar100 --gpu v100 --seeds 1 --recurrences 5 "
                                 "--out results");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::string summary = read_file(dir_ / "results" / "summary.json");
  const Result into_sim = run_zeus_in(dir_, "report results -o results/summary.json");
  EXPECT_EQ(into_sim.exit_code, 2);
  EXPECT_TRUE(contains(into_sim.err, "is also an input")) << into_sim.err;
  EXPECT_EQ(read_file(dir_ / "results" / "summary.json"), summary);

  // A symbolic link: the file it points to gets the page, the link stays.
  write_file(dir_ / "old.html", "old");
  fs::create_symlink("old.html", dir_ / "page.html");
  ASSERT_EQ(run_zeus_in(dir_, "report t.csv -o page.html").exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(dir_ / "page.html"));
  EXPECT_TRUE(contains(read_file(dir_ / "old.html"), "<html"));

  // A character device (a link to /dev/null; as root also a node of our own) is written through.
  fs::create_symlink("/dev/null", dir_ / "null");
  ASSERT_EQ(run_zeus_in(dir_, "report t.csv -o null").exit_code, 0);
  EXPECT_TRUE(fs::is_symlink(dir_ / "null"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  if (::geteuid() == 0 && ::mknod((dir_ / "node").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    ASSERT_EQ(run_zeus_in(dir_, "report t.csv -o node").exit_code, 0);
    EXPECT_TRUE(fs::is_character_file(dir_ / "node")) << "the device node was replaced";
  }
  // Through /proc/self/fd/1 (a link to the pipe run_zeus_in reads): the page comes out on stdout.
  const Result to_stdout = run_zeus_in(dir_, "report t.csv -o /proc/self/fd/1");
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_TRUE(contains(to_stdout.out, "<html")) << "the page goes down the pipe";
  // Nothing left behind: no temporaries.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(contains(entry.path().filename().string(), "zeus-tmp")) << entry.path();
  }
}

TEST_F(ReportCli, UsageErrors) {
  write_file(dir_ / "profile.json", kProfile);
  Result result = run_zeus_in(dir_, "report profile.json --selector fastest --out r.html");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "unknown selector")) << result.err;
  result = run_zeus_in(dir_, "report profile.json --out .");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "is a directory")) << result.err;
  result = run_zeus_in(dir_, "report profile.json --out no/such/dir/r.html");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "does not exist")) << result.err;
  result = run_zeus_in(dir_, "report --out r.html");
  EXPECT_EQ(result.exit_code, 2);
  result = run_zeus_in(dir_, "report profile.json");
  EXPECT_EQ(result.exit_code, 2);
}

// `zeus sim` shows a progress bar on a terminal (here a pseudo-terminal made by script(1)) and
// nothing extra when its standard error is piped.
TEST_F(ReportCli, SimProgressBarOnlyOnATerminal) {
  const std::string sim = std::string(ZEUS_CLI_PATH) +
                          " sim --workload cifar100,imagenet --gpu v100 --seeds 1-2 --threads 2";
  const auto piped = run_zeus_in(dir_,
                                 "sim --workload cifar100,imagenet --gpu v100 --seeds 1-2 "
                                 "--threads 2");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_TRUE(piped.err.empty()) << piped.err;
  EXPECT_FALSE(contains(piped.out, "\r")) << "no progress bar on a pipe";
  if (zeus::testing::run_command("command -v script >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "script(1) (util-linux) is not installed: cannot make a terminal";
  }
  const auto terminal =
      zeus::testing::run_command("script -qec '" + sim + " >/dev/null' /dev/null");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "cells")) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "[#")) << terminal.output;
}

}  // namespace
