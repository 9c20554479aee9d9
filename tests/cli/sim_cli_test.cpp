// `zeus sim`, run as a user would run it: built-in workloads, the real traces when present, and
// usage errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Result = zeus::testing::SplitOutput;
using zeus::testing::read_file;

// Runs `zeus sim ARGUMENTS`, with standard error in a temporary file.
Result run_sim(const std::string& arguments) {
  return zeus::testing::run_split(
      std::string(ZEUS_CLI_PATH) + " sim " + arguments,
      fs::path(testing::TempDir()) / ("zeus_sim_stderr_" + std::to_string(getpid()) + ".txt"));
}

json parse_json(const Result& result) {
  try {
    return json::parse(result.out);
  } catch (const json::exception& error) {
    throw std::runtime_error(std::string(error.what()) + " in: " + result.out + result.err);
  }
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh directory under the test temporary directory.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::path(testing::TempDir()) / ("zeus_sim_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

const fs::path kTraceDir =
    fs::path(ZEUS_SOURCE_DIR).parent_path() / "shared" / "data" / "zeus-nsdi23-traces";

TEST(SimCli, BuiltinJsonHasTheDocumentedKeys) {
  const Result result = run_sim("--workload librispeech --gpu v100 --seeds 1-3 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  EXPECT_EQ(out["source"], "builtin");
  EXPECT_TRUE(out["wall_s"].is_number());
  EXPECT_GE(out["wall_s"].get<double>(), 0.0);
  EXPECT_EQ(out["seed_list"], json::parse("[1,2,3]"));
  ASSERT_EQ(out["cells"].size(), 1u);
  const json& cell = out["cells"][0];
  for (const char* key : {"workload",
                          "gpu",
                          "policy",
                          "seeds",
                          "recurrences",
                          "energy_saving_pct_mean",
                          "energy_saving_pct_std",
                          "energy_saving_last10_pct_mean",
                          "energy_saving_last10_pct_std",
                          "time_saving_pct_mean",
                          "time_saving_pct_std",
                          "time_saving_last10_pct_mean",
                          "time_saving_last10_pct_std",
                          "cost_saving_pct_mean",
                          "cost_saving_pct_std",
                          "cum_regret_mean",
                          "cum_regret_std",
                          "oracle_batch_size",
                          "oracle_power_limit_w",
                          "target_metric",
                          "final_batch_size",
                          "final_power_limit_w",
                          "final_expected_cost",
                          "final_expected_cost_mean",
                          "final_matches_oracle_pct",
                          "failed_runs_mean",
                          "notes"}) {
    EXPECT_TRUE(cell.contains(key)) << key;
  }
  EXPECT_EQ(cell["workload"], "librispeech");
  EXPECT_EQ(cell["gpu"], "v100");
  EXPECT_EQ(cell["policy"], "zeus");
  EXPECT_EQ(cell["seeds"], 3);
  EXPECT_GT(cell["recurrences"].get<int>(), 0);
  const double saving = cell["energy_saving_pct_mean"].get<double>();
  EXPECT_GT(saving, -100.0);
  EXPECT_LT(saving, 100.0);
  EXPECT_GT(cell["oracle_batch_size"].get<int>(), 0);
  EXPECT_GT(cell["oracle_power_limit_w"].get<int>(), 0);
  EXPECT_GT(cell["final_batch_size"].get<int>(), 0);
  EXPECT_GT(cell["final_power_limit_w"].get<int>(), 0);
  EXPECT_TRUE(cell["notes"].is_array());
}

TEST(SimCli, DefaultPolicySavesNothing) {
  const Result result =
      run_sim("--workload librispeech --gpu v100 --seeds 1-3 --policy default --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json cell = parse_json(result)["cells"].at(0);
  EXPECT_EQ(cell["policy"], "default");
  EXPECT_EQ(cell["energy_saving_pct_mean"].get<double>(), 0.0);
  EXPECT_EQ(cell["energy_saving_last10_pct_mean"].get<double>(), 0.0);
  EXPECT_EQ(cell["time_saving_pct_mean"].get<double>(), 0.0);
  EXPECT_EQ(cell["cost_saving_pct_mean"].get<double>(), 0.0);
}

TEST(SimCli, TargetMetricOverridesThePapersTarget) {
  const Result result = run_sim(
      "--workload cifar100 --gpu v100 --seeds 1-2 --policy zeus,oracle --target-metric "
      "0.5 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  ASSERT_EQ(out["cells"].size(), 2u);
  for (const json& cell : out["cells"]) {
    EXPECT_EQ(cell["target_metric"], 0.5);
    ASSERT_TRUE(cell["final_expected_cost"].is_number()) << cell.dump();
    ASSERT_TRUE(cell["final_expected_cost_mean"].is_number()) << cell.dump();
    EXPECT_GE(cell["final_expected_cost"].get<double>(),
              cell["oracle_expected_cost"].get<double>() * (1.0 - 1e-12));
  }
  // The oracle's final configuration is the oracle's.
  EXPECT_DOUBLE_EQ(out["cells"][1]["final_expected_cost"].get<double>(),
                   out["cells"][1]["oracle_expected_cost"].get<double>());
  // The paper's target, and the cost of the oracle at it, are not those of 0.5.
  const Result paper = run_sim("--workload cifar100 --gpu v100 --seeds 1-2 --policy oracle --json");
  ASSERT_EQ(paper.exit_code, 0) << paper.out << paper.err;
  const json paper_cell = parse_json(paper)["cells"].at(0);
  EXPECT_EQ(paper_cell["target_metric"], 0.6);
  EXPECT_GT(paper_cell["oracle_expected_cost"].get<double>(),
            out["cells"][1]["oracle_expected_cost"].get<double>());

  // One target per named workload; the others keep the paper's. The text says which differ.
  const Result listed = run_sim(
      "--workload cifar100,squad --gpu v100 --seeds 1 --recurrences 20 --target-metric "
      "squad=83.5");
  ASSERT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_TRUE(contains(listed.out, "Target metric: squad 83.5 (the paper's: 84)")) << listed.out;
  EXPECT_FALSE(contains(listed.out, "cifar100 0.6 (")) << listed.out;
}

TEST(SimCli, BadTargetMetricsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--workload cifar100 --target-metric nan", "not a finite number"},
      {"--workload cifar100 --target-metric 1e400", "not a finite number"},
      {"--workload cifar100 --target-metric high", "not a finite number"},
      {"--workload cifar100,squad --target-metric 0.5", "one number, but 2 workloads"},
      {"--workload cifar100 --target-metric squad=84", "\"squad\" is not a selected workload"},
      {"--workload cifar100 --target-metric cifar100=0.5,cifar100=0.4", "given twice"},
      {"--workload cifar100 --target-metric cifar100=0.5,0.4", "not DATASET=TARGET"},
      // Beyond what any batch size reaches, and beyond what b0 reaches.
      {"--workload cifar100 --gpu v100 --target-metric 0.7", "no batch size"},
      {"--workload cifar100 --gpu v100 --target-metric 0.65", "default batch size 1024"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result result = run_sim(arguments + " --seeds 1");
    EXPECT_EQ(result.exit_code, 2) << arguments << ": " << result.out << result.err;
    EXPECT_TRUE(contains(result.err, message)) << arguments << ": " << result.err;
  }
}

TEST(SimCli, TargetMetricOnRealTracesUsesTheirRowsAtThatTarget) {
  if (!fs::exists(kTraceDir / "summary_train.csv")) {
    GTEST_SKIP() << "the NSDI'23 traces are not at " << kTraceDir;
  }
  const std::string traces = "--trace-dir " + kTraceDir.string();
  const Result result =
      run_sim(traces + " --workload cifar100 --gpu v100 --seeds 1-2 --target-metric 0.5 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(parse_json(result)["cells"].at(0)["target_metric"], 0.5);
  const Result unrecorded =
      run_sim(traces + " --workload cifar100 --gpu v100 --seeds 1 --target-metric 0.62");
  EXPECT_EQ(unrecorded.exit_code, 2) << unrecorded.err;
  EXPECT_TRUE(contains(unrecorded.err, "no rows at target_metric 0.62")) << unrecorded.err;
  const Result unreachable =
      run_sim(traces + " --workload cifar100 --gpu v100 --seeds 1 --target-metric 0.7");
  EXPECT_EQ(unreachable.exit_code, 2) << unreachable.err;
  EXPECT_TRUE(contains(unreachable.err, "hardest target some run reaches is 0.65"))
      << unreachable.err;
}

TEST(SimCli, DriftReportsHowSoonEachPolicySettles) {
  const Result result = run_sim(
      "--workload movielens-1m --gpu v100 --seeds 1-4 --policy zeus,default,oracle --drift "
      "40:best*4 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  EXPECT_EQ(out["drift"], "40:best*4");
  ASSERT_EQ(out["cells"].size(), 3u);
  for (const json& cell : out["cells"]) {
    const json& drift = cell["drift"];
    ASSERT_TRUE(drift.is_object()) << cell.dump();
    for (const char* key :
         {"at_recurrence", "old_oracle_batch_size", "old_oracle_power_limit_w",
          "old_oracle_expected_cost", "new_oracle_batch_size", "new_oracle_power_limit_w",
          "new_oracle_expected_cost", "settle_recurrences_mean", "settled_seeds", "unsettled_seeds",
          "regret_after_mean"}) {
      EXPECT_TRUE(drift.contains(key)) << key;
    }
    EXPECT_EQ(drift["at_recurrence"], 40);
    EXPECT_EQ(drift["old_oracle_batch_size"], 8192);
    EXPECT_EQ(drift["new_oracle_batch_size"], 16384);
    EXPECT_EQ(cell["oracle_batch_size"], 16384);
    EXPECT_EQ(drift["settled_seeds"].get<int>() + drift["unsettled_seeds"].get<int>(), 4);
  }
  // Default never settles (no mean: null); the oracle settles at once.
  EXPECT_TRUE(out["cells"][1]["drift"]["settle_recurrences_mean"].is_null());
  EXPECT_EQ(out["cells"][1]["drift"]["unsettled_seeds"], 4);
  EXPECT_EQ(out["cells"][2]["drift"]["settle_recurrences_mean"], 0.0);
  // Without --drift the key is null.
  const Result plain = run_sim("--workload squad --gpu v100 --seeds 1 --recurrences 20 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_TRUE(parse_json(plain)["drift"].is_null());
  EXPECT_TRUE(parse_json(plain)["cells"][0]["drift"].is_null());

  const Result text = run_sim(
      "--workload movielens-1m --gpu v100 --seeds 1-2 --policy zeus --drift 40:best*4 "
      "--window 10");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "Drift 40:best*4:")) << text.out;
  EXPECT_TRUE(contains(text.out, "settled after")) << text.out;
  EXPECT_TRUE(contains(text.out, "8192, 100")) << text.out;
}

TEST(SimCli, BadDriftsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--drift 40", "no ':'"},
      {"--drift x:best*4", "not a recurrence"},
      {"--drift 0:best*4", "not a recurrence"},
      {"--drift 40:best*0", "must be positive"},
      {"--drift 40:best*inf", "not a finite number"},
      {"--drift 40:worst*2", "not best*F, best/F or target=X"},
      {"--drift 40:best*4 --recurrences 30", "between 1 and 29"},
      {"--drift 40:best*2000", "a factor of at most 1024"},
      {"--drift 40:best/2000", "a factor of at most 1024"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result result = run_sim("--workload cifar100 --gpu v100 --seeds 1 " + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << ": " << result.out << result.err;
    EXPECT_TRUE(contains(result.err, message)) << arguments << ": " << result.err;
  }
  // A drift one (workload, GPU) cannot take fails its cells, naming --drift; the others run.
  for (const auto& [drift, failing, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"40:best/4", "cifar100", "the default batch size 1024"},
           {"120:best*4", "squad", "the drift's recurrence 120 must be between 1 and 111"}}) {
    const Result result =
        run_sim("--workload cifar100,squad --gpu v100 --seeds 1 --drift " + drift + " --json");
    EXPECT_EQ(result.exit_code, 1) << drift << ": " << result.err;
    EXPECT_TRUE(contains(result.err, failing + "/v100/zeus: --drift " + drift + ": " + message))
        << drift << ": " << result.err;
    const json out = parse_json(result);
    for (const json& cell : out["cells"]) {
      EXPECT_EQ(cell.contains("error"), cell["workload"] == failing) << drift << ": " << cell;
    }
  }
  const Result target = run_sim("--workload cifar100 --gpu v100 --seeds 1 --drift 40:target=0.7");
  EXPECT_EQ(target.exit_code, 1) << target.err;
  EXPECT_TRUE(contains(target.err, "--drift 40:target=0.7: no batch size")) << target.err;
  const Result two = run_sim("--workload cifar100,squad --seeds 1 --drift 40:target=0.5");
  EXPECT_EQ(two.exit_code, 2) << two.err;
  EXPECT_TRUE(contains(two.err, "select one with --workload")) << two.err;
  const fs::path dir = fresh_dir("drift_arrivals");
  fs::create_directories(dir);
  std::ofstream(dir / "jobs.csv") << "start_time,end_time\n0,10\n5,20\n";
  const Result arrivals = run_sim(
      "--workload cifar100 --gpu v100 --seeds 1 --drift 1:best*2 "
      "--arrivals " +
      (dir / "jobs.csv").string());
  EXPECT_EQ(arrivals.exit_code, 2) << arrivals.err;
  EXPECT_TRUE(contains(arrivals.err, "cannot be combined with --arrivals")) << arrivals.err;
  fs::remove_all(dir);
  const Result traces = run_sim("--trace-dir " + kTraceDir.string() +
                                " --workload cifar100 --gpu v100 --seeds 1 --drift 40:best*4");
  EXPECT_EQ(traces.exit_code, 2) << traces.err;
  EXPECT_TRUE(contains(traces.err, "AT:target=X")) << traces.err;
}

TEST(SimCli, TargetDriftOnRealTraces) {
  if (!fs::exists(kTraceDir / "summary_train.csv")) {
    GTEST_SKIP() << "the NSDI'23 traces are not at " << kTraceDir;
  }
  const Result result = run_sim("--trace-dir " + kTraceDir.string() +
                                " --workload cifar100 --gpu v100 --seeds 1-2 --policy oracle "
                                "--drift 50:target=0.5 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json drift = parse_json(result)["cells"].at(0)["drift"];
  EXPECT_EQ(drift["old_oracle_batch_size"], 128);  // the paper's target 0.6
  EXPECT_EQ(drift["new_oracle_batch_size"], 512);  // 0.5, as the trace records it
  EXPECT_EQ(drift["settle_recurrences_mean"], 0.0);
}

TEST(SimCli, ArrivalsReplayConcurrentSubmissions) {
  const fs::path dir = fresh_dir("arrivals");
  fs::create_directories(dir);
  {
    std::ofstream csv(dir / "jobs.csv");
    csv << "start_time,end_time\n";
    for (int i = 0; i < 25; ++i) {
      csv << i * 1000 << "," << i * 1000 + 2500 << "\n";  // two or three in flight at once
    }
  }
  const Result result = run_sim("--workload cifar100 --gpu v100 --seeds 1-3 --arrivals " +
                                (dir / "jobs.csv").string() + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  EXPECT_EQ(out["arrivals"], (dir / "jobs.csv").string());
  EXPECT_EQ(out["cells"].at(0)["recurrences"], 25);
  EXPECT_GT(out["cells"].at(0)["energy_saving_pct_mean"].get<double>(), 0.0);

  std::ofstream(dir / "bad.csv") << "start_time,end_time\n10,5\n";
  const Result bad =
      run_sim("--workload cifar100 --gpu v100 --arrivals " + (dir / "bad.csv").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "bad.csv:2")) << bad.err;
  fs::remove_all(dir);
}

TEST(SimCli, AllPoliciesGiveACellPerPolicyWorkloadAndGpu) {
  const Result result = run_sim(
      "--workload librispeech,squad --gpu v100 --seeds 1,2 --policy all --recurrences 10 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  ASSERT_EQ(out["cells"].size(), 10u);
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const json& cell : out["cells"]) {
    seen.emplace(cell["workload"], cell["gpu"], cell["policy"]);
    EXPECT_EQ(cell["seeds"], 2);
    EXPECT_EQ(cell["recurrences"], 10);
  }
  for (const char* workload : {"librispeech", "squad"}) {
    for (const char* policy : {"zeus", "low-regret", "default", "grid", "oracle"}) {
      EXPECT_EQ(seen.count({workload, "v100", policy}), 1u) << workload << " " << policy;
    }
  }
}

TEST(SimCli, SeedListsAndRanges) {
  const Result result =
      run_sim("--workload squad --gpu a40 --seeds 1,2,5-9 --recurrences 3 --policy oracle --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  EXPECT_EQ(out["seed_list"], json::parse("[1,2,5,6,7,8,9]"));
  EXPECT_EQ(out["cells"].at(0)["seeds"], 7);
}

TEST(SimCli, TextTableHasARowPerCellAndTheWallTime) {
  const Result result =
      run_sim("--workload librispeech --gpu v100,a40 --seeds 1-2 --recurrences 5");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(contains(result.out, "energy saved")) << result.out;
  EXPECT_TRUE(contains(result.out, "Wall time:")) << result.out;
  int rows = 0;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    rows += line.starts_with(" librispeech ") ? 1 : 0;
  }
  EXPECT_EQ(rows, 2) << result.out;
  EXPECT_TRUE(result.err.empty()) << result.err;  // no progress bar when stderr is not a terminal
}

TEST(SimCli, ProgressBarOnATerminal) {
  if (zeus::testing::run_command("command -v script >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "script(1) (util-linux) is not installed: cannot make a terminal";
  }
  const auto terminal = zeus::testing::run_command(
      "script -qec \"" + std::string(ZEUS_CLI_PATH) +
      " sim --workload librispeech --gpu v100,a40 --seeds 1 --recurrences 3 >/dev/null\" "
      "/dev/null");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "1/2 cells")) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "[###############...............]")) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "\r\033[K")) << "the bar is cleared at the end";
}

TEST(SimCli, OutWritesHistoriesAndSummary) {
  const fs::path dir = fresh_dir("out") / "nested";
  const Result result = run_sim("--workload librispeech --gpu v100 --seeds 1-2 --recurrences 4 " +
                                std::string("--policy zeus,default --out ") + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  for (const char* policy : {"zeus", "default"}) {
    const fs::path csv = dir / (std::string("librispeech_v100_") + policy + ".csv");
    ASSERT_TRUE(fs::exists(csv)) << csv;
    std::istringstream lines(read_file(csv));
    std::string header;
    std::getline(lines, header);
    EXPECT_EQ(header,
              "seed,recurrence,batch_size,power_limit_w,energy_j,time_s,cost,tries,profiled");
    int rows = 0;
    std::set<std::string> seeds;
    for (std::string line; std::getline(lines, line);) {
      ++rows;
      seeds.insert(line.substr(0, line.find(',')));
    }
    EXPECT_EQ(rows, 2 * 4) << csv;
    EXPECT_EQ(seeds, (std::set<std::string>{"1", "2"}));
  }
  const json summary = json::parse(read_file(dir / "summary.json"));
  EXPECT_EQ(summary["cells"].size(), 2u);
  EXPECT_TRUE(summary.contains("wall_s"));
  fs::remove_all(dir.parent_path());
}

TEST(SimCli, AFailedCellIsReportedAndTheOthersStillRun) {
  // One try per recurrence: Zeus's exploration soon misses the target; Default never does.
  const Result result = run_sim(
      "--workload cifar100 --gpu v100 --seeds 1-2 --policy zeus,default --max-tries 1 --json");
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  const json out = parse_json(result);
  ASSERT_EQ(out["cells"].size(), 2u);
  const json& zeus = out["cells"][0];
  EXPECT_EQ(zeus["policy"], "zeus");
  ASSERT_TRUE(zeus.contains("error")) << zeus.dump();
  EXPECT_TRUE(contains(zeus["error"].get<std::string>(), "1 tries")) << zeus.dump();
  const json& fallback = out["cells"][1];
  EXPECT_EQ(fallback["policy"], "default");
  EXPECT_FALSE(fallback.contains("error"));
  EXPECT_EQ(fallback["energy_saving_pct_mean"].get<double>(), 0.0);
  EXPECT_TRUE(contains(result.err, "1 of 2 cells failed")) << result.err;
}

TEST(SimCli, RealTracesCapB0OnP100) {
  if (!fs::is_directory(kTraceDir)) {
    GTEST_SKIP() << "the NSDI'23 traces are not at " << kTraceDir
                 << " (../shared/data/zeus-nsdi23-traces next to the project)";
  }
  const Result result = run_sim("--trace-dir " + kTraceDir.string() +
                                " --workload librispeech --gpu p100 --seeds 1-2 --json");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const json out = parse_json(result);
  EXPECT_EQ(out["source"], kTraceDir.string());
  ASSERT_EQ(out["cells"].size(), 1u);
  const json& cell = out["cells"][0];
  EXPECT_EQ(cell["gpu"], "p100");
  EXPECT_GT(cell["recurrences"].get<int>(), 0);
  bool capped = false;
  for (const json& note : cell["notes"]) {
    capped = capped || contains(note.get<std::string>(), "72");
  }
  EXPECT_TRUE(capped) << cell["notes"].dump();
}

TEST(SimCli, UnknownNamesListTheValidOnes) {
  Result result = run_sim("--workload mnist");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "mnist")) << result.err;
  EXPECT_TRUE(contains(result.err, "librispeech")) << result.err;
  EXPECT_TRUE(contains(result.err, "movielens-1m")) << result.err;

  result = run_sim("--gpu h100");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "rtx6000")) << result.err;

  result = run_sim("--policy best");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "zeus, low-regret, default, grid, oracle")) << result.err;
}

