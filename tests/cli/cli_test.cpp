// The `zeus` executable, run as a user would run it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <string>
#include "run_command.hpp"

namespace {

using nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs the zeus binary with `arguments` under `environment` (a prefix of VAR=value words; every
// zeus-related variable not given is cleared).
Result run_zeus(const std::string& environment, const std::string& arguments) {
  const std::string zeus = ZEUS_CLI_PATH;
  const std::string command =
      "env -u ZEUS_SIMULATED_GPUS -u CUDA_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES "
      "-u ZEUS_NVML_LIBRARY -u ZEUS_AMDSMI_LIBRARY "
      "ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "
      "ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so " +
      environment + " " + zeus + " " + arguments + " 2>&1";
  const auto run = zeus::testing::run_command(command);
  return {run.exit_code, run.output};
}

json parse_json(const Result& result) {
  const auto start = result.output.find('{');
  if (start == std::string::npos) {
    throw std::runtime_error("no JSON in: " + result.output);
  }
  return json::parse(result.output.substr(start));
}

TEST(Cli, HelpOnEverySubcommand) {
  const Result top = run_zeus("", "--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.output.find("show-env"), std::string::npos);
  EXPECT_NE(top.output.find("Exit codes"), std::string::npos);
  const Result sub = run_zeus("", "show-env --help");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.output.find("--json"), std::string::npos);
}

TEST(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run_zeus("", "").exit_code, 2);
  EXPECT_EQ(run_zeus("", "no-such-command").exit_code, 2);
  EXPECT_EQ(run_zeus("", "show-env --no-such-flag").exit_code, 2);
}

TEST(Cli, ShowEnvOnSimulatedGpus) {
  const Result result = run_zeus("ZEUS_SIMULATED_GPUS=4:h200 CUDA_VISIBLE_DEVICES=2,0",
                                 "show-env --json --powercap-root /nonexistent");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const json out = parse_json(result);
  ASSERT_EQ(out["gpus"].size(), 2u);
  const json& gpu = out["gpus"][0];
  EXPECT_EQ(gpu["index"], 0);
  EXPECT_EQ(gpu["physical_index"], 2);
  EXPECT_EQ(gpu["name"], "NVIDIA H200");
  EXPECT_EQ(gpu["backend"], "simulated");
  EXPECT_EQ(gpu["power_limit_min_w"], 200.0);
  EXPECT_EQ(gpu["power_limit_max_w"], 700.0);
  EXPECT_EQ(gpu["power_limit_w"], 700.0);
  EXPECT_EQ(gpu["energy_counter"], true);
  EXPECT_TRUE(gpu["uuid"].get<std::string>().starts_with("GPU-"));
  EXPECT_EQ(out["gpus"][1]["physical_index"], 0);
  EXPECT_TRUE(out["cpus"].is_array());
  EXPECT_EQ(out["rapl"]["available"], false);
  EXPECT_EQ(out["backend"], "simulated");
}

TEST(Cli, ShowEnvTextListsBackendsGpusAndCpus) {
  const Result result = run_zeus("ZEUS_SIMULATED_GPUS=2:v100", "show-env");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Tesla V100-PCIE-32GB"), std::string::npos);
  EXPECT_NE(result.output.find("250 (100-250)"), std::string::npos);
  EXPECT_NE(result.output.find("CPUs (RAPL"), std::string::npos);
}

TEST(Cli, ShowEnvWithoutGpusExplainsAndSucceeds) {
  const Result result = run_zeus("", "show-env");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("nvml"), std::string::npos);
  EXPECT_NE(result.output.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(result.output.find("No GPU found"), std::string::npos);
  const json out = parse_json(run_zeus("", "show-env --json"));
  EXPECT_TRUE(out["gpus"].empty());
  EXPECT_EQ(out["backends"][1]["loaded"], false);
}

TEST(Cli, MalformedEnvironmentIsAUsageErrorQuotingIt) {
  Result result = run_zeus("ZEUS_SIMULATED_GPUS=4:h200 CUDA_VISIBLE_DEVICES=0,abc", "show-env");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("CUDA_VISIBLE_DEVICES=\"0,abc\""), std::string::npos);
  result = run_zeus("ZEUS_SIMULATED_GPUS=many", "show-env");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("\"many\""), std::string::npos);
  result = run_zeus("ZEUS_SIMULATED_GPUS=1 CUDA_VISIBLE_DEVICES=MIG-1234", "show-env");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("MIG"), std::string::npos);
}

