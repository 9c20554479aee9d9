#include "daemon/ledger.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/process_watcher.hpp"
#include "support/wait_until.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace {

using namespace std::chrono_literals;
using zeus::ErrorKind;
using zeus::daemon::LedgerOptions;
using zeus::daemon::Setting;
using zeus::daemon::SettingsLedger;
using zeus::daemon::SettingValue;
using zeus::device::SimulatedGpu;

constexpr std::uint32_t kA100DefaultMw = 400'000;

std::vector<std::shared_ptr<SimulatedGpu>> make_gpus(int count) {
  auto clock = std::make_shared<zeus::ManualClock>();
  std::vector<std::shared_ptr<SimulatedGpu>> gpus;
  for (int i = 0; i < count; ++i) {
    gpus.push_back(
        std::make_shared<SimulatedGpu>(zeus::device::simulated_gpu_model("a100"), i, clock));
  }
  return gpus;
}

std::vector<std::shared_ptr<zeus::device::Gpu>> as_gpus(
    const std::vector<std::shared_ptr<SimulatedGpu>>& gpus) {
  return {gpus.begin(), gpus.end()};
}

// A child process that waits to be killed. Only async-signal-safe calls after fork().
class Child {
 public:
  Child() : pid_(fork()) {
    if (pid_ == 0) {
      while (true) {
        pause();
      }
    }
  }
  ~Child() {
    kill();
    reap();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // SIGKILL; the child stays a zombie until reap().
  void kill() {
    if (pid_ > 0 && !killed_) {
      ::kill(pid_, SIGKILL);
      killed_ = true;
    }
  }
  void reap() {
    if (pid_ > 0 && !reaped_) {
      waitpid(pid_, nullptr, 0);
      reaped_ = true;
    }
  }

 private:
  pid_t pid_;
  bool killed_ = false;
  bool reaped_ = false;
};

// Settings are restored within a second of their owner's death: polled every 5 ms for that long.
bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = 1000ms) {
  return zeus::testing::wait_until(condition, timeout, 5ms);
}

// The daemon's write sequence: record the value in force, then write.
void daemon_set_power_limit(SettingsLedger& ledger, SimulatedGpu& gpu, int index,
                            std::uint32_t power_limit_mw, pid_t peer_pid) {
  ledger.record_change(index, Setting::kPowerLimit, SettingValue::power_limit(gpu.power_limit_mw()),
                       peer_pid);
  gpu.set_power_limit_mw(power_limit_mw);
}

// Runs each test with pidfds and with the polling fallback.
class LedgerTest : public ::testing::TestWithParam<bool> {
 protected:
  LedgerOptions options() const {
    LedgerOptions result;
    result.force_polling = GetParam();
    return result;
  }
};

INSTANTIATE_TEST_SUITE_P(Watching, LedgerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? std::string("Polling") : std::string("Pidfd");
                         });

TEST_P(LedgerTest, RestoresThePowerLimitWithinOneSecondOfTheOwnerBeingKilled) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus), options());
  EXPECT_EQ(ledger.uses_pidfd(), !GetParam());
  Child child;
  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, child.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 200'000, child.pid());  // original stays
  ASSERT_EQ(ledger.entries().size(), 1u);
  EXPECT_EQ(ledger.entries()[0].original.power_limit_mw, kA100DefaultMw);
  EXPECT_EQ(ledger.entries()[0].owner_pid, child.pid());

  const auto killed_at = std::chrono::steady_clock::now();
  child.kill();  // not reaped: the ledger must notice a zombie too
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == kA100DefaultMw; }));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 1s);
  EXPECT_TRUE(wait_until([&] { return ledger.entries().empty(); }));
  EXPECT_EQ(ledger.restored_count(), 1u);
}