TEST(SimCli, BadSeedsAreUsageErrors) {
  Result result = run_sim("--seeds 5-1");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "5-1")) << result.err;

  for (const char* seeds : {"1,,2", "1,1", "-3"}) {
    result = run_sim(std::string("--seeds=") + seeds);
    EXPECT_EQ(result.exit_code, 2) << seeds;
    EXPECT_TRUE(contains(result.err, "--seeds")) << seeds << ": " << result.err;
  }
}

TEST(SimCli, BadNumbersAreUsageErrors) {
  Result result = run_sim("--eta 2");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--eta 2")) << result.err;

  result = run_sim("--recurrences -1");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--recurrences")) << result.err;

  result = run_sim("--max-tries 0");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--max-tries")) << result.err;
}

TEST(SimCli, CountsThatWouldExhaustMemoryAreUsageErrors) {
  // Each is refused before anything runs, naming the option and the limit (--recurrences
  // 2000000000 used to end in "internal error: std::bad_alloc").
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--recurrences 2000000000", "--recurrences 2000000000 is above the limit of 10000000"},
      {"--seeds 1-100 --recurrences 1000000",
       "100 seeds x 1000000 --recurrences is above the limit of 50000000"},
      {"--window 20000000", "--window 20000000 is above the limit of 10000000"},
      {"--max-tries 2000000000", "--max-tries 2000000000 must be between 1 and 1000000"},
      {"--threads 5000", "--threads 5000 is above the limit of 1024"},
  };
  for (const auto& [arguments, message] : cases) {
    const Result result = run_sim("--workload squad --gpu v100 " + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << ": " << result.err;
    EXPECT_TRUE(contains(result.err, message)) << arguments << ": " << result.err;
    EXPECT_FALSE(contains(result.err, "internal error")) << arguments << ": " << result.err;
  }
}

