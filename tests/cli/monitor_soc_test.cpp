// A Jetson's power rails in `zeus monitor`'s summary and in `zeus show-env`, on a fake sysfs
// tree named by ZEUS_JETSON_ROOT (tests/support/jetson_tree.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "monitor_test_support.hpp"
#include "support/jetson_tree.hpp"

namespace {

using namespace zeus::testing::cli_monitor;

class CliSoc : public CliMonitor {
 protected:
  void SetUp() override {
    CliMonitor::SetUp();
    tree_.emplace(path("jetson"));
    // Orin: GPU 5 V x 0.4 A = 2 W, CPU 5 V x 0.2 A = 1 W (its current file rewritten below).
    hwmon_ = tree_->add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}, 5000, 400);
    std::ofstream(hwmon_ / "curr2_input") << "200\n";
    root_env_ = "ZEUS_JETSON_ROOT=" + tree_->root().string();
  }

  std::optional<zeus::testing::JetsonTree> tree_;  // in the test's folder, made by SetUp
  fs::path hwmon_;
  std::string root_env_;
};

TEST_F(CliSoc, MonitorSummaryListsEveryRailWithItsEnergy) {
  Result result = run({root_env_}, {"monitor", "--powercap-root", path("none").string(), "--json",
                                    "-o", path("s.json"), "--", "sleep", "0.2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  ASSERT_TRUE(summary.contains("soc")) << summary.dump();
  const double time_s = summary["time_s"].get<double>();
  const json& rails = summary["soc"]["rails"];
  EXPECT_EQ(rails["VDD_GPU_SOC"]["kind"], "gpu");
  EXPECT_NEAR(rails["VDD_GPU_SOC"]["energy_j"].get<double>(), 2.0 * time_s, 1e-6);
  EXPECT_NEAR(rails["VDD_CPU_CV"]["energy_j"].get<double>(), 1.0 * time_s, 1e-6);
  EXPECT_EQ(rails["VIN_SYS_5V0"]["kind"], "total");
  EXPECT_EQ(summary["soc"]["skipped_reads"], 0);

  result = run({root_env_}, {"monitor", "--powercap-root", path("none").string(), "-o",
                             path("s.txt"), "--", "true"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = read_file(path("s.txt"));
  EXPECT_TRUE(contains(text, "SoC     VDD_GPU_SOC (gpu)")) << text;
  EXPECT_FALSE(contains(text, "no device measured")) << text;
}

TEST_F(CliSoc, MonitorWithoutASocHasNoSocKey) {
  const Result result = run({kTwoH200}, {"monitor", "--powercap-root", path("none").string(),
                                         "--json", "-o", path("s.json"), "--", "true"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_FALSE(json::parse(read_file(path("s.json"))).contains("soc"));
}

TEST_F(CliSoc, ShowEnvListsTheRailsAndTheirPower) {
  Result result = run({root_env_}, {"show-env", "--json", "--no-probe"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json out = json::parse(result.out);
  EXPECT_EQ(out["soc"]["available"], true);
  EXPECT_EQ(out["soc"]["model"], "NVIDIA Jetson AGX Orin Developer Kit");
  ASSERT_EQ(out["soc"]["rails"].size(), 3u);
  EXPECT_EQ(out["soc"]["rails"][0]["name"], "VDD_GPU_SOC");
  EXPECT_DOUBLE_EQ(out["soc"]["rails"][0]["power_w"].get<double>(), 2.0);

  result = run({root_env_}, {"show-env", "--no-probe"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "SoC (Jetson power rails under")) << result.out;
  EXPECT_TRUE(contains(result.out, "VDD_CPU_CV")) << result.out;
}

TEST_F(CliSoc, ShowEnvSaysWhyThereIsNoSoc) {
  // A Jetson without power files (a counter-less board).
  const zeus::testing::JetsonTree bare(path("bare"));
  const Result result =
      run({"ZEUS_JETSON_ROOT=" + bare.root().string()}, {"show-env", "--json", "--no-probe"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json out = json::parse(result.out);
  EXPECT_EQ(out["soc"]["available"], false);
  EXPECT_EQ(out["soc"]["jetson"], true);
  EXPECT_NE(out["soc"]["message"].get<std::string>().find("no readable INA3221"),
            std::string::npos);
}

}  // namespace
