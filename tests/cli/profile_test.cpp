// `zeus profile -- CMD`, run as a user would run it, on a simulated H200 with the thermal model.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "monitor_test_support.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Short durations so that a whole profile takes about a second: one run of `true` is an iteration.
// A threshold every candidate meets, so that the chosen durations (the smallest) do not depend on
// how loaded the machine is.
const std::string kShort =
    " --measurement-durations 0.05,0.1 --cooldown-durations 0,0.05 --trials 2 --threshold 100 ";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `zeus ARGS` with a simulated thermal H200 and no real vendor library.
std::string zeus_command(const std::string& args) {
  return "env -u CUDA_VISIBLE_DEVICES ZEUS_SIMULATED_GPUS=1:h200:thermal "
         "ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "
         "ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so " +
         std::string(ZEUS_CLI_PATH) + " " + args;
}

zeus::testing::SplitOutput run_zeus(const std::string& args) {
  const fs::path err =
      fs::temp_directory_path() / ("zeus_profile_test_" + std::to_string(::getpid()) + ".err");
  return zeus::testing::run_split(zeus_command(args), err);
}

TEST(ProfileCli, TextReportListsCandidatesAndChosenDurations) {
  const auto run = run_zeus("profile" + kShort + "-- true");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "Measurement duration sweep")) << run.out;
  EXPECT_TRUE(contains(run.out, "Cooldown duration sweep")) << run.out;
  EXPECT_TRUE(contains(run.out, "J per iteration")) << run.out;
  EXPECT_TRUE(contains(run.out, "VALID")) << run.out;
  EXPECT_TRUE(contains(run.out, "Chosen: measurement duration 0.05 s, cooldown duration 0 s"))
      << run.out;
  EXPECT_FALSE(contains(run.err, "\r")) << "no progress bar when stderr is not a terminal";
}

TEST(ProfileCli, JsonIsOneObject) {
  const auto run = run_zeus("profile --json" + kShort + "-- true");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json summary = json::parse(run.out);
  EXPECT_EQ(summary["command"], json::array({"true"}));
  EXPECT_EQ(summary["gpus"], json::array({0}));
  EXPECT_DOUBLE_EQ(summary["measurement_duration_s"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(summary["cooldown_duration_s"].get<double>(), 0.0);
  const json& candidates = summary["measurement_sweep"]["candidates"];
  ASSERT_EQ(candidates.size(), 2U);  // every candidate is tried, for the full table
  for (const json& candidate : candidates) {
    EXPECT_GT(candidate["mean_energy_per_iteration_j"].get<double>(), 0.0);
    EXPECT_EQ(candidate["trials"], 2);
    EXPECT_TRUE(candidate["valid"].is_boolean());
    // The thermal model reports a temperature above absolute zero and below boiling.
    EXPECT_GT(candidate["mean_temperature_before_c"].get<double>(), 0.0);
    EXPECT_LT(candidate["mean_temperature_after_c"].get<double>(), 100.0);
  }
  EXPECT_EQ(summary["cooldown_sweep"]["candidates"].size(), 2U);
  EXPECT_GT(summary["measurement_sweep"]["iteration_duration_s"].get<double>(), 0.0);
}

// On a sensor-faithful H200 (power sampled 25 ms of every 100 ms, counter refreshed every
// 100 ms), each trial runs as 4 runs started a quarter of the sampling period apart
// (zeus/monitor/profile.hpp, PhaseShifts). Runs of about 125 ms mostly hold a counter refresh, so
// the trials read energy (much shorter runs read 0 J, as on a real GPU).
TEST(ProfileCli, PhaseShiftsSplitEachTrialIntoRuns) {
  const fs::path err =
      fs::temp_directory_path() / ("zeus_profile_shift_" + std::to_string(::getpid()) + ".err");
  const auto run = zeus::testing::run_split(
      "env -u CUDA_VISIBLE_DEVICES ZEUS_SIMULATED_GPUS=1:h200:sensor "
      "ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "
      "ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so " +
          std::string(ZEUS_CLI_PATH) +
          " profile --json --phase-shifts 4 --measurement-durations 0.5 --cooldown-durations 0 "
          "--trials 2 --threshold 100 -- true",
      err);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json summary = json::parse(run.out);
  const json& candidate = summary["measurement_sweep"]["candidates"][0];
  EXPECT_GT(candidate["mean_energy_per_iteration_j"].get<double>(), 0.0);
  EXPECT_EQ(candidate["trials"], 2);
}

TEST(ProfileCli, FailingCommandNamesItsTrial) {
  const auto run = run_zeus("profile" + kShort + "-- false");
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "exited with code 1 in trial 1 of the measurement-duration sweep"))
      << run.err;
  const auto killed = run_zeus("profile" + kShort + "-- sh -c 'kill -KILL $$'");
  EXPECT_EQ(killed.exit_code, 1) << killed.err;
  EXPECT_TRUE(contains(killed.err, "was killed by SIGKILL")) << killed.err;
}