TEST(SimCli, TheLargestSeedListIsParsedQuickly) {
  // 100000 seeds, then an --out that is a file: the usage error comes right after the seeds are
  // parsed. Checking repeats by a linear search took over a minute under the sanitizers.
  const fs::path file = fresh_dir("seeds_out_file");
  std::ofstream(file) << "x";
  const auto start = std::chrono::steady_clock::now();
  const Result result =
      run_sim("--workload squad --gpu v100 --seeds 1-100000 --out " + file.string());
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "--out")) << result.err;
  EXPECT_LT(elapsed_s, 20.0);
  fs::remove(file);
}

TEST(SimCli, ArrivalsNumbersAndNonRegularFilesAreUsageErrors) {
  const fs::path dir = fresh_dir("arrivals_bad");
  fs::create_directories(dir);
  const auto expect_usage_error = [&](const fs::path& path, const std::string& message) {
    const Result result =
        run_sim("--workload squad --gpu v100 --seeds 1 --arrivals " + path.string());
    EXPECT_EQ(result.exit_code, 2) << path << ": " << result.out << result.err;
    EXPECT_TRUE(contains(result.err, message)) << path << ": " << result.err;
  };
  std::ofstream(dir / "inf.csv") << "start_time,end_time\n0,inf\n";  // was accepted
  expect_usage_error(dir / "inf.csv",
                     "inf.csv:2: column 'end_time' (read \"inf\") is out of range");
  std::ofstream(dir / "huge.csv") << "start_time,end_time\n0,1e309\n";  // was "a number"
  expect_usage_error(dir / "huge.csv",
                     "huge.csv:2: column 'end_time' (read \"1e309\") is out of range");
  // A FIFO blocked forever; a directory said nothing useful.
  ASSERT_EQ(mkfifo((dir / "jobs.fifo").c_str(), 0600), 0);
  expect_usage_error(dir / "jobs.fifo", "FIFO");
  expect_usage_error(dir, "directory");
  fs::remove_all(dir);
}

