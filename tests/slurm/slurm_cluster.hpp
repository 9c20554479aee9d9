// The Slurm suite's cluster: one real single-node Slurm (tests/slurm/local_cluster.sh: munged,
// slurmctld, slurmd on 127.0.0.1) with zeus_spank.so in plugstack.conf, and a real zeusd serving
// four simulated H200s whose power limits and energy counters are the ground truth. Started once
// for the whole binary (a gtest Environment); every test skips with the reason when Slurm cannot
// start here (not root, packages missing).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device/zeusd_connection.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"

namespace zeus::testing {

namespace fs = std::filesystem;

struct CommandResult {
  int status = -1;     // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
  double seconds = 0.0;
};

// Runs `script` with bash, SLURM_CONF set; output captured.
CommandResult run_shell(const std::string& script);

class SlurmCluster : public ::testing::Environment {
 public:
  void SetUp() override;
  void TearDown() override;

  static SlurmCluster& get();
  // Empty when the cluster runs; else why it cannot.
  const std::string& skip_reason() const { return skip_reason_; }
  const fs::path& dir() const { return dir_; }
  std::string zeusd_socket() const { return (dir_ / "zeusd.sock").string(); }
  std::string state_dir() const { return (dir_ / "zeus-state").string(); }
  std::string plugstack_line() const;

  // zeusd: (re)started on simulated GPUs (with `extra` arguments), stopped, and read.
  void start_zeusd(const std::vector<std::string>& extra = {});
  void stop_zeusd();
  device::ZeusdConnection& zeusd();
  std::vector<std::uint32_t> power_limits_w();
  std::uint32_t power_limit_w(int gpu) { return power_limits_w().at(static_cast<size_t>(gpu)); }
  double energy_j(int gpu);

  // Once the queue is empty, slurmd killed with SIGKILL and started again (it reads
  // plugstack.conf only at start).
  void restart_slurmd();
  // The same while jobs run.
  void restart_slurmd_mid_job();
  // plugstack.conf rewritten (with `line`, or empty), then slurmd restarted.
  void set_plugstack(const std::string& line);
  // The Epilog script's exit status.
  void set_epilog_status(int status);
  // Waits until no job is left in the queue (at most `timeout`).
  bool wait_queue_empty(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // The job's AdminComment ("" when none).
  std::string admin_comment(std::uint32_t job_id);

 private:
  std::string skip_reason_;
  fs::path dir_;
  bool started_ = false;
  std::unique_ptr<SpawnedProcess> zeusd_process_;
  std::unique_ptr<device::ZeusdConnection> zeusd_;
};

// In every test: GTEST_SKIP with the cluster's reason when it does not run.
#define ZEUS_REQUIRE_SLURM()                             \
  do {                                                   \
    if (!SlurmCluster::get().skip_reason().empty()) {    \
      GTEST_SKIP() << SlurmCluster::get().skip_reason(); \
    }                                                    \
  } while (false)

// Polls `condition` every 10 ms until true or `timeout`; the seconds it took, or nullopt.
template <typename Condition>
std::optional<double> seconds_until(Condition condition, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < timeout) {
    if (condition()) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

// The number in "Submitted batch job 12".
std::uint32_t submitted_job_id(const std::string& sbatch_output);

}  // namespace zeus::testing
