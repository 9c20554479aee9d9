// `zeus monitor` and `zeus power`, run as a user would run them, on simulated GPUs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_command.hpp"
#include "support/loopback_peers.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kZeus = ZEUS_CLI_PATH;
const std::string kHelper = ZEUS_MONITOR_HELPER_PATH;
const std::string kTwoH200 = "ZEUS_SIMULATED_GPUS=2:h200";
constexpr double kH200IdleW = 75.0;

using zeus::testing::read_file;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether one of a JSON summary's notes contains `part`.
bool has_note(const json& summary, const std::string& part) {
  for (const json& note : summary["notes"]) {
    if (contains(note.get<std::string>(), part)) {
      return true;
    }
  }
  return false;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The test process's environment without anything that selects GPUs or CPUs, plus `extra`.
std::vector<std::string> environment(const std::vector<std::string>& extra) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (variable.starts_with("ZEUS_") || variable.starts_with("CUDA_VISIBLE_DEVICES=") ||
        variable.starts_with("HIP_VISIBLE_DEVICES=")) {
      continue;
    }
    result.push_back(variable);
  }
  result.push_back("ZEUS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1");
  result.push_back("ZEUS_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so");
  result.insert(result.end(), extra.begin(), extra.end());
  return result;
}

struct Result {
  int exit_code = -1;   // when zeus exited
  int kill_signal = 0;  // when a signal killed zeus itself
  std::string out;      // standard output
  std::string err;      // standard error
  double wall_s = 0.0;
};