TEST(Cli, ShowEnvThroughTheFakeNvml) {
  const std::string fake = ZEUS_FAKE_NVML_PATH;
  const auto config = std::filesystem::temp_directory_path() /
                      ("zeus-cli-fake-nvml-" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << json{
      {"driver_version", "560.35.03"},
      {"devices",
       {{{"name", "NVIDIA A40"},
         {"uuid", "GPU-0a400000-0000-4000-8000-000000000000"},
         {"architecture", 7},
         {"power_limit_min_mw", 100000},
         {"power_limit_max_mw", 300000},
         {"power_limit_default_mw", 300000},
         {"power_limit_mw", 250000},
         {"power_usage_mw", 80000},
         {"energy_mj", 1}}}}}.dump();
  const Result result = run_zeus(
      "ZEUS_NVML_LIBRARY=" + fake + " ZEUS_FAKE_NVML_CONFIG=" + config.string(), "show-env --json");
  std::filesystem::remove(config);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const json out = parse_json(result);
  ASSERT_EQ(out["gpus"].size(), 1u);
  EXPECT_EQ(out["gpus"][0]["backend"], "nvml");
  EXPECT_EQ(out["gpus"][0]["name"], "NVIDIA A40");
  EXPECT_EQ(out["gpus"][0]["power_limit_w"], 250.0);
  EXPECT_EQ(out["gpus"][0]["energy_counter"], true);
  EXPECT_EQ(out["backends"][1]["driver_version"], "560.35.03");
  // The fake counter stands still: the probe says so after its time instead of a period.
  EXPECT_TRUE(out["gpus"][0]["counter_refresh_s"].is_null());
  EXPECT_NE(out["gpus"][0]["counter_refresh"].get<std::string>().find("did not change"),
            std::string::npos);
}

// A GH200 as its driver shows it: GPU-scope power refused, module power there. show-env says
// that its power and energy are the module's (GPU + CPU + memory).
TEST(Cli, ShowEnvSaysAGraceHopperMeasuresItsModule) {
  const std::string fake = ZEUS_FAKE_NVML_PATH;
  const auto config = std::filesystem::temp_directory_path() /
                      ("zeus-cli-fake-gh200-" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << json{
      {"devices",
       {{{"name", "NVIDIA GH200 480GB"},
         {"uuid", "GPU-0a200000-0000-4000-8000-000000000000"},
         {"architecture", 9},
         {"power_fields", {{"186:0", {{"nvml_return", 3}}}, {"186:1", 450000}}},
         {"energy_mj", 1}}}}}.dump();
  const std::string env = "ZEUS_NVML_LIBRARY=" + fake + " ZEUS_FAKE_NVML_CONFIG=" + config.string();
  const Result text = run_zeus(env, "show-env --no-probe");
  const Result as_json = run_zeus(env, "show-env --json --no-probe");
  std::filesystem::remove(config);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("measures: power module, energy module (module = GPU + CPU + memory"),
            std::string::npos)
      << text.output;
  const json out = parse_json(as_json);
  EXPECT_EQ(out["gpus"][0]["power_scope"], "module");
  EXPECT_EQ(out["gpus"][0]["energy_scope"], "module");
  // A discrete GPU says nothing of it in the text, and "gpu" in the JSON.
  EXPECT_EQ(run_zeus("ZEUS_SIMULATED_GPUS=1:h200", "show-env --no-probe").output.find("measures:"),
            std::string::npos);
  const json simulated = parse_json(run_zeus("ZEUS_SIMULATED_GPUS=1:h200", "show-env --json"));
  EXPECT_EQ(simulated["gpus"][0]["energy_scope"], "gpu");
  const json module =
      parse_json(run_zeus("ZEUS_SIMULATED_GPUS=1:h200:module", "show-env --json --no-probe"));
  EXPECT_EQ(module["gpus"][0]["energy_scope"], "module");
}

TEST(Cli, ShowEnvMeasuresTheCounterRefreshUnlessAskedNotTo) {
  Result result = run_zeus("ZEUS_SIMULATED_GPUS=2:h200", "show-env");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("energy counter refresh: changed at every read"), std::string::npos)
      << result.output;
  result = run_zeus("ZEUS_SIMULATED_GPUS=2:h200", "show-env --no-probe");
  EXPECT_EQ(result.output.find("energy counter refresh"), std::string::npos) << result.output;
  const json out = parse_json(run_zeus("ZEUS_SIMULATED_GPUS=1:p100", "show-env --json"));
  EXPECT_EQ(out["gpus"][0]["counter_refresh"], "");  // no counter to measure
}

// A load command that logs the spans it claims to run (the simulated GPU draws what it draws).
std::string write_load_script(const std::filesystem::path& dir, const std::string& rows) {
  const auto script = dir / "load.sh";
  std::ofstream(script) << "#!/bin/sh\nsleep 0.3\nprintf '" << rows << "' > \"$1\"\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script.string();
}

