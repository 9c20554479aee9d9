// `zeus plo show`, run as a user would.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace {

struct Result {
  int exit_code = -1;
  std::string output;
};

Result run(const std::string& arguments) {
  const std::string command = std::string(ZEUS_CLI_PATH) + " plo " + arguments + " 2>&1";
  const auto run = zeus::testing::run_command(command);
  return {run.exit_code, run.output};
}

class PloCli : public ::testing::Test {
 protected:
  void SetUp() override {
    profile_ = std::filesystem::temp_directory_path() /
               ("zeus-plo-cli-" + std::to_string(getpid()) + ".json");
    std::ofstream(profile_) << R"({"measurements": [
      {"power_limit": 300, "energy": 100.0, "time": 10.0},
      {"power_limit": 250, "energy": 80.0, "time": 11.0},
      {"power_limit": 200, "energy": 80.0, "time": 13.0}]})";
  }
  void TearDown() override { std::filesystem::remove(profile_); }
  std::filesystem::path profile_;
};

TEST_F(PloCli, ShowsMeasurementsAndEverySelectorsChoice) {
  const Result result = run("show " + profile_.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("ZeusCost(eta=0.5, world_size=1)"), std::string::npos);
  EXPECT_NE(result.output.find("MaxSlowdownConstraint(factor=1.1)"), std::string::npos);
  const Result json_result =
      run("show " + profile_.string() + " --selector energy --selector max-slowdown:1.3 --json");
  ASSERT_EQ(json_result.exit_code, 0) << json_result.output;
  const auto out = nlohmann::json::parse(json_result.output);
  EXPECT_EQ(out["measurements"].size(), 3u);
  EXPECT_EQ(out["choices"][0]["power_limit_w"], 250);  // tie 250/200: the first
  EXPECT_EQ(out["choices"][1]["power_limit_w"], 200);
}

TEST_F(PloCli, BadInputIsClear) {
  Result result = run("show " + profile_.string() + " --selector zeus-cost:2");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("eta must be between 0 and 1"), std::string::npos);
  result = run("show " + profile_.string() + " --selector fastest");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("unknown selector"), std::string::npos);
  result = run("show " + profile_.string() + " --selector max-slowdown:0.5");
  EXPECT_EQ(result.exit_code, 2);
  for (const char* cut_off : {"zeus-cost:", "max-slowdown:", "energy:"}) {
    result = run("show " + profile_.string() + " --selector " + cut_off);
    EXPECT_EQ(result.exit_code, 2) << cut_off;
    EXPECT_NE(result.output.find("nothing after ':'"), std::string::npos) << result.output;
  }
  std::ofstream(profile_, std::ios::trunc)
      << R"({"measurements": [{"power_limit": 300, "energy": 900, "time": 3},)"
      << R"( {"power_limit": 250, "energy": 800, "time": 3.2},)"
      << R"( {"power_limit": 300, "energy": 1, "time": 3}]})";
  result = run("show " + profile_.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("measurement 2: power_limit 300 W is measured twice (also "
                               "measurement 0)"),
            std::string::npos)
      << result.output;
  // A number no double holds: the reader names the measurement and the field.
  std::ofstream(profile_, std::ios::trunc)
      << R"({"measurements": [{"power_limit": 300, "energy": 900, "time": 1e400}]})";
  result = run("show " + profile_.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("not valid JSON (number overflow parsing '1e400') in measurement "
                               "0, \"time\""),
            std::string::npos)
      << result.output;
  std::ofstream(profile_, std::ios::trunc) << R"({"measurements": []})";
  result = run("show " + profile_.string());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("has no measurement"), std::string::npos);
  EXPECT_NE(run("show /nonexistent/profile.json").exit_code, 0);
  EXPECT_EQ(run("show --help").exit_code, 0);
}

}  // namespace
