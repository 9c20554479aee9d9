// The `zeus monitor` and `zeus power` tests' fixture (monitor_test.cpp, power_test.cpp,
// monitor_footprint_test.cpp): zeus run as a process on simulated GPUs, its output and exit code,
// and a temporary folder per test.
#pragma once

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

namespace zeus::testing::cli_monitor {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

inline const std::string kZeus = ZEUS_CLI_PATH;
inline const std::string kHelper = ZEUS_MONITOR_HELPER_PATH;
inline const std::string kTwoH200 = "ZEUS_SIMULATED_GPUS=2:h200";
inline constexpr double kH200IdleW = 75.0;

using zeus::testing::read_file;

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether one of a JSON summary's notes contains `part`.
inline bool has_note(const json& summary, const std::string& part) {
  for (const json& note : summary["notes"]) {
    if (contains(note.get<std::string>(), part)) {
      return true;
    }
  }
  return false;
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The test process's environment without anything that selects GPUs or CPUs, plus `extra`.
inline std::vector<std::string> environment(const std::vector<std::string>& extra) {
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

inline bool wait_for_file(const fs::path& path, double timeout_s = 5.0) {
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
inline void expect_idle_h200_energy(const json& energy_by_gpu, double time_s) {
  for (const auto& [index, energy_j] : energy_by_gpu.items()) {
    ASSERT_TRUE(energy_j.is_number()) << index;
    EXPECT_GT(energy_j.get<double>(), kH200IdleW * time_s * 0.8 - 0.1) << "GPU " << index;
    EXPECT_LT(energy_j.get<double>(), kH200IdleW * time_s * 1.2 + 0.1) << "GPU " << index;
  }
}

}  // namespace zeus::testing::cli_monitor