TEST_P(LedgerTest, TheLatestWriterOwnsTheSettingAndTheFirstOriginalStays) {
  auto gpus = make_gpus(2);
  SettingsLedger ledger(as_gpus(gpus), options());
  Child first;
  Child second;
  daemon_set_power_limit(ledger, *gpus[0], 0, 300'000, first.pid());
  daemon_set_power_limit(ledger, *gpus[1], 1, 300'000, first.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, second.pid());  // takes GPU 0 over
  ASSERT_EQ(ledger.entries().size(), 2u);
  EXPECT_EQ(ledger.entries()[0].owner_pid, second.pid());
  EXPECT_EQ(ledger.entries()[0].original.power_limit_mw, kA100DefaultMw);

  first.kill();
  EXPECT_TRUE(wait_until([&] { return gpus[1]->power_limit_mw() == kA100DefaultMw; }));
  EXPECT_EQ(gpus[0]->power_limit_mw(), 250'000u);  // owned by the second process now
  ASSERT_EQ(ledger.entries().size(), 1u);

  second.kill();
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == kA100DefaultMw; }));
  EXPECT_TRUE(wait_until([&] { return ledger.entries().empty(); }));
  EXPECT_EQ(ledger.restored_count(), 2u);
}

// A Slurm job's cap (the outer writer) outlives a process inside the job that set its own limit
// and exited: the inner writer's exit gives the setting back to the outer one, not to the
// original; once both are gone it is at its original.
TEST_P(LedgerTest, ALaterWritersExitGivesTheSettingBackToAnEarlierWriterStillAlive) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus), options());
  Child job;
  Child inner;
  daemon_set_power_limit(ledger, *gpus[0], 0, 300'000, job.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 200'000, inner.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 180'000, inner.pid());  // same layer
  ASSERT_EQ(ledger.entries().size(), 1u);
  EXPECT_EQ(ledger.entries()[0].layers, 2u);
  EXPECT_EQ(ledger.entries()[0].owner_pid, inner.pid());

  inner.kill();
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == 300'000u; }));
  EXPECT_TRUE(
      wait_until([&] { return ledger.entries().size() == 1 && ledger.entries()[0].layers == 1; }));
  job.kill();
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == kA100DefaultMw; }));
  EXPECT_TRUE(wait_until([&] { return ledger.entries().empty(); }));
}

// A writer in the middle of the stack that exits leaves the value alone and hands its "before"
// up: A, then B, then A again over B; B's exit keeps A's value, A's exit restores the original.
TEST_P(LedgerTest, AWriterInTheMiddleThatExitsHandsItsValueBeforeToTheLayerAbove) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus), options());
  Child first;
  Child second;
  daemon_set_power_limit(ledger, *gpus[0], 0, 300'000, first.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, second.pid());
  daemon_set_power_limit(ledger, *gpus[0], 0, 220'000, first.pid());
  EXPECT_EQ(ledger.entries()[0].layers, 3u);

  first.kill();  // its top layer goes back to second's 250 W; its bottom layer hands down
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == 250'000u; }));
  EXPECT_TRUE(
      wait_until([&] { return ledger.entries().size() == 1 && ledger.entries()[0].layers == 1; }));
  EXPECT_EQ(ledger.entries()[0].original.power_limit_mw, kA100DefaultMw);
  second.kill();
  EXPECT_TRUE(wait_until([&] { return gpus[0]->power_limit_mw() == kA100DefaultMw; }));
  EXPECT_TRUE(wait_until([&] { return ledger.entries().empty(); }));
}

TEST_P(LedgerTest, ResetByTheOwnerRemovesTheEntry) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus), options());
  Child child;
  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, child.pid());
  gpus[0]->reset_power_limit();
  EXPECT_TRUE(ledger.record_reset(0, Setting::kPowerLimit, child.pid()));
  EXPECT_FALSE(ledger.record_reset(0, Setting::kPowerLimit, child.pid()));
  EXPECT_TRUE(ledger.entries().empty());

  gpus[0]->set_power_limit_mw(300'000);  // somebody else's change, not through the ledger
  child.kill();
  child.reap();
  std::this_thread::sleep_for(300ms);  // longer than the fallback's 200 ms polling interval
  EXPECT_EQ(gpus[0]->power_limit_mw(), 300'000u);
  EXPECT_EQ(ledger.restored_count(), 0u);
}

// Found under `ctest -j2`: the polling watcher opened /proc/<pid>/stat, the process exited, and
// the read threw (libstdc++, ESRCH) out of the watcher thread, aborting the daemon.
TEST(LedgerProcStat, AProcessThatExitsBetweenOpenAndReadIsUnreadableNotAThrow) {
  std::optional<Child> child;
  child.emplace();
  std::ifstream stat("/proc/" + std::to_string(child->pid()) + "/stat");
  ASSERT_TRUE(stat.is_open());
  child.reset();  // killed and reaped
  std::optional<char> state;
  EXPECT_NO_THROW(state = zeus::daemon::proc_stat_state(stat));
  EXPECT_FALSE(state.has_value());

  std::ifstream self("/proc/self/stat");
  EXPECT_TRUE(zeus::daemon::proc_stat_state(self).has_value());
}

TEST_P(LedgerTest, AnOwnerThatHasAlreadyExitedIsRefused) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus), options());
  Child child;
  const pid_t pid = child.pid();
  child.kill();
  child.reap();
  try {
    ledger.record_change(0, Setting::kPowerLimit, SettingValue::power_limit(kA100DefaultMw), pid);
    FAIL() << "recorded a change for an exited process";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(error.what()).find(std::to_string(pid)), std::string::npos);
  }
  EXPECT_TRUE(ledger.entries().empty());
}

