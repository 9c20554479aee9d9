// Caps come back however a job ends (docs/slurm.md, "How caps come back"), zeusd down or slow
// never holds a job, and the plugin's launch cost, on a real Slurm. ZEUS_SLURM_RESTORE_TRIALS
// (default: each end mode once) and ZEUS_SLURM_LAUNCHES (default 15) size the measured runs;
// docs/benchmarks.md has the figures of 200 trials and 50 launches.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "slurm/step_session.hpp"
#include "slurm_cluster.hpp"

namespace zeus::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::uint32_t> limits() {
  return SlurmCluster::get().power_limits_w();
}
std::size_t capped_count(std::uint32_t watts) {
  const auto now = limits();
  return static_cast<std::size_t>(std::count(now.begin(), now.end(), watts));
}
bool all_default() {
  return capped_count(700) == 4;
}

int env_count(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::max(1, std::atoi(value)) : fallback;
}

enum class EndMode {
  kNormalExit,
  kScancel,
  kTaskKilled,
  kStepdKilled,
  kJobKillsItsStepd,
  kSlurmdRestarted,
  kEpilogFails
};
constexpr EndMode kModes[] = {EndMode::kNormalExit,       EndMode::kScancel,
                              EndMode::kTaskKilled,       EndMode::kStepdKilled,
                              EndMode::kJobKillsItsStepd, EndMode::kSlurmdRestarted,
                              EndMode::kEpilogFails};
const char* name(EndMode mode) {
  switch (mode) {
    case EndMode::kNormalExit:
      return "normal exit";
    case EndMode::kScancel:
      return "scancel";
    case EndMode::kTaskKilled:
      return "task SIGKILL";
    case EndMode::kStepdKilled:
      return "slurmstepd SIGKILL";
    case EndMode::kJobKillsItsStepd:
      return "job kills its slurmstepd";
    case EndMode::kSlurmdRestarted:
      return "slurmd restarted mid-job";
    case EndMode::kEpilogFails:
      return "failing epilog";
  }
  return "?";
}

// The owner (slurmstepd) of job `job_id`'s running step, from its state file.
pid_t step_owner(std::uint32_t job_id) {
  for (const auto& state : slurm::read_step_states(SlurmCluster::get().state_dir())) {
    if (state.job_id == job_id) {
      return state.owner_pid;
    }
  }
  return 0;
}

// One job capped at 222 W ended in `mode`; the seconds from the end to all limits back.
std::optional<double> restore_trial(EndMode mode) {
  SlurmCluster& cluster = SlurmCluster::get();
  const auto capped = [] { return capped_count(222) == 2; };
  CommandResult srun;
  std::thread foreground;
  std::uint32_t job_id = 0;
  const std::string cap = " --gres=gpu:2 --zeus-power-limit=222 ";
  const fs::path killed_at = cluster.dir() / "killed_at";
  std::filesystem::remove(killed_at);
  if (mode == EndMode::kNormalExit || mode == EndMode::kTaskKilled ||
      mode == EndMode::kEpilogFails) {
    if (mode == EndMode::kEpilogFails) {
      cluster.set_epilog_status(1);
    }
    const std::string body = mode == EndMode::kTaskKilled ? "sleep 0.7; kill -9 $$" : "sleep 0.7";
    const std::string command = "srun" + cap + "sh -c '" + body + "'";
    foreground = std::thread([&srun, command] { srun = run_shell(command); });
  } else {
    const std::string body =
        mode == EndMode::kJobKillsItsStepd
            ? "sleep 2; date +%s.%N > " + killed_at.string() + "; kill -9 $PPID; sleep 60"
        : mode == EndMode::kSlurmdRestarted ? "sleep 3"
                                            : "sleep 60";
    const CommandResult submitted =
        run_shell("sbatch -o /dev/null" + cap + "--wrap '" + body + "'");
    job_id = submitted_job_id(submitted.output);
    EXPECT_NE(job_id, 0u) << submitted.output;
  }
  EXPECT_TRUE(seconds_until(capped, 15s)) << name(mode) << ": never capped";
  switch (mode) {
    case EndMode::kNormalExit:
    case EndMode::kTaskKilled:
    case EndMode::kEpilogFails:
      foreground.join();
      break;
    case EndMode::kScancel:
      run_shell("scancel " + std::to_string(job_id));
      break;
    case EndMode::kStepdKilled:
      EXPECT_EQ(::kill(step_owner(job_id), SIGKILL), 0);
      break;
    case EndMode::kJobKillsItsStepd: {
      // From the moment the job killed it (the time it wrote just before) to the limits back.
      const auto back = seconds_until(all_default, 10s);
      std::ifstream in(killed_at);
      double killed_s = 0.0;
      if (!back || !(in >> killed_s)) {
        ADD_FAILURE() << "the job never killed its slurmstepd, or its GPUs never came back";
      } else {
        // Seen back just now (within one 10 ms poll).
        const double back_s =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        run_shell("scancel " + std::to_string(job_id));
        EXPECT_TRUE(cluster.wait_queue_empty());
        return std::max(0.0, back_s - killed_s);
      }
      break;
    }
    case EndMode::kSlurmdRestarted:
      cluster.restart_slurmd_mid_job();
      EXPECT_TRUE(capped()) << "the cap did not survive slurmd's restart";
      EXPECT_TRUE(cluster.wait_queue_empty());
      break;
  }
  const auto seconds = seconds_until(all_default, 5s);
  if (job_id != 0) {
    run_shell("scancel " + std::to_string(job_id));
  }
  EXPECT_TRUE(cluster.wait_queue_empty());
  if (mode == EndMode::kEpilogFails) {
    cluster.set_epilog_status(0);
    // A failing epilog drains the node; the next trial needs it back.
    run_shell("scontrol update nodename=$(sinfo -h -o %n) state=resume");
    EXPECT_TRUE(seconds_until(
        [] { return run_shell("sinfo -h -o %t").output.rfind("idle", 0) == 0; }, 10s));
  }
  return seconds;
}

