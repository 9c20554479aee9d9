// `zeus sim`, run as a user would run it: built-in workloads and the real traces when present
// (usage errors: sim_cli_errors_test.cpp).
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
#include "sim_cli_support.hpp"
#include "support/shared_data.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using zeus::testing::read_file;
using zeus::testing::sim_cli::contains;
using zeus::testing::sim_cli::fresh_dir;
using zeus::testing::sim_cli::parse_json;
using zeus::testing::sim_cli::Result;
using zeus::testing::sim_cli::run_sim;

const fs::path kTraceDir = zeus::testing::shared_data_dir() / "zeus-nsdi23-traces";

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
}

// On the real traces a drift is only AT:target=X (the part of BadDriftsAreUsageErrors that reads
// them, which skips without them).
TEST(SimCli, BadDriftsOnRealTracesAreUsageErrors) {
  if (!fs::exists(kTraceDir / "summary_train.csv")) {
    GTEST_SKIP() << "the NSDI'23 traces are not at " << kTraceDir;
  }
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

TEST(SimCli, FailedSeedsAreListedAndTheCellReportsTheOthers) {
  if (!fs::is_directory(kTraceDir)) {
    GTEST_SKIP() << "the NSDI'23 traces are not at " << kTraceDir
                 << " (../shared/data/zeus-nsdi23-traces next to the project)";
  }
  // One try per recurrence: on librispeech/rtx6000 the paper policy's exploration misses the
  // target in some seeds only (13 of these 20). It failed the whole cell before.
  const Result result = run_sim("--trace-dir " + kTraceDir.string() +
                                " --workload librispeech --gpu rtx6000 --seeds 1-20 --policy zeus "
                                "--max-tries 1 --json");
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  const json out = parse_json(result);
  ASSERT_EQ(out["cells"].size(), 1u);
  const json& cell = out["cells"][0];
  ASSERT_FALSE(cell.contains("error")) << cell.dump();
  const json& failed = cell["failed_seeds"];
  ASSERT_GE(failed.size(), 1u) << cell.dump();
  ASSERT_LT(failed.size(), 20u) << cell.dump();
  for (const json& each : failed) {
    EXPECT_TRUE(contains(each["error"].get<std::string>(), "1 tries")) << each.dump();
  }
  EXPECT_TRUE(cell["cum_regret_mean"].is_number());
  EXPECT_TRUE(contains(result.err, "seeds failed")) << result.err;
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

}  // namespace