// A zeus process started with fork/exec, so that the test knows its pid and can tell an exit
// code of 143 from zeus being killed by SIGTERM.
class ZeusProcess {
 public:
  // `launcher`, when given, is run with zeus and its arguments as its own arguments.
  ZeusProcess(const fs::path& dir, const std::vector<std::string>& env,
              const std::vector<std::string>& args, const std::string& launcher = "")
      : out_path_(dir / "zeus.stdout"), err_path_(dir / "zeus.stderr"), start_(Clock::now()) {
    std::vector<std::string> argv_strings = {kZeus};
    if (!launcher.empty()) {
      argv_strings.insert(argv_strings.begin(), launcher);
    }
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    const std::vector<std::string> env_strings = environment(env);
    std::vector<char*> argv;
    for (const std::string& arg : argv_strings) {
      argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const std::string& variable : env_strings) {
      envp.push_back(const_cast<char*>(variable.c_str()));
    }
    envp.push_back(nullptr);
    const std::string out = out_path_.string();
    const std::string err = err_path_.string();
    pid_ = ::fork();
    if (pid_ == 0) {
      if (std::freopen(out.c_str(), "w", stdout) == nullptr ||
          std::freopen(err.c_str(), "w", stderr) == nullptr) {
        ::_exit(99);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(98);
    }
    if (pid_ < 0) {
      throw std::runtime_error("fork failed");
    }
  }

  ~ZeusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  // Waits for zeus to end; kills it and reports a failure after `timeout_s`.
  Result wait(double timeout_s = 10.0) {
    Result result;
    int status = 0;
    while (true) {
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        break;
      }
      if (seconds_since(start_) > timeout_s) {
        ADD_FAILURE() << "zeus did not finish within " << timeout_s << " s";
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    result.wall_s = seconds_since(start_);
    if (WIFEXITED(status)) {
      result.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result.kill_signal = WTERMSIG(status);
    }
    result.out = read_file(out_path_);
    result.err = read_file(err_path_);
    return result;
  }

  // Waits until zeus catches SIGTERM (its handlers are installed), from /proc/PID/status.
  bool wait_until_catching_sigterm(double timeout_s = 5.0) const {
    const auto start = Clock::now();
    while (seconds_since(start) < timeout_s) {
      std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
      std::string line;
      while (std::getline(status, line)) {
        if (line.starts_with("SigCgt:")) {
          const unsigned long long caught = std::stoull(line.substr(7), nullptr, 16);
          if ((caught >> (SIGTERM - 1)) & 1ULL) {
            return true;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

 private:
  fs::path out_path_;
  fs::path err_path_;
  Clock::time_point start_;
  pid_t pid_ = -1;
};

bool wait_for_file(const fs::path& path, double timeout_s = 5.0) {
  const auto start = Clock::now();
  while (seconds_since(start) < timeout_s) {
    if (fs::exists(path)) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

class CliMonitor : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("zeus-cli-monitor-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::vector<std::string>& env, const std::vector<std::string>& args,
             double timeout_s = 10.0) {
    return ZeusProcess(dir_, env, args).wait(timeout_s);
  }

  fs::path path(const std::string& name) const { return dir_ / name; }

  // A fake powercap tree: package 0 with a DRAM sub-zone, counters at 1 J and 0.5 J.
  fs::path make_powercap_tree() const {
    const fs::path root = dir_ / "powercap";
    const fs::path package = root / "intel-rapl:0";
    const fs::path dram = package / "intel-rapl:0:0";
    fs::create_directories(dram);
    std::ofstream(package / "name") << "package-0\n";
    std::ofstream(package / "energy_uj") << "1000000\n";
    std::ofstream(package / "max_energy_range_uj") << "262143328850\n";
    std::ofstream(dram / "name") << "dram\n";
    std::ofstream(dram / "energy_uj") << "500000\n";
    std::ofstream(dram / "max_energy_range_uj") << "65712999613\n";
    return root;
  }

  fs::path dir_;
};

// Energies of idle simulated H200s: 75 W x the time zeus measured (loose bounds).
void expect_idle_h200_energy(const json& energy_by_gpu, double time_s) {
  for (const auto& [index, energy_j] : energy_by_gpu.items()) {
    ASSERT_TRUE(energy_j.is_number()) << index;
    EXPECT_GT(energy_j.get<double>(), kH200IdleW * time_s * 0.8 - 0.1) << "GPU " << index;
    EXPECT_LT(energy_j.get<double>(), kH200IdleW * time_s * 1.2 + 0.1) << "GPU " << index;
  }
}

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
  // The issue's repro (it never returned): SIGTERM at 200 ms, SIGKILL 300 ms later.
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

// --carbon-intensity (docs/carbon.md): gCO2eq from the window's energy and the intensity over it.
TEST_F(CliMonitor, CarbonIntensityAddsTheEmissionsToTheSummary) {
  // 1 kWh = 3.6e6 J: at 360 gCO2eq/kWh, a joule is 1e-4 g.
  const Result constant = run({kTwoH200}, {"monitor", "--json", "--output", path("c.json"),
                                           "--carbon-intensity", "360", "--", "sleep", "0.2"});
  ASSERT_EQ(constant.exit_code, 0) << constant.err;
  const json summary = json::parse(read_file(path("c.json")));
  const json& carbon = summary["carbon"];
  ASSERT_TRUE(carbon.is_object()) << summary.dump();
  EXPECT_DOUBLE_EQ(carbon["mean_gco2eq_per_kwh"].get<double>(), 360.0);
  for (const std::string index : {"0", "1"}) {
    EXPECT_NEAR(carbon["gpu_gco2eq"][index].get<double>(),
                summary["gpu_energy_j"][index].get<double>() * 1e-4, 1e-12);
  }
  EXPECT_NEAR(carbon["gco2eq"].get<double>(),
              carbon["gpu_gco2eq"]["0"].get<double>() + carbon["gpu_gco2eq"]["1"].get<double>(),
              1e-12);

  // A time series file (the value in force since 2026 holds over the run).
  std::ofstream(path("series.csv")) << "timestamp,gco2eq_per_kwh\n2020-01-01T00:00:00Z,100\n"
                                       "2026-01-01T00:00:00Z,250\n";
  const Result series =
      run({kTwoH200}, {"monitor", "--carbon-intensity", path("series.csv"), "--", "sleep", "0.1"});
  ASSERT_EQ(series.exit_code, 0) << series.err;
  EXPECT_TRUE(contains(series.err, "gCO2eq (GPU ")) << series.err;
  EXPECT_TRUE(contains(series.err, "at a mean 250 gCO2eq/kWh")) << series.err;
}

TEST_F(CliMonitor, ABadCarbonIntensityIsAUsageErrorBeforeAnythingRuns) {
  std::ofstream(path("bad.csv")) << "timestamp,gco2eq_per_kwh\n2026-01-01T00:00:00Z,lots\n";
  for (const std::string& spec :
       {std::string("-5"), std::string("nan"), std::string("electricitymaps:"),
        path("bad.csv").string(), path("missing.csv").string()}) {
    const Result result = run({kTwoH200}, {"monitor", "--carbon-intensity", spec, "--", "sh", "-c",
                                           "touch " + path("ran").string()});
    EXPECT_NE(result.exit_code, 0) << spec;
    EXPECT_TRUE(contains(result.err, "--carbon-intensity")) << spec << ": " << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result bad_row =
      run({kTwoH200}, {"monitor", "--carbon-intensity", path("bad.csv"), "--", "true"});
  EXPECT_EQ(bad_row.exit_code, 2);
  EXPECT_TRUE(contains(bad_row.err, "bad.csv:2")) << bad_row.err;
}

TEST_F(CliMonitor, AnUnreachableCarbonServiceCostsOnlyTheCarbonFigure) {
  // Nothing listens on port 9 (discard) here: the client's retries fail fast, the energy stays.
  const Result result = run({kTwoH200, "ELECTRICITYMAPS_URL=http://127.0.0.1:9"},
                            {"monitor", "--json", "--output", path("s.json"), "--carbon-intensity",
                             "electricitymaps:DE", "--", "true"},
                            60.0);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_TRUE(summary["carbon"].is_null()) << summary.dump();
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(has_note(summary, "no carbon emissions: ")) << summary["notes"].dump();
}

TEST_F(CliMonitor, AHungCarbonServiceHoldsTheSummaryBackOnlySeconds) {
  // A socket that listens and is never accepted from: the kernel completes each connection, the
  // request is sent, and no answer ever comes (a half-open service). zeus monitor's limits (two
  // attempts, 3 s read timeout) bound the wait to about 6.3 s, not the library's 16.5 s.
  const zeus::testing::SilentListener listener;
  const std::string url = listener.url();
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, "ELECTRICITYMAPS_URL=" + url},
                            {"monitor", "--json", "--output", path("h.json"), "--carbon-intensity",
                             "electricitymaps:DE", "--", "true"},
                            60.0);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(json::parse(read_file(path("h.json")))["carbon"].is_null());
  EXPECT_GE(waited_s, 5.0) << "both attempts should have waited for their read timeout";
  EXPECT_LT(waited_s, 12.0);
}

// --price (docs/cost.md): the window's energy times the price per kWh over it.
TEST_F(CliMonitor, PriceAddsTheCostToTheSummary) {
  // 1 kWh = 3.6e6 J: at 0.36 per kWh, a joule costs 1e-7.
  const Result constant = run({kTwoH200}, {"monitor", "--json", "--output", path("p.json"),
                                           "--price", "0.36", "--", "sleep", "0.2"});
  ASSERT_EQ(constant.exit_code, 0) << constant.err;
  const json summary = json::parse(read_file(path("p.json")));
  const json& cost = summary["cost"];
  ASSERT_TRUE(cost.is_object()) << summary.dump();
  EXPECT_DOUBLE_EQ(cost["mean_price_per_kwh"].get<double>(), 0.36);
  EXPECT_TRUE(cost["currency"].is_null());
  for (const std::string index : {"0", "1"}) {
    EXPECT_NEAR(cost["gpu"][index].get<double>(),
                summary["gpu_energy_j"][index].get<double>() * 1e-7, 1e-12);
  }
  EXPECT_NEAR(cost["total"].get<double>(),
              cost["gpu"]["0"].get<double>() + cost["gpu"]["1"].get<double>(), 1e-12);
  EXPECT_FALSE(summary.contains("carbon"));

  // A tariff whose only period covers the whole week: its price holds, with its currency.
  std::ofstream(path("tariff.json")) << R"({"currency": "EUR", "default_price_per_kwh": 1,
             "periods": [{"days": "all", "start": "00:00", "end": "24:00", "price_per_kwh": 0.25}]})";
  const Result tariff =
      run({kTwoH200}, {"monitor", "--price", path("tariff.json"), "--", "sleep", "0.1"});
  ASSERT_EQ(tariff.exit_code, 0) << tariff.err;
  EXPECT_TRUE(contains(tariff.err, "EUR (GPU ")) << tariff.err;
  EXPECT_TRUE(contains(tariff.err, "at a mean 0.25 EUR/kWh")) << tariff.err;
}

TEST_F(CliMonitor, ABadPriceIsAUsageErrorBeforeAnythingRuns) {
  std::ofstream(path("bad.json")) << R"({"default_price_per_kwh": "cheap"})";
  for (const std::string& spec : {std::string("-1"), std::string("nan"), path("bad.json").string(),
                                  path("missing.json").string()}) {
    const Result result = run({kTwoH200}, {"monitor", "--price", spec, "--", "sh", "-c",
                                           "touch " + path("ran").string()});
    EXPECT_NE(result.exit_code, 0) << spec;
    EXPECT_TRUE(contains(result.err, "--price")) << spec << ": " << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result bad = run({kTwoH200}, {"monitor", "--price", path("bad.json"), "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "bad.json")) << bad.err;
  EXPECT_TRUE(contains(bad.err, "default_price_per_kwh")) << bad.err;
}

namespace {

// An OpenEI answer with the rate `label`: one period (0.20 + 0.05 adj) at every hour of the year,
// so the price does not depend on when the test runs.
std::string openei_answer(const std::string& label) {
  std::string day = "[0";
  for (int hour = 1; hour < 24; ++hour) {
    day += ",0";
  }
  day += "]";
  std::string year = day;
  for (int month = 1; month < 12; ++month) {
    year += ',';
    year += day;
  }
  return R"({"items": [{"label": ")" + label +
         R"(", "name": "Flat commercial", "utility": "Example Power",
         "energyratestructure": [[{"rate": 0.20, "adj": 0.05, "unit": "kWh"}]],
         "energyweekdayschedule": [)" +
         year + R"(], "energyweekendschedule": [)" + year + "]}]}";
}

constexpr const char* kOpenEIKey = "OPENEI_API_KEY=cli-test-key";

}  // namespace

// --price openei:LABEL@LAT,LON (docs/cost.md): the rate from a local OpenEI-compatible server.
TEST_F(CliMonitor, PriceFromAnOpenEIRate) {
  // Every request gets the same 200 answer; the request lines are read after stop().
  const std::string answer = zeus::testing::RawHttpPeer::ok_json(openei_answer("lbl123"));
  zeus::testing::RawHttpPeer server([&answer](const std::string&) { return answer; });
  const Result result =
      run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + server.url()},
          {"monitor", "--json", "--output", path("o.json"), "--price",
           "openei:lbl123@40.02,-105.27,sector=commercial,radius=5", "--", "sleep", "0.1"});
  const Result text = run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + server.url()},
                          {"monitor", "--price", "openei:lbl123@40.02,-105.27", "--", "true"});
  server.stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("o.json")));
  const json& cost = summary["cost"];
  ASSERT_TRUE(cost.is_object()) << summary.dump();
  EXPECT_EQ(cost["currency"], "USD");
  EXPECT_DOUBLE_EQ(cost["mean_price_per_kwh"].get<double>(), 0.25);
  EXPECT_NEAR(cost["gpu"]["0"].get<double>(),
              summary["gpu_energy_j"]["0"].get<double>() / 3.6e6 * 0.25, 1e-12);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.err, "at a mean 0.25 USD/kWh")) << text.err;
  // One request per run, with the reference's query and the key from the environment.
  const std::vector<std::string> request_lines = server.request_lines();
  ASSERT_EQ(request_lines.size(), 2u);
  const std::string& request = request_lines[0];
  for (const std::string part :
       {"GET /utility_rates?", "api_key=cli-test-key", "sector=Commercial", "radius=5", "lat=40.02",
        "lon=-105.27", "detail=full", "version=latest", "format=json"}) {
    EXPECT_TRUE(contains(request, part)) << part << " not in " << request;
  }
  EXPECT_FALSE(contains(result.err + read_file(path("o.json")) + text.err, "cli-test-key"));
}

