// `zeus demo`, run as a user would: the per-run lines and the summary, the JSON report checked
// against the workload model it simulates, usage errors, and the server child stopped on error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>

#include "run_command.hpp"
#include "zeus/sim/trace.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Result = zeus::testing::SplitOutput;
using zeus::testing::read_file;

// A temporary directory per test, also used as TMPDIR of the demo (where its own temporary
// directory goes).
class DemoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() /
           ("zeus-demo-test-" + std::to_string(getpid()) + "-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& arguments) const {
    return zeus::testing::run_split(
        "TMPDIR=" + dir_.string() + " " + ZEUS_CLI_PATH + " demo " + arguments,
        dir_ / "stderr.txt");
  }
  json run_json(const std::string& arguments) const {
    const Result result = run(arguments + " --json");
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    try {
      return json::parse(result.out);
    } catch (const json::exception& error) {
      ADD_FAILURE() << error.what() << " in: " << result.out << result.err;
      return json::object();
    }
  }
  // Directories the demo left in TMPDIR.
  std::vector<fs::path> demo_dirs() const {
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.is_directory() && entry.path().filename().string().rfind("zeus-demo-", 0) == 0) {
        dirs.push_back(entry.path());
      }
    }
    return dirs;
  }

  fs::path dir_;
};

TEST_F(DemoCli, PrintsEveryRunAndASummaryWithEnergySaved) {
  const Result result = run("--recurrences 12");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::string& out = result.out;
  EXPECT_NE(out.find("librispeech (deepspeech2) on 1 x simulated Tesla V100"), std::string::npos)
      << out;
  EXPECT_NE(out.find("BSO server: http://127.0.0.1:"), std::string::npos) << out;
  // One line per training run: rec, try, trial, batch, limit, epochs, energy, time, cost, outcome.
  const std::regex line(
      R"(^ +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +([\d.]+) +(\d+)  (reached target|stopped: .*)$)");
  int runs = 0;
  int last_recurrence = 0;
  std::istringstream lines(out);
  for (std::string text; std::getline(lines, text);) {
    std::smatch match;
    if (std::regex_match(text, match, line)) {
      ++runs;
      const int recurrence = std::stoi(match[1]);
      EXPECT_TRUE(recurrence == last_recurrence || recurrence == last_recurrence + 1) << text;
      last_recurrence = recurrence;
      EXPECT_EQ(std::stoi(match[3]), runs) << "trial numbers count the runs: " << text;
      EXPECT_GE(std::stoi(match[5]), 100) << text;
      EXPECT_LE(std::stoi(match[5]), 250) << text;
    }
  }
  EXPECT_EQ(last_recurrence, 12) << out;
  EXPECT_GE(runs, 12) << out;
  EXPECT_NE(out.find("Summary over 12 recurrences"), std::string::npos) << out;
  EXPECT_NE(out.find("Default (batch size 192 at 250 W)"), std::string::npos) << out;
  std::smatch saved;
  ASSERT_TRUE(std::regex_search(out, saved, std::regex(R"(saved +(-?[\d.]+)% +(-?[\d.]+)%)")))
      << out;
  EXPECT_GT(std::stod(saved[1]), 10.0) << out;  // energy saved, percent
  EXPECT_NE(out.find("s of wall-clock time; the BSO server answered"), std::string::npos) << out;
  EXPECT_TRUE(demo_dirs().empty()) << "the temporary directory is removed";
}