TEST(Cli, SensorProbeAloneAndWithALoadCommand) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("zeus-cli-sensor-probe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Result result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100", "sensor-probe --duration 0.2s --json");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  json out = parse_json(result);
  EXPECT_EQ(out["gpu"]["name"], "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(out["energy_counter"]["changed_every_poll"].get<bool>());
  EXPECT_TRUE(out["sensor_parameters"]["counter_refresh_s"].is_null());

  const std::string log = (dir / "load.csv").string();
  const std::string script = write_load_script(dir, "kind,start_s,end_s,period_s\\nidle,0,1,0\\n");
  result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100",
                    "sensor-probe --json --load-log " + log + " -- " + script + " " + log);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  out = parse_json(result);
  EXPECT_TRUE(out.contains("idle_w"));

  // Bad input: each names what was wrong.
  result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100", "sensor-probe --load-log " + log);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("give the command after --"), std::string::npos) << result.output;
  result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100", "sensor-probe --poll-interval 5s");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("--poll-interval"), std::string::npos) << result.output;
  const std::string bad = write_load_script(dir, "kind,start_s\\nidle,zero\\n");
  result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100",
                    "sensor-probe --load-log " + log + " -- " + bad + " " + log);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("load log"), std::string::npos) << result.output;
  result = run_zeus("ZEUS_SIMULATED_GPUS=1:a100", "sensor-probe --duration 0.1s -- false");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("ended with code 1"), std::string::npos) << result.output;
  result = run_zeus("", "sensor-probe");
  EXPECT_EQ(result.exit_code, 4);
  std::filesystem::remove_all(dir);
}

// Issue 29: a real GPU model nobody has characterised gets the conservative sensor (a 100 ms
// refresh at its highest power limit), and --cross-check trusts the power over a counter that
// never moves.
TEST(Cli, MonitorBoundsAndCrossChecksAnNvmlGpuWithAStuckCounter) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("zeus-cli-stuck-counter-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const nlohmann::json h100 = {{"name", "NVIDIA H100 80GB HBM3"},
                               {"uuid", "GPU-11000000-0000-4000-8000-000000000000"},
                               {"architecture", 9},
                               {"power_limit_min_mw", 200000},
                               {"power_limit_max_mw", 700000},
                               {"power_limit_default_mw", 700000},
                               {"power_limit_mw", 700000},
                               {"power_usage_mw", 310000},
                               {"power_fields", {{"186:0", 310000}, {"185:0", 300000}}},
                               {"energy_mj", 123456},
                               {"energy_step_mj", 0}};
  std::ofstream(dir / "nvml.json") << json{{"devices", {h100}}}.dump();
  const Result result =
      run_zeus("ZEUS_NVML_LIBRARY=" + std::string(ZEUS_FAKE_NVML_PATH) +
                   " ZEUS_FAKE_NVML_CONFIG=" + (dir / "nvml.json").string(),
               "monitor --cross-check --duration 0.1s --json -o " + (dir / "s.json").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream file(dir / "s.json");
  const json summary = json::parse(file);
  // A run under 5 refresh periods: the text summary says its figures may be off (no log line).
  const Result text = run_zeus("ZEUS_NVML_LIBRARY=" + std::string(ZEUS_FAKE_NVML_PATH) +
                                   " ZEUS_FAKE_NVML_CONFIG=" + (dir / "nvml.json").string(),
                               "monitor --duration 0.1s");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("± 70.001 J"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("note: the run lasted under 5 refresh periods"), std::string::npos)
      << text.output;
  EXPECT_EQ(text.output.find("window 'zeus.monitor' lasted"), std::string::npos) << text.output;
  EXPECT_EQ(summary["gpu_energy_j"]["0"], 0.0);
  EXPECT_DOUBLE_EQ(summary["gpu_energy_error_j"]["0"].get<double>(), 0.1 * 700.0 + 0.001);
  ASSERT_EQ(summary["cross_check"].size(), 1u) << summary.dump();
  const json& check = summary["cross_check"][0];
  EXPECT_EQ(check["trust"], "power");
  EXPECT_EQ(check["disagrees"], true);
  EXPECT_EQ(check["counter_energy_j"], 0.0);
  EXPECT_NEAR(check["power_energy_j"].get<double>() / check["duration_s"].get<double>(), 310.0,
              1.0);
  EXPECT_NE(check["reason"].get<std::string>().find("did not advance"), std::string::npos);
  EXPECT_NE(summary["notes"].dump().find("trust the power"), std::string::npos) << summary["notes"];
}

}  // namespace