TEST(SimCli, ATraceFileThatIsAFifoOrADirectoryIsAUsageError) {
  const fs::path dir = fresh_dir("trace_fifo");
  fs::create_directories(dir);
  std::ofstream(dir / "summary_train.csv")
      << "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
         "squad,bert_base_uncased,32,adamw,1e-5,1,84.0,3\n";
  ASSERT_EQ(mkfifo((dir / "summary_power_v100.csv").c_str(), 0600), 0);
  const std::string arguments =
      "--trace-dir " + dir.string() + " --workload squad --gpu v100 --seeds 1";
  Result result = run_sim(arguments);
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_TRUE(contains(result.err, "summary_power_v100.csv")) << result.err;
  EXPECT_TRUE(contains(result.err, "FIFO")) << result.err;
  fs::remove(dir / "summary_power_v100.csv");
  fs::create_directory(dir / "summary_power_v100.csv");
  result = run_sim(arguments);
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_TRUE(contains(result.err, "directory")) << result.err;
  EXPECT_FALSE(contains(result.err, "empty")) << result.err;
  fs::remove_all(dir);
}

TEST(SimCli, ACorruptedWorkloadNameInATraceIsNoted) {
  const fs::path dir = fresh_dir("corrupted_name");
  fs::create_directories(dir);
  std::ofstream(dir / "summary_train.csv")
      << "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
         "squad,bert_base_uncased,32,adamw,1e-5,1,84.0,3\n"
         "squad,bert_base_uncasde,32,adamw,1e-5,2,84.0,2\n";
  std::ofstream(dir / "summary_power_v100.csv")
      << "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
         "squad,bert_base_uncased,32,adamw,250,10.0,200.0\n";
  const Result result = run_sim("--trace-dir " + dir.string() +
                                " --workload squad --gpu v100 --seeds 1 --policy default");
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(contains(result.out, "summary_train.csv:3: 1 row of squad/bert_base_uncasde/adamw"))
      << result.out;
  fs::remove_all(dir);
}

