// `zeus power`, run as a user would run it, on simulated GPUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "monitor_test_support.hpp"

namespace {

using namespace zeus::testing::cli_monitor;

using CliPower = CliMonitor;

TEST_F(CliPower, PrintsLinesThenTheEnergy) {
  const Result result = run({kTwoH200}, {"power", "--duration", "1.2s", "--interval", "0.5s"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::stringstream lines(result.out);
  std::string line;
  int power_lines = 0;
  while (std::getline(lines, line)) {
    if (contains(line, "  GPU0 75.0 W  GPU1 75.0 W")) {
      ++power_lines;
      EXPECT_EQ(line.find('T'), 10u) << line;  // 2025-01-31T14:05:09.123
    }
  }
  EXPECT_GE(power_lines, 2) << result.out;
  EXPECT_LE(power_lines, 3) << result.out;
  EXPECT_TRUE(contains(result.out, "Energy over 1.2")) << result.out;
  EXPECT_TRUE(contains(result.out, "device_instant power")) << result.out;
  EXPECT_TRUE(contains(result.out, "75.0 W")) << result.out;
  EXPECT_TRUE(contains(result.out, "150.0 W")) << result.out;  // the total
}

TEST_F(CliPower, OtherDomainAndGpuSelection) {
  const Result result = run({kTwoH200}, {"power", "--duration", "0.3s", "--interval", "100ms",
                                         "--domain", "memory", "--gpus", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "memory_average power")) << result.out;
  EXPECT_FALSE(contains(result.out, "GPU0")) << result.out;
  EXPECT_TRUE(contains(result.out, "GPU1 19.5 W")) << result.out;  // 65 W x 0.3 when idle
}

TEST_F(CliPower, StopsOnSigint) {
  ZeusProcess zeus(dir_, {kTwoH200}, {"power", "--interval", "50ms"});
  ASSERT_TRUE(zeus.wait_until_catching_sigterm());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(zeus.pid(), SIGINT);
  const Result result = zeus.wait(5.0);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "interrupted by SIGINT")) << result.out;
  EXPECT_TRUE(contains(result.out, "GPU0 75.0 W")) << result.out;
}

TEST_F(CliPower, BadInputIsAUsageError) {
  Result result = run({kTwoH200}, {"power", "--domain", "bogus", "--duration", "1s"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "bogus")) << result.err;
  EXPECT_TRUE(contains(result.err, "device_instant")) << result.err;

  result = run({kTwoH200}, {"power", "--interval", "0.5ms", "--duration", "1s"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "below the shortest sampling period")) << result.err;

  result = run({kTwoH200}, {"power", "--gpus", "2", "--duration", "1s"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "the valid GPU indices are 0, 1")) << result.err;

  result = run({}, {"power", "--duration", "1s"});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_TRUE(contains(result.err, "no GPU")) << result.err;
}

}  // namespace