TEST_P(LedgerTest, RestoreAllRestoresEverySettingOnEveryGpu) {
  auto gpus = make_gpus(2);
  std::mutex serializer_mutex;
  std::vector<int> serialized_gpus;
  LedgerOptions opts = options();
  opts.gpu_serializer = [&](int gpu_index, const std::function<void()>& action) {
    std::lock_guard lock(serializer_mutex);
    serialized_gpus.push_back(gpu_index);
    action();
  };
  SettingsLedger ledger(as_gpus(gpus), opts);
  const pid_t self = getpid();
  gpus[0]->set_utilization(1.0);
  const std::uint32_t full_power_mw = gpus[0]->instant_power_mw();

  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, self);
  ledger.record_change(0, Setting::kGpuLockedClocks, SettingValue::locked_clocks(std::nullopt),
                       self);
  gpus[0]->set_gpu_locked_clocks_mhz(210, 705);
  ledger.record_change(1, Setting::kPersistenceMode,
                       SettingValue::persistence(gpus[1]->persistence_mode()), self);
  gpus[1]->set_persistence_mode(true);
  ledger.record_change(1, Setting::kMemoryLockedClocks,
                       SettingValue::locked_clocks(zeus::daemon::ClockRangeMhz{1215, 1593}), self);
  gpus[1]->set_memory_locked_clocks_mhz(1593, 1593);
  ASSERT_EQ(ledger.entries().size(), 4u);
  EXPECT_LT(gpus[0]->instant_power_mw(), full_power_mw);

  EXPECT_EQ(ledger.restore_all(), 4u);
  EXPECT_TRUE(ledger.entries().empty());
  EXPECT_EQ(gpus[0]->power_limit_mw(), kA100DefaultMw);
  EXPECT_EQ(gpus[0]->instant_power_mw(), full_power_mw);  // clocks unlocked again
  EXPECT_FALSE(gpus[1]->persistence_mode());
  std::lock_guard lock(serializer_mutex);
  EXPECT_EQ(serialized_gpus, (std::vector<int>{0, 1}));
}