TEST(SimCli, BadPathsAreUsageErrors) {
  const fs::path missing = fresh_dir("missing");
  Result result = run_sim("--trace-dir " + missing.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, missing.string())) << result.err;
  EXPECT_TRUE(contains(result.err, "does not exist")) << result.err;

  // An existing directory without the trace files.
  const fs::path empty = fresh_dir("empty");
  fs::create_directories(empty);
  result = run_sim("--trace-dir " + empty.string() + " --workload squad --gpu v100 --seeds 1");
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_TRUE(contains(result.err, "summary_")) << result.err;
  fs::remove_all(empty);

  // --out that is a file: refused before anything runs.
  const fs::path file = fresh_dir("file");
  std::ofstream(file) << "x";
  result = run_sim("--workload squad --gpu v100 --seeds 1 --out " + file.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--out")) << result.err;
  fs::remove(file);
}

TEST(SimCli, MalformedTraceFileNamesFileAndLine) {
  const fs::path dir = fresh_dir("malformed");
  fs::create_directories(dir);
  std::ofstream(dir / "summary_train.csv")
      << "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
         "squad,bert_base_uncased,32,adamw,1e-5,1,84.0,3\n"
         "squad,bert_base_uncased,not-a-number,adamw,1e-5,1,84.0,3\n";
  std::ofstream(dir / "summary_power_v100.csv")
      << "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
         "squad,bert_base_uncased,32,adamw,250,10.0,200.0\n";
  const Result result =
      run_sim("--trace-dir " + dir.string() + " --workload squad --gpu v100 --seeds 1");
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_TRUE(contains(result.err, "summary_train.csv")) << result.err;
  EXPECT_TRUE(contains(result.err, "3")) << result.err;  // the line
  fs::remove_all(dir);
}

}  // namespace