TEST_F(CliMonitor, ABadOpenEIPriceIsAUsageErrorBeforeAnythingRuns) {
  for (const std::string& spec :
       {std::string("openei:"), std::string("openei:lbl"), std::string("openei:lbl@40"),
        std::string("openei:lbl@north,west"), std::string("openei:@40,-105"),
        std::string("openei:lbl@40,-105,color=red"), std::string("openei:lbl@95,0"),
        std::string("openei:lbl@40,-105,radius=500"), std::string("openei:lbl@40,-105,sector=Farm"),
        std::string("openei:lbl@40,-105,utc_offset=20")}) {
    const Result result =
        run({kTwoH200, kOpenEIKey, "OPENEI_URL=http://127.0.0.1:9"},
            {"monitor", "--price", spec, "--", "sh", "-c", "touch " + path("ran").string()});
    EXPECT_EQ(result.exit_code, 2) << spec << ": " << result.err;
    EXPECT_TRUE(contains(result.err, "--price " + spec)) << spec << ": " << result.err;
    EXPECT_FALSE(contains(result.err, "cli-test-key")) << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result no_key =
      run({kTwoH200, "OPENEI_API_KEY="}, {"monitor", "--price", "openei:lbl@40,-105", "--", "sh",
                                          "-c", "touch " + path("ran").string()});
  EXPECT_EQ(no_key.exit_code, 2) << no_key.err;
  EXPECT_TRUE(contains(no_key.err, "OPENEI_API_KEY")) << no_key.err;
  EXPECT_FALSE(fs::exists(path("ran")));
}

TEST_F(CliMonitor, AnUnreachableOpenEIServiceCostsOnlyTheCostFigure) {
  // Nothing listens on port 9 here: both attempts are refused at once; the energy stays.
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, kOpenEIKey, "OPENEI_URL=http://127.0.0.1:9"},
                            {"monitor", "--json", "--output", path("u.json"), "--price",
                             "openei:lbl@40,-105", "--", "true"},
                            60.0);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(seconds_since(start), 10.0);
  const std::string written = read_file(path("u.json"));
  const json summary = json::parse(written);
  EXPECT_TRUE(summary["cost"].is_null()) << summary.dump();
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(has_note(summary, "no electricity cost: ")) << summary["notes"].dump();
  EXPECT_FALSE(contains(written + result.err, "cli-test-key"));
}

TEST_F(CliMonitor, AHungOpenEIServiceHoldsTheSummaryBackOnlySeconds) {
  // A socket that listens and is never accepted from: each request is sent and never answered.
  // zeus monitor's limits (two attempts, 3 s read timeout) bound the wait to about 6.3 s, not
  // the library's 31.5 s.
  const zeus::testing::SilentListener listener;
  const std::string url = listener.url();
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + url},
                            {"monitor", "--json", "--output", path("h.json"), "--price",
                             "openei:lbl@40,-105", "--", "true"},
                            60.0);
  const double waited_s = seconds_since(start);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(json::parse(read_file(path("h.json")))["cost"].is_null());
  EXPECT_GE(waited_s, 5.0) << "both attempts should have waited for their read timeout";
  EXPECT_LT(waited_s, 12.0);
}