TEST_P(LedgerTest, ManyOwnersDyingTogetherAreAllRestored) {
  constexpr int kCount = 8;
  auto gpus = make_gpus(kCount);
  SettingsLedger ledger(as_gpus(gpus), options());
  std::vector<std::unique_ptr<Child>> children;
  std::vector<std::thread> writers;
  for (int i = 0; i < kCount; ++i) {
    children.push_back(std::make_unique<Child>());
  }
  for (int i = 0; i < kCount; ++i) {  // concurrent writers, as the daemon's connections are
    writers.emplace_back([&, i] {
      daemon_set_power_limit(ledger, *gpus[static_cast<std::size_t>(i)], i,
                             200'000 + static_cast<std::uint32_t>(i) * 10'000,
                             children[static_cast<std::size_t>(i)]->pid());
    });
  }
  for (auto& writer : writers) {
    writer.join();
  }
  ASSERT_EQ(ledger.entries().size(), static_cast<std::size_t>(kCount));
  for (auto& child : children) {
    child->kill();
  }
  EXPECT_TRUE(wait_until([&] {
    for (const auto& gpu : gpus) {
      if (gpu->power_limit_mw() != kA100DefaultMw) {
        return false;
      }
    }
    return true;
  }));
  EXPECT_TRUE(wait_until([&] { return ledger.restored_count() == kCount; }));
}

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

TEST_P(LedgerTest, ClosesEveryDescriptorItOpens) {
  auto gpus = make_gpus(1);
  const std::size_t fds_before = open_fd_count();
  {
    SettingsLedger ledger(as_gpus(gpus), options());
    Child exiting;
    Child staying;
    daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, exiting.pid());
    ledger.record_change(0, Setting::kPersistenceMode, SettingValue::persistence(false),
                         staying.pid());
    exiting.kill();
    EXPECT_TRUE(wait_until([&] { return ledger.restored_count() == 1; }));
  }  // whether or not the watcher saw `staying` exit first, every pidfd is closed
  EXPECT_EQ(open_fd_count(), fds_before);
}

TEST(SettingsLedger, DisabledRecordsNothing) {
  auto gpus = make_gpus(1);
  LedgerOptions options;
  options.enabled = false;
  SettingsLedger ledger(as_gpus(gpus), options);
  EXPECT_FALSE(ledger.enabled());
  Child child;
  daemon_set_power_limit(ledger, *gpus[0], 0, 250'000, child.pid());
  EXPECT_TRUE(ledger.entries().empty());
  child.kill();
  child.reap();
  EXPECT_EQ(ledger.restore_all(), 0u);
  EXPECT_FALSE(ledger.record_reset(0, Setting::kPowerLimit, child.pid()));
  EXPECT_EQ(gpus[0]->power_limit_mw(), 250'000u);
}

TEST(SettingsLedger, RejectsBadIndicesAndPids) {
  auto gpus = make_gpus(1);
  SettingsLedger ledger(as_gpus(gpus));
  const auto value = SettingValue::power_limit(kA100DefaultMw);
  for (const auto& [index, pid] : {std::pair{1, getpid()}, std::pair{-1, getpid()},
                                   std::pair{0, pid_t{0}}, std::pair{0, pid_t{-5}}}) {
    try {
      ledger.record_change(index, Setting::kPowerLimit, value, pid);
      FAIL() << index << " " << pid;
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    }
  }
  EXPECT_TRUE(ledger.entries().empty());
}

TEST(SettingsLedger, DescribesValues) {
  EXPECT_EQ(zeus::daemon::describe_setting_value(Setting::kPowerLimit,
                                                 SettingValue::power_limit(250'000)),
            "250000 mW");
  EXPECT_EQ(zeus::daemon::describe_setting_value(Setting::kGpuLockedClocks,
                                                 SettingValue::locked_clocks(std::nullopt)),
            "unlocked");
  EXPECT_EQ(zeus::daemon::describe_setting_value(
                Setting::kMemoryLockedClocks,
                SettingValue::locked_clocks(zeus::daemon::ClockRangeMhz{1, 2})),
            "1-2 MHz");
  EXPECT_EQ(zeus::daemon::describe_setting_value(Setting::kPersistenceMode,
                                                 SettingValue::persistence(true)),
            "on");
  EXPECT_EQ(zeus::daemon::setting_name(Setting::kMemoryLockedClocks), "memory_locked_clocks");
}

}  // namespace