// The measured energy of runs that did not profile equals the workload model's, through the BSO
// window of ZeusMonitor on the simulated GPUs; every recurrence ends with a run that reached the
// target; Default is b0 at the maximum limit.
void check_against_model(const json& report, const std::string& gpu) {
  const auto& workload = zeus::sim::paper_workload(report["workload"].get<std::string>());
  const auto trace = zeus::sim::builtin_trace(gpu, workload);
  const int gpus = report["gpus"];
  int expected_trial = 1;
  int checked = 0;
  const json& runs = report["runs"];
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const json& run = runs[i];
    EXPECT_EQ(run["trial_number"], expected_trial++);
    const bool last_of_recurrence =
        i + 1 == runs.size() || runs[i + 1]["recurrence"] != run["recurrence"];
    EXPECT_EQ(run["outcome"] == "reached", last_of_recurrence) << run.dump();
    if (run["profiled"].get<bool>()) {
      continue;
    }
    const auto* point = trace.at_batch_size(run["batch_size"]).at_power_limit(run["power_limit_w"]);
    ASSERT_NE(point, nullptr) << run.dump();
    const double epochs = run["epochs"];
    EXPECT_NEAR(run["time_s"].get<double>(), epochs * point->time_per_epoch_s,
                1e-6 * run["time_s"].get<double>())
        << run.dump();
    EXPECT_NEAR(run["energy_j"].get<double>(), epochs * point->energy_per_epoch_j() * gpus,
                1e-4 * run["energy_j"].get<double>())
        << run.dump();
    ++checked;
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(runs.back()["recurrence"], report["recurrences"]);
  const json& summary = report["summary"];
  EXPECT_EQ(summary["training_runs"], runs.size());
  EXPECT_EQ(summary["default"]["batch_size"], trace.workload.default_batch_size);
  EXPECT_EQ(summary["default"]["power_limit_w"], trace.power_limits_w.back());
  EXPECT_GT(summary["server_requests"].get<int>(), 3 * static_cast<int>(runs.size()));
  EXPECT_LT(summary["wall_time_s"].get<double>(), 60.0);
  EXPECT_GT(summary["virtual_time_s"].get<double>(), 100.0 * summary["wall_time_s"].get<double>());
}

TEST_F(DemoCli, JsonReportAgreesWithTheWorkloadModel) {
  const json report = run_json("--recurrences 14 --seed 3");
  ASSERT_TRUE(report.contains("summary")) << report.dump();
  EXPECT_EQ(report["job_id"], "demo-librispeech");
  check_against_model(report, "v100");
  EXPECT_GT(report["summary"]["energy_saved_pct"].get<double>(), 0.0);
}

TEST_F(DemoCli, CounterlessGpusInDataParallel) {
  // P100s have no energy counter: ZeusMonitor integrates sampled power.
  const json report =
      run_json("--gpu-model p100 --gpus 2 --workload cifar100 --recurrences 8 --eta 0.3");
  ASSERT_TRUE(report.contains("summary")) << report.dump();
  EXPECT_EQ(report["gpu_name"], "Tesla P100-PCIE-16GB");
  check_against_model(report, "p100");
}

TEST_F(DemoCli, UsageErrors) {
  Result result = run("--gpu-model h200");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--gpu-model \"h200\""), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("v100, a40, p100"), std::string::npos) << result.err;
  result = run("--workload mnist");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("librispeech"), std::string::npos) << result.err;
  result = run("--recurrences 0");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--recurrences"), std::string::npos) << result.err;
  result = run("--eta 2");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--eta"), std::string::npos) << result.err;
  // Every try of a recurrence that never converges is run: the count is bounded.
  result = run("--max-tries 2000000000");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--max-tries must be between 1 and 1000000"), std::string::npos)
      << result.err;
  EXPECT_TRUE(demo_dirs().empty());
}

TEST_F(DemoCli, AnUnreachableServerIsAClearError) {
  const Result result = run("--server http://127.0.0.1:1 --recurrences 2");
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("POST /jobs"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("cannot connect"), std::string::npos) << result.err;
}

TEST_F(DemoCli, TheServerIsStoppedWhenTheDemoFails) {
  // beta 0.01: the second run is stopped after one epoch; one try per recurrence: an error.
  const Result result = run("--beta 0.01 --max-tries 1 --recurrences 5 --keep-db");
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("recurrence 2 did not reach the target in 1 runs"), std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("stopped: cost above beta x min cost"), std::string::npos)
      << result.out;
  const auto dirs = demo_dirs();
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_TRUE(fs::exists(dirs[0] / "bso.db"));
  // The server got SIGTERM and stopped cleanly.
  const std::string log = read_file(dirs[0] / "server.log");
  EXPECT_NE(log.find("zeus bso: stopped after"), std::string::npos) << log;
}

}  // namespace