TEST(ProfileCli, NoValidCandidateIsAnErrorAfterTheTable) {
  // A threshold no two runs can meet.
  const auto run = run_zeus(
      "profile --measurement-durations 0.05 --cooldown-durations 0 --trials 2 --threshold 1e-12 "
      "-- true");
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.out, "INVALID")) << run.out;
  EXPECT_TRUE(contains(run.err, "no measurement duration candidate")) << run.err;
}

TEST(ProfileCli, BadInputIsExit2) {
  const struct {
    std::string args;
    std::string message;
  } cases[] = {
      {"profile --measurement-durations '' -- true", "--measurement-durations is empty"},
      {"profile --cooldown-durations 0,,1 -- true", "empty item"},
      {"profile --cooldown-durations -1 -- true", "negative"},
      {"profile --measurement-durations nan -- true", "not finite"},
      {"profile --measurement-durations 0 -- true", "must be > 0"},
      {"profile --trials 0 -- true", "--trials 0"},
      {"profile --phase-shifts 0 -- true", "--phase-shifts 0"},
      {"profile --threshold nan -- true", "--threshold"},
      {"profile --gpus 5 -- true", "--gpus"},
      {"profile", "needs a command"},
      {"profile" + kShort + "-- /nonexistent/zeus-profile-cmd", "cannot run"},
  };
  for (const auto& c : cases) {
    const auto run = run_zeus(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.err;
    EXPECT_TRUE(contains(run.err, c.message)) << c.args << "\n" << run.err;
  }
}

// Shell words that wait (at most 20 s) until `file` exists: zeus has run its command, so its
// signal handling is in place, however slowly a loaded machine started it.
std::string wait_for_file(const std::string& file) {
  return "i=0; while [ ! -e " + file + " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; ";
}

// A path for a test's "the command has run" file, unique to this process and removed first.
std::string started_file(const std::string& name) {
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("zeus_profile_" + name + "_" + std::to_string(::getpid())))
                               .string();
  std::filesystem::remove(file);
  return file;
}

TEST(ProfileCli, SigtermStopsCleanlyWithoutLeavingTheCommand) {
  // The marker file names this test's command, so that a leftover one can be looked for.
  const std::string marker = "zeus_profile_sigterm_" + std::to_string(::getpid());
  const std::string started = started_file("sigterm");
  const auto run = zeus::testing::run_command(
      "sh -c '" +
      zeus_command("profile --measurement-durations 5 --cooldown-durations 0 "
                   "--trials 2 -- sh -c \"touch " +
                   started + "; sleep 0.4; : " + marker + "\"") +
      " 2>&1 & pid=$!; " + wait_for_file(started) + "kill -TERM $pid; wait $pid; echo rc=$?'");
  std::filesystem::remove(started);
  EXPECT_TRUE(contains(run.output, "stopped by SIGTERM")) << run.output;
  EXPECT_TRUE(contains(run.output, "rc=143")) << run.output;
  const auto left = zeus::testing::run_command("pgrep -f '[z]" + marker.substr(1) + "'");
  EXPECT_NE(left.exit_code, 0) << "the command was left running: " << left.output;
}

TEST(ProfileCli, SecondSigtermKillsACommandThatIgnoresIt) {
  // The command ignores SIGTERM and would loop forever; the outer shell kills zeus after 8 s so
  // that a zeus that waits for it fails the test instead of hanging it.
  const std::string marker = "zeus_profile_ignores_term_" + std::to_string(::getpid());
  const std::string started = started_file("ignores_term");
  const auto run = zeus::testing::run_command(
      "sh -c '" +
      zeus_command("profile --measurement-durations 5 --cooldown-durations 0 "
                   "--trials 2 -- sh -c \"trap \\\"\\\" TERM; touch " +
                   started + "; while :; do sleep 0.1; done; : " + marker + "\"") +
      " 2>&1 & pid=$!; " + wait_for_file(started) +
      "kill -TERM $pid; sleep 0.5; kill -TERM $pid; "
      "(sleep 8; kill -KILL $pid) >/dev/null 2>&1 & guard=$!; wait $pid; rc=$?; "
      "kill $guard 2>/dev/null; echo rc=$rc'");
  zeus::testing::run_command("pkill -KILL -f '[z]" + marker.substr(1) + "'");
  std::filesystem::remove(started);
  EXPECT_TRUE(contains(run.output, "stopped by SIGTERM")) << run.output;
  EXPECT_TRUE(contains(run.output, "rc=143")) << run.output;
}