TEST(SlurmRestore, EveryEndModePutsTheLimitsBackWithinTwoSeconds) {
  ZEUS_REQUIRE_SLURM();
  ASSERT_TRUE(all_default());
  const int trials = env_count("ZEUS_SLURM_RESTORE_TRIALS", static_cast<int>(std::size(kModes)));
  std::vector<double> seconds;
  std::map<EndMode, std::vector<double>> by_mode;
  int late = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const EndMode mode = kModes[static_cast<std::size_t>(trial) % std::size(kModes)];
    const auto restored = restore_trial(mode);
    if (!restored || *restored > 2.0) {
      ++late;
      ADD_FAILURE() << name(mode) << ": limits "
                    << (restored ? "back only after " + std::to_string(*restored) + " s"
                                 : "not back");
      ASSERT_TRUE(seconds_until(all_default, 10s));
    } else {
      seconds.push_back(*restored);
      by_mode[mode].push_back(*restored);
    }
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("restore: %zu of %d trials within 2 s; median %.3f s, max %.3f s\n", seconds.size(),
              trials, seconds.empty() ? 0.0 : seconds[seconds.size() / 2],
              seconds.empty() ? 0.0 : seconds.back());
  for (const auto& [mode, times] : by_mode) {
    std::printf("  %-26s %3zu trials, max %.3f s\n", name(mode), times.size(),
                *std::max_element(times.begin(), times.end()));
  }
  EXPECT_EQ(late, 0);
}

// The backstop alone: with zeusd's ledger off (--no-restore), a step whose slurmstepd is killed
// leaves its cap, and the job's epilog puts it back from the step's state file.
TEST(SlurmRestore, TheEpilogPutsBackWhatAKilledStepLeftWhenZeusdCannot) {
  ZEUS_REQUIRE_SLURM();
  SlurmCluster& cluster = SlurmCluster::get();
  cluster.start_zeusd({"--no-restore"});
  const CommandResult submitted =
      run_shell("sbatch -o /dev/null --gres=gpu:2 --zeus-power-limit=333 --wrap 'sleep 60'");
  const std::uint32_t job_id = submitted_job_id(submitted.output);
  ASSERT_TRUE(seconds_until([] { return capped_count(333) == 2; }, 15s)) << submitted.output;
  ASSERT_EQ(::kill(step_owner(job_id), SIGKILL), 0);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(capped_count(333), 2u) << "zeusd restored although --no-restore";
  run_shell("scancel " + std::to_string(job_id));
  EXPECT_TRUE(cluster.wait_queue_empty());
  EXPECT_TRUE(seconds_until(all_default, 5s)) << "the epilog did not put the cap back";
  EXPECT_TRUE(slurm::read_step_states(cluster.state_dir()).empty());
  cluster.start_zeusd();
}

TEST(SlurmHostile, ZeusdDownOrSilentNeverHoldsAJobAndSaysWhyItIsNotCapped) {
  ZEUS_REQUIRE_SLURM();
  SlurmCluster& cluster = SlurmCluster::get();
  cluster.stop_zeusd();
  CommandResult result = run_shell("srun --gres=gpu:1 --zeus-power-limit=300 echo ran");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("ran"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("not capped"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("unreachable"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 10.0);

  // A zeusd that accepts and never answers (its socket, nobody behind it).
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", cluster.zeusd_socket().c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::chmod(cluster.zeusd_socket().c_str(), 0666);
  ASSERT_EQ(::listen(listener, 64), 0);
  result = run_shell("srun --gres=gpu:1 --zeus-power-limit=300 echo ran");
  ::close(listener);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("ran"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("not capped"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 15.0) << "a silent zeusd held the job";
  cluster.start_zeusd();
  EXPECT_TRUE(all_default());
}

TEST(SlurmLatency, ThePluginAddsUnderFiftyMillisecondsToAnSrunLaunch) {
  ZEUS_REQUIRE_SLURM();
  SlurmCluster& cluster = SlurmCluster::get();
  const int launches = env_count("ZEUS_SLURM_LAUNCHES", 15);
  const auto median_launch = [&] {
    std::vector<double> seconds;
    for (int i = 0; i < launches; ++i) {
      const CommandResult result = run_shell("srun --gres=gpu:1 true");
      EXPECT_EQ(result.status, 0) << result.output;
      seconds.push_back(result.seconds);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  };
  std::vector<double> without;
  std::vector<double> with;
  for (int round = 0; round < 2; ++round) {  // alternated, so that drift hits both alike
    cluster.set_plugstack("");
    without.push_back(median_launch());
    cluster.set_plugstack(cluster.plugstack_line());
    with.push_back(median_launch());
  }
  const double base = (without[0] + without[1]) / 2.0;
  const double plugin = (with[0] + with[1]) / 2.0;
  std::printf(
      "srun --gres=gpu:1 true, median of %d launches x2: %.1f ms without the plugin, "
      "%.1f ms with it (+%.1f ms)\n",
      launches, base * 1000.0, plugin * 1000.0, (plugin - base) * 1000.0);
  EXPECT_LT(plugin - base, 0.050);
}

}  // namespace
}  // namespace zeus::testing
