// `zeus sim`'s usage errors, run as a user would run it: unknown names, bad numbers, seeds and
// paths, and trace files that are not what they should be.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "sim_cli_support.hpp"

namespace {

namespace fs = std::filesystem;

using zeus::testing::sim_cli::contains;
using zeus::testing::sim_cli::fresh_dir;
using zeus::testing::sim_cli::Result;
using zeus::testing::sim_cli::run_sim;

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
