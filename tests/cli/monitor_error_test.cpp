// `zeus monitor`: each GPU figure's error bound, and --cross-check (issue 29), on simulated GPUs
// (ideal sensors: an exact integral read in whole millijoules). Through NVML: cli_test.cpp.
#include "monitor_test_support.hpp"

namespace {

using namespace zeus::testing::cli_monitor;

TEST_F(CliMonitor, EachGpuFigureCarriesItsErrorBound) {
  Result result =
      run({kTwoH200}, {"monitor", "--duration", "0.2s", "--json", "-o", path("s.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  ASSERT_TRUE(summary["gpu_energy_error_j"].is_object()) << summary.dump();
  EXPECT_EQ(summary["gpu_energy_error_j"].size(), 2u);
  EXPECT_DOUBLE_EQ(summary["gpu_energy_error_j"]["0"].get<double>(), 0.001);
  EXPECT_FALSE(summary.contains("cross_check"));  // only when asked

  result = run({kTwoH200}, {"monitor", "--duration", "0.2s", "-o", path("s.txt")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = read_file(path("s.txt"));
  EXPECT_TRUE(contains(text, "W  ± 0.001 J\n")) << text;
  EXPECT_FALSE(contains(text, "refresh periods")) << text;  // an ideal sensor is never short
}

TEST_F(CliMonitor, CrossCheckComparesEachCounterWithThePowerFirst) {
  const auto start = Clock::now();
  Result result = run({kTwoH200}, {"monitor", "--cross-check", "--duration", "0.1s", "--json", "-o",
                                   path("c.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GE(seconds_since(start), 1.1);  // the check's second, then the measurement
  const json summary = json::parse(read_file(path("c.json")));
  ASSERT_TRUE(summary["cross_check"].is_array()) << summary.dump();
  ASSERT_EQ(summary["cross_check"].size(), 2u);
  for (const json& check : summary["cross_check"]) {
    EXPECT_GE(check["duration_s"].get<double>(), 1.0);
    EXPECT_EQ(check["disagrees"], false) << check.dump();
    EXPECT_EQ(check["trust"], "counter");
    EXPECT_NEAR(check["counter_energy_j"].get<double>(), check["power_energy_j"].get<double>(),
                0.1 * check["power_energy_j"].get<double>());
  }
  EXPECT_LT(summary["time_s"].get<double>(), 1.0);  // the check is not in the measured window

  result = run({kTwoH200}, {"monitor", "--cross-check", "--duration", "0.1s", "-o", path("c.txt")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = read_file(path("c.txt"));
  EXPECT_TRUE(contains(text, "check   GPU 1: counter ")) << text;
  EXPECT_TRUE(contains(text, ": agree (")) << text;
  EXPECT_TRUE(contains(text, "trust the counter")) << text;
}

}  // namespace