TEST(ProfileCli, HugeCooldownWaitsUntilStopped) {
  // 99999999999h is more nanoseconds than an int64 holds: the cooldown must not wrap to none.
  // Stopped a second after its command first ran: with the cooldown wrapped to none, zeus would
  // have finished by then (exit 0).
  const std::string started = started_file("huge_cooldown");
  const auto run = zeus::testing::run_command(
      "sh -c '" +
      zeus_command("profile --measurement-durations 0.05 --cooldown-durations 99999999999h "
                   "--trials 2 --threshold 100 -- touch " +
                   started) +
      " 2>&1 & pid=$!; " + wait_for_file(started) +
      "sleep 1; kill -TERM $pid; wait $pid; echo rc=$?'");
  std::filesystem::remove(started);
  EXPECT_TRUE(contains(run.output, "stopped by SIGTERM")) << run.output;
  EXPECT_TRUE(contains(run.output, "rc=143")) << run.output;
}

TEST(ProfileCli, ProgressBarOnlyOnATerminal) {
  if (zeus::testing::run_command("command -v script >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "script(1) (util-linux) is not installed: cannot make a terminal";
  }
  const auto terminal = zeus::testing::run_command(
      "script -qec \"" + zeus_command("profile" + kShort + "-- true >/dev/null") + "\" /dev/null");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "trials")) << terminal.output;
  EXPECT_TRUE(contains(terminal.output, "[#")) << terminal.output;
}

// `zeus profile` passes SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to its command as `zeus monitor`
// does (the same supervise_child): zeus runs as a process so that the test can signal it.
class ProfileSignals : public zeus::testing::cli_monitor::CliMonitor {
 protected:
  // `zeus profile` with 5 s windows, so that the one run of the helper is signalled inside one.
  std::vector<std::string> profile_args(const std::vector<std::string>& helper_args) const {
    std::vector<std::string> args = {"profile",
                                     "--measurement-durations",
                                     "5",
                                     "--cooldown-durations",
                                     "0",
                                     "--trials",
                                     "2",
                                     "--",
                                     zeus::testing::cli_monitor::kHelper};
    args.insert(args.end(), helper_args.begin(), helper_args.end());
    return args;
  }
};

// Whether `pid` is a live process (not gone, not a zombie).
bool running(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("State:")) {
      return !contains(line, "zombie");
    }
  }
  return false;
}

// Whether `pid` is gone within a few seconds.
bool ends_soon(pid_t pid) {
  for (int i = 0; i < 500 && running(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return !running(pid);
}

const std::string kThermalH200 = "ZEUS_SIMULATED_GPUS=1:h200:thermal";

TEST_F(ProfileSignals, HangupAndUserSignalsArePassedOnAndTheCommandGoesOn) {
  // They used to kill zeus (exit 129, 138) and leave the command running.
  zeus::testing::cli_monitor::ZeusProcess zeus(
      dir_, {kThermalH200}, profile_args({"record", path("ready"), path("signals.log")}));
  ASSERT_TRUE(zeus::testing::cli_monitor::wait_for_file(path("ready"), 20.0));
  const pid_t helper = std::stoi(zeus::testing::read_file(path("ready")));
  std::string expected;
  for (const int signal : {SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT}) {
    ::kill(zeus.pid(), signal);
    expected += std::to_string(signal) + "\n";
    for (int i = 0; i < 500 && zeus::testing::read_file(path("signals.log")) != expected; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(zeus::testing::read_file(path("signals.log")), expected) << "signal " << signal;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(running(helper)) << "none of them is a stop signal";
  ::kill(zeus.pid(), SIGTERM);  // passed on: the helper exits 7, zeus stops with 143
  const auto result = zeus.wait(10.0);
  EXPECT_EQ(result.kill_signal, 0);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_TRUE(contains(result.err, "stopped by SIGTERM")) << result.err;
  EXPECT_TRUE(ends_soon(helper)) << "the command outlived zeus";
}

TEST_F(ProfileSignals, APassedOnSignalThatKillsTheCommandEndsTheProfileWithItsCode) {
  // As `zeus monitor` exits with its command's 128+N. It used to be zeus that died of it, with
  // the command left running.
  for (const auto& [signal, name] : {std::pair{SIGHUP, "SIGHUP"}, std::pair{SIGUSR1, "SIGUSR1"}}) {
    const std::string ready = "ready" + std::to_string(signal);
    zeus::testing::cli_monitor::ZeusProcess zeus(dir_, {kThermalH200},
                                                 profile_args({"wait", path(ready)}));
    ASSERT_TRUE(zeus::testing::cli_monitor::wait_for_file(path(ready), 20.0));
    const pid_t helper = std::stoi(zeus::testing::read_file(path(ready)));
    ::kill(zeus.pid(), signal);
    const auto result = zeus.wait(10.0);
    EXPECT_EQ(result.kill_signal, 0) << "signal " << signal;
    EXPECT_EQ(result.exit_code, 128 + signal) << result.err;
    EXPECT_TRUE(contains(result.err, "stopped by " + std::string(name) +
                                         " (passed on to the command, which it killed)"))
        << result.err;
    EXPECT_TRUE(ends_soon(helper)) << "the command outlived zeus";
  }
}

}  // namespace
