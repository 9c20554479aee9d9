// `zeus monitor`, run as a user would run it, on simulated GPUs: exit codes, the summary,
// signals, durations and output files (power_test.cpp: `zeus power`; monitor_footprint_test.cpp:
// carbon and cost).
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

TEST_F(CliMonitor, PassesTheCommandsExitCodeThrough) {
  const Result result =
      run({kTwoH200}, {"monitor", "--output", path("summary.txt"), "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(result.exit_code, 3) << result.err;
  const std::string summary = read_file(path("summary.txt"));
  EXPECT_TRUE(contains(summary, "Energy of sh -c 'exit 3' (exit 3)")) << summary;
  EXPECT_TRUE(contains(summary, "GPU 0")) << summary;
  EXPECT_TRUE(contains(summary, "GPU 1")) << summary;
  EXPECT_TRUE(contains(summary, "NVIDIA H200")) << summary;
  EXPECT_TRUE(contains(summary, "total")) << summary;
  EXPECT_EQ(result.err, "");

  EXPECT_EQ(run({kTwoH200}, {"monitor", "-o", path("s.txt"), "--", "true"}).exit_code, 0);
}

TEST_F(CliMonitor, CommandThatCannotStartGives127AndAMessage) {
  const Result result =
      run({kTwoH200}, {"monitor", "--output", path("summary.txt"), "--", "/nonexistent/zeus-cmd"});
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_TRUE(
      contains(result.err, "zeus: cannot run '/nonexistent/zeus-cmd': No such file or directory"))
      << result.err;
  EXPECT_EQ(read_file(path("summary.txt")), "");

  // A command that ran and exited with 127 is not reported as not started.
  const Result ran =
      run({kTwoH200}, {"monitor", "--output", path("summary.txt"), "--", "sh", "-c", "exit 127"});
  EXPECT_EQ(ran.exit_code, 127);
  EXPECT_FALSE(contains(ran.err, "cannot run")) << ran.err;
  EXPECT_TRUE(contains(read_file(path("summary.txt")), "(exit 127)"));
}

TEST_F(CliMonitor, CommandKilledByASignalGives128PlusTheSignal) {
  const Result result = run(
      {kTwoH200}, {"monitor", "--output", path("summary.txt"), "--", "sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
  EXPECT_TRUE(contains(read_file(path("summary.txt")), "killed by SIGKILL, exit 137"));
}

TEST_F(CliMonitor, SummaryGoesToStandardErrorAndLeavesStandardOutputToTheCommand) {
  const Result result = run({kTwoH200}, {"monitor", "--", "echo", "hello world"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "hello world\n");
  EXPECT_TRUE(contains(result.err, "Energy of echo 'hello world' (exit 0)")) << result.err;
  EXPECT_TRUE(contains(result.err, "NVIDIA H200")) << result.err;
}

TEST_F(CliMonitor, JsonSummaryHasTheDocumentedKeys) {
  const auto start = Clock::now();
  const Result result = run(
      {kTwoH200}, {"monitor", "--json", "--output", path("summary.json"), "--", "sleep", "0.3"});
  const double wall_s = seconds_since(start);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("summary.json")));
  ASSERT_TRUE(summary["time_s"].is_number());
  const double time_s = summary["time_s"].get<double>();
  EXPECT_GE(time_s, 0.3);
  EXPECT_LE(time_s, wall_s);
  EXPECT_EQ(summary["exit_code"], 0);
  EXPECT_EQ(summary["command"], json({"sleep", "0.3"}));
  EXPECT_TRUE(summary["signal"].is_null());
  EXPECT_EQ(summary["killed"], false);
  ASSERT_TRUE(summary["gpu_energy_j"].is_object());
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(summary["gpu_energy_j"].contains("0"));
  EXPECT_TRUE(summary["gpu_energy_j"].contains("1"));
  expect_idle_h200_energy(summary["gpu_energy_j"], time_s);
  // No RAPL on the fake root: no CPU, and a note saying why.
  EXPECT_EQ(summary["cpu_energy_j"], json::object());
  EXPECT_EQ(summary["dram_energy_j"], json::object());
  EXPECT_EQ(summary["gpu_energy_scope"], json({{"0", "gpu"}, {"1", "gpu"}}));
  EXPECT_EQ(summary["cpu_energy_in_gpu_energy"], false);
  ASSERT_TRUE(summary["notes"].is_array());
  EXPECT_TRUE(contains(summary["notes"].dump(), "RAPL")) << summary["notes"];
}

TEST_F(CliMonitor, SelectedGpusOnly) {
  const Result result =
      run({"ZEUS_SIMULATED_GPUS=4:h200", "CUDA_VISIBLE_DEVICES=3,2,1"},
          {"monitor", "--gpus", "2,0", "--json", "-o", path("s.json"), "--", "true"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(summary["gpu_energy_j"].contains("0"));
  EXPECT_TRUE(summary["gpu_energy_j"].contains("2"));
}

TEST_F(CliMonitor, CpuAndDramFromRapl) {
  const fs::path root = make_powercap_tree();
  // The command advances the counters by 4 J (package) and 1.5 J (DRAM).
  const std::string script = "echo 5000000 > '" + (root / "intel-rapl:0/energy_uj").string() +
                             "' && echo 2000000 > '" +
                             (root / "intel-rapl:0/intel-rapl:0:0/energy_uj").string() + "'";
  Result result = run({kTwoH200}, {"monitor", "--powercap-root", root.string(), "--json", "-o",
                                   path("s.json"), "--", "sh", "-c", script});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_DOUBLE_EQ(summary["cpu_energy_j"]["0"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(summary["dram_energy_j"]["0"].get<double>(), 1.5);
  EXPECT_EQ(summary["notes"], json::array());

  result = run({kTwoH200}, {"monitor", "--powercap-root", root.string(), "--cpus", "0", "-o",
                            path("s.txt"), "--", "true"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = read_file(path("s.txt"));
  EXPECT_TRUE(contains(text, "CPU 0   package-0")) << text;
  EXPECT_TRUE(contains(text, "DRAM 0  package-0 DRAM")) << text;

  result =
      run({kTwoH200}, {"monitor", "--powercap-root", root.string(), "--cpus", "1", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "valid CPU package indices are 0")) << result.err;
}

// A command during which the package counter wraps twice: the tracker's background reads
// (every 125 ms: 1 J at 2 W wraps in 0.5 s) see both wraps, which reads at the start and the end
// alone cannot.
TEST_F(CliMonitor, CpuCounterThatWrapsDuringTheCommandIsCountedExactly) {
  const fs::path root = path("wrapping-powercap");
  const fs::path zone = root / "intel-rapl:0";
  fs::create_directories(zone);
  std::ofstream(zone / "name") << "package-0\n";
  std::ofstream(zone / "energy_uj") << "0\n";
  std::ofstream(zone / "max_energy_range_uj") << "1000000\n";
  std::ofstream(zone / "constraint_0_max_power_uw") << "2000000\n";
  // Each value is held 0.8 s and replaced atomically: +0.6, +0.5 (wrap), +0.6, +0.5 (wrap), +0.1.
  const std::string energy = (zone / "energy_uj").string();
  const std::string script = "w() { echo $1 > '" + energy + ".new' && mv '" + energy + ".new' '" +
                             energy +
                             "' && sleep 0.8; }; w 600000 && w 100000 && w 700000 && w 200000 && "
                             "w 300000";
  const Result result = run({kTwoH200}, {"monitor", "--powercap-root", root.string(), "--json",
                                         "-o", path("s.json"), "--", "sh", "-c", script});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_DOUBLE_EQ(summary["cpu_energy_j"]["0"].get<double>(), 2.3) << result.err;
}

TEST_F(CliMonitor, CpusWithoutRaplIsAnErrorButTheDefaultIsANote) {
  Result result = run({kTwoH200}, {"monitor", "--powercap-root", path("none").string(), "--cpus",
                                   "0", "--", "true"});
  EXPECT_EQ(result.exit_code, 4) << result.err;
  EXPECT_TRUE(contains(result.err, "RAPL is not available")) << result.err;

  result = run({kTwoH200}, {"monitor", "--powercap-root", path("none").string(), "-o",
                            path("s.txt"), "--", "true"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(read_file(path("s.txt")), "note: no CPU energy: RAPL is not available"));
}

TEST_F(CliMonitor, NoGpuIsNotAnError) {
  const Result result = run({}, {"monitor", "--json", "-o", path("s.json"), "--", "true"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_EQ(summary["gpu_energy_j"], json::object());
  EXPECT_TRUE(contains(summary["notes"].dump(), "no GPU")) << summary["notes"];
}

TEST_F(CliMonitor, GpuWithoutEnergyCounterIsSampled) {
  // A P100 has no energy counter: the monitor integrates sampled power (26 W when idle).
  const Result result =
      run({"ZEUS_SIMULATED_GPUS=1:p100"},
          {"monitor", "--interval", "10ms", "--duration", "0.3s", "--json", "-o", path("s.json")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  const double time_s = summary["time_s"].get<double>();
  const double energy_j = summary["gpu_energy_j"]["0"].get<double>();
  EXPECT_GT(energy_j, 26.0 * time_s * 0.7);
  EXPECT_LT(energy_j, 26.0 * time_s * 1.2 + 0.1);
}

TEST_F(CliMonitor, SigtermToZeusIsForwardedToTheCommand) {
  // The command dies of the forwarded SIGTERM: zeus exits (not dies) with 143.
  ZeusProcess zeus(dir_, {kTwoH200},
                   {"monitor", "-o", path("summary.txt"), "--", kHelper, "wait", path("ready")});
  ASSERT_TRUE(wait_for_file(path("ready")));
  const auto signalled = Clock::now();
  ::kill(zeus.pid(), SIGTERM);
  const Result result = zeus.wait(5.0);
  EXPECT_EQ(result.kill_signal, 0);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_LT(seconds_since(signalled), 2.0);
  const std::string summary = read_file(path("summary.txt"));
  EXPECT_TRUE(contains(summary, "killed by SIGTERM, exit 143")) << summary;
  EXPECT_TRUE(contains(summary, "GPU 1")) << summary;
}

TEST_F(CliMonitor, ForwardedSignalsReachACommandThatHandlesThem) {
  for (const int signal : {SIGTERM, SIGINT}) {
    fs::remove(path("ready"));
    ZeusProcess zeus(dir_, {kTwoH200},
                     {"monitor", "--json", "-o", path("summary.json"), "--", kHelper, "wait",
                      path("ready"), "42"});
    ASSERT_TRUE(wait_for_file(path("ready")));
    ::kill(zeus.pid(), signal);
    const Result result = zeus.wait(5.0);
    EXPECT_EQ(result.exit_code, 42) << "signal " << signal << ": " << result.err;
    const json summary = json::parse(read_file(path("summary.json")));
    EXPECT_EQ(summary["exit_code"], 42);
  }
}

TEST_F(CliMonitor, SignalBeforeTheCommandStartsIsForwardedOnceItDoes) {
  // Whenever the signal lands after zeus installed its handlers, the command gets it.
  ZeusProcess zeus(dir_, {kTwoH200}, {"monitor", "-o", path("summary.txt"), "--", "sleep", "30"});
  ASSERT_TRUE(zeus.wait_until_catching_sigterm());
  ::kill(zeus.pid(), SIGTERM);
  const Result result = zeus.wait(5.0);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
}

TEST_F(CliMonitor, SignalsIgnoredWhenZeusStartsStayIgnoredInTheCommand) {
  // As for a background job of a non-interactive shell: SIGINT is ignored.
  const fs::path launcher = path("ignore-sigint.sh");
  std::ofstream(launcher) << "#!/bin/sh\ntrap '' INT\nexec \"$@\"\n";
  fs::permissions(launcher, fs::perms::owner_all);
  ZeusProcess zeus(dir_, {kTwoH200},
                   {"monitor", "-o", path("s.txt"), "--", "sh", "-c", "kill -INT $$; exit 5"},
                   launcher.string());
  EXPECT_EQ(zeus.wait().exit_code, 5);
}

TEST_F(CliMonitor, DurationWithoutACommand) {
  const auto start = Clock::now();
  const Result result =
      run({kTwoH200}, {"monitor", "--duration", "0.3s", "--json", "-o", path("s.json")});
  const double wall_s = seconds_since(start);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  const double time_s = summary["time_s"].get<double>();
  EXPECT_GE(time_s, 0.3);
  EXPECT_LT(time_s, std::min(wall_s, 1.5));
  EXPECT_TRUE(summary["exit_code"].is_null());
  EXPECT_TRUE(summary["command"].is_null());
  expect_idle_h200_energy(summary["gpu_energy_j"], time_s);

  const Result text = run({kTwoH200}, {"monitor", "--duration", "100ms"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_TRUE(contains(text.err, "Energy over 0.1")) << text.err;
}

TEST_F(CliMonitor, DurationUnits) {
  for (const auto& [text, seconds] :
       std::vector<std::pair<std::string, double>>{{"0.15", 0.15},
                                                   {"150ms", 0.15},
                                                   {"0.0025m", 0.15},
                                                   {"0.0025min", 0.15},
                                                   {"0.00005h", 0.18}}) {
    const Result result =
        run({kTwoH200}, {"monitor", "--duration", text, "--json", "-o", path("s.json")});
    ASSERT_EQ(result.exit_code, 0) << text << ": " << result.err;
    const double time_s = json::parse(read_file(path("s.json")))["time_s"].get<double>();
    EXPECT_GE(time_s, seconds) << text;
    EXPECT_LT(time_s, seconds + 1.0) << text;
  }
  const Result negative = run({kTwoH200}, {"monitor", "--duration=-1s"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_TRUE(contains(negative.err, "it is negative")) << negative.err;
  const Result zero = run({kTwoH200}, {"monitor", "--duration", "0s"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.err, "must be longer than zero")) << zero.err;
}

TEST_F(CliMonitor, DurationIsInterruptibleBySigterm) {
  ZeusProcess zeus(dir_, {kTwoH200}, {"monitor", "--duration", "30s", "-o", path("s.txt")});
  ASSERT_TRUE(zeus.wait_until_catching_sigterm());
  ::kill(zeus.pid(), SIGTERM);
  const Result result = zeus.wait(5.0);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(result.wall_s, 5.0);
  EXPECT_TRUE(contains(read_file(path("s.txt")), "(interrupted by SIGTERM)"));
}

TEST_F(CliMonitor, DurationWithACommandIsATimeLimit) {
  const Result result =
      run({kTwoH200}, {"monitor", "--duration", "0.3s", "-o", path("s.txt"), "--", "sleep", "30"});
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  EXPECT_LT(result.wall_s, 3.0);
  const std::string summary = read_file(path("s.txt"));
  EXPECT_TRUE(contains(summary,
                       "killed by SIGTERM, exit 143, sent SIGTERM at the 300 ms time "
                       "limit"))
      << summary;
}

TEST_F(CliMonitor, ACommandIgnoringSigtermIsKilledAfterTheGracePeriod) {
  // The repro (it never returned): SIGTERM at 200 ms, SIGKILL 300 ms later.
  const Result result =
      run({kTwoH200}, {"monitor", "--duration", "200ms", "--kill-after", "300ms", "-o",
                       path("s.txt"), "--", "sh", "-c", "trap '' TERM; while :; do sleep 1; done"});
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
  EXPECT_GE(result.wall_s, 0.5);
  EXPECT_LT(result.wall_s, 4.0);
  const std::string summary = read_file(path("s.txt"));
  EXPECT_TRUE(contains(summary,
                       "killed by SIGKILL, exit 137, sent SIGTERM at the 200 ms time limit, sent "
                       "SIGKILL after the 300 ms grace period"))
      << summary;

  // --kill-after 0: SIGKILL right after SIGTERM; --json says so. The time limit leaves the helper
  // (under ASan, on a loaded machine) time to ignore SIGTERM before it comes.
  const Result at_once =
      run({kTwoH200}, {"monitor", "--duration", "1s", "--kill-after", "0", "--json", "-o",
                       path("s.json"), "--", kHelper, "wait", path("ready"), "ignore-stop"});
  EXPECT_EQ(at_once.exit_code, 128 + SIGKILL) << at_once.err;
  EXPECT_TRUE(fs::exists(path("ready")));  // it did ignore SIGTERM: this SIGKILL was needed
  EXPECT_LT(at_once.wall_s, 6.0);
  const json parsed = json::parse(read_file(path("s.json")));
  EXPECT_EQ(parsed["killed"], true);
  EXPECT_EQ(parsed["signal"], "SIGKILL");
  EXPECT_TRUE(contains(parsed["notes"].dump(), "sent SIGKILL right after SIGTERM"))
      << parsed["notes"];

  // A stop signal passed on from zeus starts the grace period too.
  fs::remove(path("ready"));
  ZeusProcess zeus(dir_, {kTwoH200},
                   {"monitor", "--kill-after", "0", "-o", path("s.txt"), "--", kHelper, "wait",
                    path("ready"), "ignore-stop"});
  ASSERT_TRUE(wait_for_file(path("ready")));
  ::kill(zeus.pid(), SIGINT);
  const Result interrupted = zeus.wait(5.0);
  EXPECT_EQ(interrupted.exit_code, 128 + SIGKILL) << interrupted.err;
  EXPECT_TRUE(contains(read_file(path("s.txt")), "exit 137, sent SIGKILL right after SIGINT"))
      << read_file(path("s.txt"));
}

TEST_F(CliMonitor, KillAfterDefaultsToTenSecondsAndRejectsBadDurations) {
  const Result help = run({}, {"monitor", "--help"});
  EXPECT_TRUE(contains(help.out, "--kill-after")) << help.out;
  EXPECT_TRUE(contains(help.out, "--kill-after TEXT=10s")) << help.out;
  for (const std::string bad : {"-1s", "soon", "5parsecs"}) {
    const Result result = run({kTwoH200}, {"monitor", "--kill-after=" + bad, "--", "true"});
    EXPECT_EQ(result.exit_code, 2) << bad << ": " << result.err;
    EXPECT_TRUE(contains(result.err, "--kill-after")) << result.err;
  }
}

TEST_F(CliMonitor, ASecondStopSignalDuringTheGracePeriodKillsAtOnce) {
  for (const int second : {SIGTERM, SIGINT}) {
    fs::remove(path("ready"));
    ZeusProcess zeus(dir_, {kTwoH200},
                     {"monitor", "--kill-after", "30s", "-o", path("s.txt"), "--", kHelper, "wait",
                      path("ready"), "ignore-stop"});
    ASSERT_TRUE(wait_for_file(path("ready")));
    ::kill(zeus.pid(), SIGTERM);  // passed on, and ignored by the command
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto signalled = Clock::now();
    ::kill(zeus.pid(), second);
    const Result result = zeus.wait(10.0);
    EXPECT_EQ(result.kill_signal, 0);
    EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.err;
    EXPECT_LT(seconds_since(signalled), 3.0);
    const std::string summary = read_file(path("s.txt"));
    EXPECT_TRUE(contains(summary, "killed by SIGKILL, exit 137, sent SIGKILL on " +
                                      std::string(second == SIGTERM ? "SIGTERM" : "SIGINT") +
                                      " during the 30 s grace period"))
        << summary;
  }
}

TEST_F(CliMonitor, HangupQuitAndUserSignalsArePassedOnAndTheCommandGoesOn) {
  // They used to kill zeus (exit 129, 138), with no summary, and leave the command running.
  ZeusProcess zeus(dir_, {kTwoH200},
                   {"monitor", "--kill-after", "0", "-o", path("s.txt"), "--", kHelper, "record",
                    path("ready"), path("signals.log")});
  ASSERT_TRUE(wait_for_file(path("ready")));
  std::string expected;
  for (const int signal : {SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT}) {
    ::kill(zeus.pid(), signal);
    expected += std::to_string(signal) + "\n";
    const auto start = Clock::now();
    while (read_file(path("signals.log")) != expected && seconds_since(start) < 5.0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_EQ(read_file(path("signals.log")), expected) << "signal " << signal;
  }
  // None of them started the grace period: with --kill-after 0 the command would be dead.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t helper = std::stoi(read_file(path("ready")));
  std::ifstream status("/proc/" + std::to_string(helper) + "/status");
  std::string line;
  while (std::getline(status, line) && !line.starts_with("State:")) {
  }
  EXPECT_TRUE(line.starts_with("State:") && !contains(line, "zombie")) << line;
  ::kill(helper, SIGTERM);
  const Result result = zeus.wait(5.0);
  EXPECT_EQ(result.kill_signal, 0);
  EXPECT_EQ(result.exit_code, 7) << result.err;
  const std::string summary = read_file(path("s.txt"));
  EXPECT_TRUE(contains(summary, "record")) << summary;
  EXPECT_TRUE(contains(summary, "(exit 7)")) << summary;
  EXPECT_TRUE(contains(summary, "GPU 1")) << summary;
}

TEST_F(CliMonitor, TheCommandGetsNoDescriptorOfZeus) {
  // The timeline and the summary file used to be descriptors 3 and 4 of the command. (The
  // marker is built at run time: the summary quotes the command.)
  const Result result = run(
      {kTwoH200}, {"monitor", "--timeline", path("t.csv"), "-o", path("s.txt"), "--", "sh", "-c",
                   "m=LEAK; for fd in 3 4 5 6 7 8 9; do if (: >&$fd) 2>/dev/null; then echo "
                   "\"open $fd\"; echo ${m}ED >&$fd; fi; done"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_FALSE(contains(read_file(path("t.csv")), "LEAKED"));
  EXPECT_TRUE(read_file(path("t.csv")).starts_with("timestamp,device,domain,watts,celsius\n"));
  EXPECT_FALSE(contains(read_file(path("s.txt")), "LEAKED"));
  EXPECT_TRUE(contains(read_file(path("s.txt")), "(exit 0)"));
}

TEST_F(CliMonitor, WithStandardInputClosedTheCommandsInputIsDevNull) {
  // Started with descriptor 0 closed, zeus used to open the timeline as 0: the command's input.
  const fs::path launcher = path("close-stdin.sh");
  std::ofstream(launcher) << "#!/bin/sh\nexec \"$@\" 0<&-\n";
  fs::permissions(launcher, fs::perms::owner_all);
  ZeusProcess zeus(dir_, {kTwoH200},
                   {"monitor", "--timeline", path("t.csv"), "--", "sh", "-c",
                    "echo X >&0; readlink /proc/self/fd/0"},
                   launcher.string());
  const Result result = zeus.wait();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "/dev/null\n");
  EXPECT_FALSE(contains(read_file(path("t.csv")), "X"));
  EXPECT_TRUE(contains(result.err, "Energy of sh")) << result.err;
}

TEST_F(CliMonitor, TimelineIsACsvOfEveryGpuAndDomain) {
  const Result result =
      run({kTwoH200}, {"monitor", "--timeline", path("sub/timeline.csv"), "--interval", "20ms",
                       "--duration", "0.3s", "-o", path("s.txt")});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream csv(path("sub/timeline.csv"));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line, "timestamp,device,domain,watts,celsius");
  const double now_s = static_cast<double>(std::time(nullptr));
  std::map<std::pair<std::string, std::string>, int> rows;
  while (std::getline(csv, line)) {
    std::stringstream fields(line);
    std::string timestamp, device, domain, watts, celsius;
    ASSERT_TRUE(std::getline(fields, timestamp, ','));
    ASSERT_TRUE(std::getline(fields, device, ','));
    ASSERT_TRUE(std::getline(fields, domain, ','));
    ASSERT_TRUE(std::getline(fields, watts, ','));
    std::getline(fields, celsius, ',');  // empty on power rows (the line ends with the comma)
    ASSERT_EQ(timestamp.size() - timestamp.find('.'), 7u) << line;  // microseconds
    EXPECT_NEAR(std::stod(timestamp), now_s, 60.0) << line;
    if (domain == "temperature") {
      EXPECT_EQ(watts, "") << line;
      EXPECT_GT(std::stoi(celsius), 20) << line;  // an idle simulated H200
    } else {
      EXPECT_EQ(celsius, "") << line;
    }
    if (domain == "device_instant") {
      EXPECT_DOUBLE_EQ(std::stod(watts), kH200IdleW) << line;
    }
    ++rows[{device, domain}];
  }
  for (const std::string device : {"gpu0", "gpu1"}) {
    for (const std::string domain : {"device_instant", "device_average", "memory_average"}) {
      EXPECT_GE((rows[{device, domain}]), 3) << device << " " << domain;
    }
    // Only changes: an idle GPU's temperature is written once.
    EXPECT_EQ((rows[{device, "temperature"}]), 1) << device;
  }
  EXPECT_EQ(rows.size(), 8u);
}

// -o and --timeline by docs/cli.md's "Input and output files": never the same file, links
// followed, devices written through, a directory refused before the command starts.
TEST_F(CliMonitor, OutputFilesNeverDestroyWhatWasNotNamed) {
  Result result =
      run({kTwoH200}, {"monitor", "--timeline", path("t.csv"), "-o", path("t.csv"), "--", "true"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "is also an input")) << result.err;
  result = run({kTwoH200}, {"monitor", "--timeline", path("t.csv"), "-o", path("t.csv.windows.csv"),
                            "--", "true"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "is also an input")) << result.err;

  fs::create_symlink("/dev/null", path("null"));
  std::ofstream(path("old.txt")) << "old summary";
  fs::create_symlink("old.txt", path("summary.txt"));
  result = run({kTwoH200},
               {"monitor", "--timeline", path("null"), "-o", path("summary.txt"), "--", "true"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::is_symlink(path("null")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_symlink(path("summary.txt")));
  EXPECT_TRUE(contains(read_file(path("old.txt")), "(exit 0)"));

  const Result directory =
      run({kTwoH200}, {"monitor", "-o", dir_.string(), "--", "sh", "-c", "echo started"});
  EXPECT_EQ(directory.exit_code, 2) << directory.err;
  EXPECT_TRUE(contains(directory.err, "is a directory")) << directory.err;
  EXPECT_EQ(directory.out, "") << "the command must not start";
}

TEST_F(CliMonitor, BadInputIsAUsageError) {
  Result result = run({kTwoH200}, {"monitor", "--interval", "0.5ms", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err,
                       "--interval \"0.5ms\" is below the shortest sampling period, "
                       "1 ms"))
      << result.err;

  result = run({kTwoH200}, {"monitor", "--gpus", "5", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "there is no GPU 5; the valid GPU indices are 0, 1"))
      << result.err;

  result = run({kTwoH200}, {"monitor", "--gpus", "0,x", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--gpus \"0,x\" is not a valid index list")) << result.err;

  result = run({kTwoH200}, {"monitor", "--duration", "ten seconds"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--duration \"ten seconds\" is not a valid duration"))
      << result.err;

  result = run({kTwoH200}, {"monitor", "--duration", "5 parsecs"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "unknown unit \"parsecs\"")) << result.err;

  result = run({kTwoH200}, {"monitor"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "needs a command to measure")) << result.err;
  EXPECT_TRUE(contains(result.err, "--duration 10s")) << result.err;

  result = run({kTwoH200}, {"monitor", "--no-such-flag", "--", "true"});
  EXPECT_EQ(result.exit_code, 2);
}

TEST_F(CliMonitor, HelpExitsWithZero) {
  Result result = run({}, {"monitor", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, "--timeline")) << result.out;
  EXPECT_TRUE(contains(result.out, "--duration")) << result.out;
  result = run({}, {"power", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(contains(result.out, "--domain")) << result.out;
  result = run({}, {"--help"});
  EXPECT_TRUE(contains(result.out, "monitor")) << result.out;
  EXPECT_TRUE(contains(result.out, "power")) << result.out;
}

}  // namespace
