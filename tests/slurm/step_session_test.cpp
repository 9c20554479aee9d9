// A step's caps and energy through a real zeusd process serving four simulated H200s
// (ZEUS_SIMULATED_GPUS=4:h200), read back through zeusd as the ground truth: caps applied and put
// back to what was there before, caps of another job's or an earlier step's left alone, the state
// file, the epilog's restore_leftovers, and a zeusd that is not there, does not answer or answers
// garbage.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "device/zeusd_connection.hpp"
#include "slurm/polled_energy.hpp"
#include "slurm/step_session.hpp"
#include "support/loopback_peers.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"
#include "support/wait_until.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::slurm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using zeus::testing::SilentListener;
using zeus::testing::SpawnedProcess;
using zeus::testing::TempDir;
namespace fs = std::filesystem;

constexpr std::uint32_t kDefaultMw = 700000;  // the H200's default and maximum
constexpr double kIdleW = 75.0;               // the simulated H200's idle draw (gpu_models.cpp)

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class SlurmStepSession : public ::testing::Test {
 protected:
  // What zeusd serves (ZEUS_SIMULATED_GPUS).
  virtual std::string simulated_gpus() const { return "4:h200"; }

  void SetUp() override {
    const std::string socket = (dir_.path() / "zeusd.sock").string();
    zeusd_ = std::make_unique<SpawnedProcess>(
        std::vector<std::string>{ZEUSD_PATH, "serve", "--socket-path", socket},
        dir_.path() / "zeusd.log",
        std::vector<std::pair<std::string, std::string>>{
            {"ZEUS_SIMULATED_GPUS", simulated_gpus()}});
    ASSERT_TRUE(zeus::testing::wait_until(
        [&] { return zeusd_->log().find("listening on") != std::string::npos; }, 20s))
        << zeusd_->log();
    site_.zeusd.socket_path = socket;
    site_.zeusd.timeout_s = 2.0;
    site_.state_dir = (dir_.path() / "state").string();
    daemon_ = std::make_unique<device::ZeusdConnection>(site_.zeusd);
  }

  StepState identity(std::uint32_t job, const std::string& step, pid_t owner = ::getpid()) const {
    StepState state;
    state.job_id = job;
    state.step = step;
    state.node = "n1";
    state.uid = ::getuid();
    state.owner_pid = owner;
    state.zeusd = site_.zeusd.describe();
    return state;
  }

  StepState begin(std::uint32_t job, const std::string& step, const std::vector<int>& gpus,
                  std::optional<std::uint32_t> cap_w, pid_t owner = ::getpid()) {
    return begin_step(site_, *daemon_, identity(job, step, owner), gpus, cap_w);
  }

  // The GPU's power limit as zeusd reads it.
  std::uint32_t limit_mw(int gpu) {
    const std::string id = std::to_string(gpu);
    return json::parse(daemon_->get("read", "/gpu/get_power_limit?gpu_ids=" + id))
        .at(id)
        .at("power_limit_mw")
        .get<std::uint32_t>();
  }
  void set_limit_w(int gpu, std::uint32_t watts) {
    daemon_->post("set", "/gpu/set_power_limit?gpu_ids=" + std::to_string(gpu) +
                             "&power_limit_mw=" + std::to_string(watts * 1000) + "&block=true");
  }
  bool state_file_exists(std::uint32_t job, const std::string& step) const {
    return fs::exists(state_file_path(site_.state_dir, job, step));
  }

  TempDir dir_;
  std::unique_ptr<SpawnedProcess> zeusd_;
  SiteConfig site_;
  std::unique_ptr<device::ZeusdConnection> daemon_;
};

TEST_F(SlurmStepSession, CapsTheStepsGpusAndPutsThemBack) {
  const StepState state = begin(12, "0", {0, 2}, 250);
  EXPECT_FALSE(state.note) << *state.note;
  EXPECT_EQ(limit_mw(0), 250000u);
  EXPECT_EQ(limit_mw(2), 250000u);
  EXPECT_EQ(limit_mw(1), kDefaultMw);  // not the step's
  EXPECT_EQ(limit_mw(3), kDefaultMw);
  ASSERT_EQ(state.gpus.size(), 2u);
  for (const StepGpu& gpu : state.gpus) {
    EXPECT_TRUE(gpu.capped_here);
    EXPECT_EQ(gpu.cap_mw, 250000u);
    EXPECT_EQ(gpu.prior_power_limit_mw, kDefaultMw);
    EXPECT_TRUE(gpu.start_energy_mj);
  }

  // The state file, as the epilog and the exporter read it.
  EXPECT_TRUE(state_file_exists(12, "0"));
  const std::vector<StepState> states = read_step_states(site_.state_dir);
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].job_id, 12u);
  EXPECT_EQ(states[0].step, "0");
  EXPECT_EQ(states[0].node, "n1");
  EXPECT_EQ(states[0].owner_pid, ::getpid());
  EXPECT_EQ(states[0].uid, ::getuid());
  EXPECT_EQ(states[0].zeusd, site_.zeusd.describe());
  EXPECT_DOUBLE_EQ(states[0].start_monotonic_s, state.start_monotonic_s);
  ASSERT_EQ(states[0].gpus.size(), 2u);
  EXPECT_EQ(states[0].gpus[1].index, 2);
  EXPECT_EQ(states[0].gpus[1].cap_mw, 250000u);
  EXPECT_TRUE(states[0].gpus[1].capped_here);
  EXPECT_EQ(states[0].gpus[1].start_energy_mj, state.gpus[1].start_energy_mj);

  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_EQ(limit_mw(0), kDefaultMw);
  EXPECT_EQ(limit_mw(2), kDefaultMw);
  EXPECT_FALSE(state_file_exists(12, "0"));
  EXPECT_EQ(record.step, "0");
  EXPECT_EQ(record.node, "n1");
  EXPECT_EQ(record.source, "counter");
  ASSERT_EQ(record.gpus.size(), 2u);
  EXPECT_EQ(record.gpus.at(0).power_limit_w, 250u);
  EXPECT_EQ(record.gpus.at(0).prior_power_limit_w, 700u);
  EXPECT_FALSE(record.note);
}

TEST_F(SlurmStepSession, PutsBackAPriorLimitOtherThanTheDefault) {
  set_limit_w(1, 500);
  set_limit_w(3, 420);
  const StepState state = begin(3, "batch", {1, 3}, 300);
  EXPECT_EQ(limit_mw(1), 300000u);
  EXPECT_EQ(limit_mw(3), 300000u);
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_EQ(limit_mw(1), 500000u);
  EXPECT_EQ(limit_mw(3), 420000u);
  EXPECT_EQ(record.gpus.at(1).prior_power_limit_w, 500u);
  EXPECT_EQ(record.gpus.at(3).prior_power_limit_w, 420u);
}

TEST_F(SlurmStepSession, WithoutACapOnlyMeasures) {
  set_limit_w(0, 600);
  const StepState state = begin(4, "0", {0, 1}, std::nullopt);
  EXPECT_FALSE(state.note);
  for (const StepGpu& gpu : state.gpus) {
    EXPECT_FALSE(gpu.capped_here);
    EXPECT_FALSE(gpu.cap_mw);
  }
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_EQ(limit_mw(0), 600000u);
  EXPECT_EQ(limit_mw(1), kDefaultMw);
  EXPECT_FALSE(record.gpus.at(0).power_limit_w);
  EXPECT_FALSE(record.gpus.at(0).prior_power_limit_w);
}

TEST_F(SlurmStepSession, ALimitAlreadyAtTheCapIsNotTakenOver) {
  set_limit_w(0, 250);
  const StepState state = begin(5, "0", {0}, 250);
  EXPECT_FALSE(state.gpus[0].capped_here);
  EXPECT_EQ(state.gpus[0].cap_mw, 250000u);
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_EQ(limit_mw(0), 250000u);  // it was 250 W before the step
  EXPECT_EQ(record.gpus.at(0).power_limit_w, 250u);
  EXPECT_FALSE(record.gpus.at(0).prior_power_limit_w);
}

TEST_F(SlurmStepSession, ACapOutsideTheGpusRangeIsNotApplied) {
  for (const std::uint32_t cap : {150u, 701u}) {
    const StepState state = begin(6, "0", {0}, cap);
    ASSERT_TRUE(state.note);
    EXPECT_NE(state.note->find("GPU 0 cannot be capped at " + std::to_string(cap) +
                               " W (its range is 200-700 W)"),
              std::string::npos)
        << *state.note;
    EXPECT_EQ(limit_mw(0), kDefaultMw);
    EXPECT_FALSE(state.gpus[0].capped_here);
    EXPECT_FALSE(state.gpus[0].cap_mw);
    const StepRecord record = end_step(site_, *daemon_, state);
    EXPECT_EQ(record.note, state.note);
    EXPECT_EQ(limit_mw(0), kDefaultMw);
  }
}

TEST_F(SlurmStepSession, AnUnknownGpuIsNotedAndTheOthersCapped) {
  const StepState state = begin(7, "0", {0, 7, 4095}, 300);
  ASSERT_TRUE(state.note);
  EXPECT_NE(state.note->find("GPU 7 is not one of zeusd's GPUs (4 known)"), std::string::npos)
      << *state.note;
  EXPECT_NE(state.note->find("GPU 4095 is not one of zeusd's GPUs"), std::string::npos)
      << *state.note;
  ASSERT_EQ(state.gpus.size(), 1u);
  EXPECT_EQ(limit_mw(0), 300000u);
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_EQ(record.gpus.size(), 1u);
  EXPECT_EQ(limit_mw(0), kDefaultMw);
}

TEST_F(SlurmStepSession, AnotherJobsCapIsLeftAlone) {
  const StepState first = begin(1, "0", {0, 1}, 300);
  const StepState second = begin(2, "0", {1, 2}, 400);
  ASSERT_TRUE(second.note);
  EXPECT_NE(second.note->find("GPU 1 is capped by job 1, which shares it: left as it is"),
            std::string::npos)
      << *second.note;
  EXPECT_EQ(limit_mw(1), 300000u);
  EXPECT_EQ(limit_mw(2), 400000u);
  EXPECT_FALSE(second.gpus[0].capped_here);
  EXPECT_FALSE(second.gpus[0].cap_mw);  // not capped by zeus for job 2

  end_step(site_, *daemon_, second);
  EXPECT_EQ(limit_mw(1), 300000u);  // still job 1's
  EXPECT_EQ(limit_mw(2), kDefaultMw);
  end_step(site_, *daemon_, first);
  for (int gpu = 0; gpu < 4; ++gpu) {
    EXPECT_EQ(limit_mw(gpu), kDefaultMw) << gpu;
  }
}

TEST_F(SlurmStepSession, ACapOfAJobWhoseStepIsGoneDoesNotBlock) {
  // Job 1's slurmstepd died (its state file stays for the epilog): job 2 may cap the GPU.
  const StepState orphan = begin(1, "0", {0}, 300, zeus::testing::reaped_pid());
  const StepState second = begin(2, "0", {0}, 400);
  EXPECT_FALSE(second.note);
  EXPECT_EQ(limit_mw(0), 400000u);
  end_step(site_, *daemon_, second);
  EXPECT_EQ(limit_mw(0), 300000u);  // what was there before job 2
  restore_leftovers(site_, *daemon_, 1);
  EXPECT_EQ(limit_mw(0), kDefaultMw);
  (void)orphan;
}

TEST_F(SlurmStepSession, TheSameJobsEarlierStepKeepsItsCap) {
  const StepState step0 = begin(8, "0", {0}, 300);
  const StepState step1 = begin(8, "1", {0}, 400);
  ASSERT_TRUE(step1.note);
  EXPECT_NE(step1.note->find("GPU 0 keeps this job's cap of 300 W, set by an earlier step"),
            std::string::npos)
      << *step1.note;
  EXPECT_EQ(limit_mw(0), 300000u);
  EXPECT_FALSE(step1.gpus[0].capped_here);
  EXPECT_EQ(step1.gpus[0].cap_mw, 300000u);
  // The same cap asked again is no news.
  const StepState step2 = begin(8, "2", {0}, 300);
  EXPECT_FALSE(step2.note);
  EXPECT_EQ(step2.gpus[0].cap_mw, 300000u);

  const StepRecord record1 = end_step(site_, *daemon_, step1);
  end_step(site_, *daemon_, step2);
  EXPECT_EQ(limit_mw(0), 300000u);  // step 0 still runs
  EXPECT_EQ(record1.gpus.at(0).power_limit_w, 300u);
  EXPECT_FALSE(record1.gpus.at(0).prior_power_limit_w);
  end_step(site_, *daemon_, step0);
  EXPECT_EQ(limit_mw(0), kDefaultMw);
}

TEST_F(SlurmStepSession, EnergyIsIdlePowerTimesTheStepsDuration) {
  const StepState state = begin(9, "0", {0, 3}, 300);
  std::this_thread::sleep_for(1200ms);
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_GE(record.duration_s, 1.2);
  ASSERT_EQ(record.gpus.size(), 2u);
  for (const auto& [index, usage] : record.gpus) {
    const double expected = kIdleW * record.duration_s;
    EXPECT_NEAR(usage.energy_j, expected, expected * 0.005) << "GPU " << index;
    EXPECT_NEAR(usage.average_power_w, kIdleW, kIdleW * 0.005) << "GPU " << index;
  }
  EXPECT_NEAR(record.energy_j(), 2 * kIdleW * record.duration_s,
              2 * kIdleW * record.duration_s * 0.005);
}

TEST_F(SlurmStepSession, TheEnergyWindowStartsAtTheCounterRead) {
  // Thousands of stale state files (epilogs that could not reach zeusd) make begin_step's reads
  // before the counters take tens of milliseconds: that time is not in the energy, so it must
  // not be in the duration either (it was: -3% on a 1 s step).
  fs::create_directories(site_.state_dir);
  const pid_t gone = zeus::testing::reaped_pid();
  for (int job = 1000; job < 2500; ++job) {
    std::ofstream(state_file_path(site_.state_dir, job, "0"))
        << R"({"job_id": )" << job << R"(, "step": "0", "node": "n1", "uid": 0, "owner_pid": )"
        << gone << R"(, "zeusd": "x", "start_unix_s": 0, "start_monotonic_s": 0, "gpus": []})";
  }
  const StepState state = begin(9, "0", {1}, std::nullopt);
  std::this_thread::sleep_for(1000ms);
  const StepRecord record = end_step(site_, *daemon_, state);
  const double expected = kIdleW * record.duration_s;
  EXPECT_NEAR(record.gpus.at(1).energy_j, expected, expected * 0.005);
}

TEST_F(SlurmStepSession, StateFilesOfOthersAndJunkAreSkipped) {
  fs::create_directories(site_.state_dir);
  std::ofstream(site_.state_dir + "/job-1.step-0.json") << "{\"job_id\": 1";  // cut short
  std::ofstream(site_.state_dir + "/job-2.step-0.json") << "[]";
  std::ofstream(site_.state_dir + "/job-3.step-0.json.tmp99") << "{}";
  std::ofstream(site_.state_dir + "/notes.json") << "{}";
  fs::create_directories(site_.state_dir + "/job-4.step-0.json");  // a directory
  std::ofstream(site_.state_dir + "/job-5.step-0.json")
      << R"({"job_id": 5, "step": "0", "node": "n1", "uid": 0, "owner_pid": 1, "zeusd": "x",
             "start_unix_s": 0, "start_monotonic_s": 0, "gpus": [{"index": "zero"}]})";
  EXPECT_TRUE(read_step_states(site_.state_dir).empty());
  const StepState state = begin(6, "0", {0}, 300);
  EXPECT_EQ(limit_mw(0), 300000u);
  EXPECT_EQ(read_step_states(site_.state_dir).size(), 1u);
  end_step(site_, *daemon_, state);
  EXPECT_TRUE(read_step_states(site_.state_dir).empty());
  EXPECT_TRUE(read_step_states((dir_.path() / "absent").string()).empty());
}

TEST_F(SlurmStepSession, RestoreLeftoversPutsBackWhatDeadStepsCapped) {
  const StepState dead = begin(5, "0", {0}, 300, zeus::testing::reaped_pid());
  const StepState alive = begin(6, "0", {1}, 350);
  EXPECT_EQ(limit_mw(0), 300000u);
  EXPECT_EQ(limit_mw(1), 350000u);

  // Another job's epilog: the dead step's caps come back, the live one of job 6 stays.
  const std::vector<std::string> lines = restore_leftovers(site_, *daemon_, 99);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "job 5 step 0: GPU 0 put back to 700 W");
  EXPECT_EQ(limit_mw(0), kDefaultMw);
  EXPECT_FALSE(state_file_exists(5, "0"));
  EXPECT_EQ(limit_mw(1), 350000u);
  EXPECT_TRUE(state_file_exists(6, "0"));

  // Job 6's own epilog puts its caps back whoever owns them.
  EXPECT_EQ(restore_leftovers(site_, *daemon_, 6).size(), 1u);
  EXPECT_EQ(limit_mw(1), kDefaultMw);
  EXPECT_FALSE(state_file_exists(6, "0"));
  EXPECT_TRUE(restore_leftovers(site_, *daemon_, 6).empty());
  (void)dead;
  (void)alive;
}

TEST_F(SlurmStepSession, RestoreLeftoversLeavesALimitChangedSince) {
  begin(5, "0", {0, 1}, 300, zeus::testing::reaped_pid());
  set_limit_w(1, 450);  // someone else's since
  const std::vector<std::string> lines = restore_leftovers(site_, *daemon_, 5);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "job 5 step 0: GPU 0 put back to 700 W");
  EXPECT_EQ(limit_mw(0), kDefaultMw);
  EXPECT_EQ(limit_mw(1), 450000u);
  EXPECT_FALSE(state_file_exists(5, "0"));
}

TEST_F(SlurmStepSession, ZeusdNotThereFailsAtOnceWithNothingWritten) {
  SiteConfig site = site_;
  site.zeusd.socket_path = (dir_.path() / "absent.sock").string();
  device::ZeusdConnection daemon(site.zeusd);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(begin_step(site, daemon, identity(1, "0"), {0}, 300), Error);
  EXPECT_LT(seconds_since(start), 1.5);
  EXPECT_FALSE(state_file_exists(1, "0"));
  EXPECT_EQ(limit_mw(0), kDefaultMw);

  // A step begun while zeusd was there, ended when it is not: the state file stays.
  const StepState state = begin(2, "0", {0}, 300);
  EXPECT_THROW(end_step(site, daemon, state), Error);
  EXPECT_TRUE(state_file_exists(2, "0"));
  EXPECT_THROW(restore_leftovers(site, daemon, 2), Error);
  EXPECT_TRUE(state_file_exists(2, "0"));
  EXPECT_EQ(restore_leftovers(site_, *daemon_, 2).size(), 1u);
  EXPECT_EQ(limit_mw(0), kDefaultMw);
}

TEST_F(SlurmStepSession, ZeusdThatNeverAnswersFailsWithinTheSiteTimeout) {
  const std::string socket = (dir_.path() / "silent.sock").string();
  SilentListener silent(socket);
  for (const double timeout_s : {0.2, 2.0}) {
    SiteConfig site = site_;
    site.zeusd.socket_path = socket;
    site.zeusd.timeout_s = timeout_s;
    device::ZeusdConnection daemon(site.zeusd);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(begin_step(site, daemon, identity(1, "0"), {0}, 300), Error);
    const double took = seconds_since(start);
    EXPECT_GE(took, timeout_s * 0.9) << timeout_s;
    EXPECT_LT(took, timeout_s * 3 + 1.5) << timeout_s;
    EXPECT_FALSE(state_file_exists(1, "0"));
  }
}

TEST_F(SlurmStepSession, ZeusdAnsweringGarbageIsAZeusError) {
  for (const std::string body :
       {"not json", "[]", "{\"gpus\": 5}", "{\"gpus\": [{\"id\": \"zero\"}]}", "{\"gpus\": [7]}"}) {
    zeus::testing::RawHttpPeer peer(
        [&](const std::string&) { return zeus::testing::RawHttpPeer::ok_json(body); });
    SiteConfig site = site_;
    site.zeusd.socket_path.reset();
    site.zeusd.host = "127.0.0.1";
    site.zeusd.port = std::stoi(peer.url().substr(peer.url().rfind(':') + 1));
    device::ZeusdConnection daemon(site.zeusd);
    EXPECT_THROW(begin_step(site, daemon, identity(1, "0"), {0}, 300), Error) << body;
    EXPECT_FALSE(state_file_exists(1, "0")) << body;
  }
}

TEST(SlurmJobLock, SerializesHoldersOfOneJob) {
  TempDir dir;
  const std::string state_dir = (dir.path() / "state").string();
  std::atomic<bool> second_has_it{false};
  std::thread second;
  {
    JobLock first(state_dir, 3);
    EXPECT_TRUE(fs::exists(state_dir + "/job-3.lock"));
    second = std::thread([&] {
      JobLock lock(state_dir, 3);
      second_has_it = true;
    });
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(second_has_it.load());
    JobLock other_job(state_dir, 4);  // another job's lock does not wait
  }
  EXPECT_TRUE(zeus::testing::wait_until([&] { return second_has_it.load(); }, 10s));
  second.join();
}

// Pre-Volta GPUs (the simulated P100) have no energy counter: their power is polled through
// zeusd by the monitor layer's sampler, and the record says so.
class SlurmStepSessionWithoutCounters : public SlurmStepSession {
 protected:
  std::string simulated_gpus() const override { return "2:p100"; }
};

TEST_F(SlurmStepSessionWithoutCounters, PolledPowerGivesTheEnergyOfGpusWithoutACounter) {
  const double idle_w = device::simulated_gpu_model("p100").idle_power_mw / 1000.0;
  const StepState state = begin(13, "0", {0, 1}, 200);
  EXPECT_EQ(uncounted_gpus(state), (std::vector<int>{0, 1}));
  EXPECT_EQ(limit_mw(0), 200000u);  // capped all the same
  PolledEnergy polled(site_.zeusd, uncounted_gpus(state), 0.02);
  std::this_thread::sleep_for(1s);
  const StepRecord record = end_step(site_, *daemon_, state, polled.finish());
  EXPECT_EQ(record.source, "polled");
  EXPECT_FALSE(record.note) << *record.note;
  ASSERT_EQ(record.gpus.size(), 2u);
  for (const auto& [index, usage] : record.gpus) {
    // Polling starts after the step's counters are read and integrates from its first sample, so
    // it misses that start-up (about 10 ms here, 30-40 ms under ASan or with both cores busy:
    // up to 4 % of this 1 s step) and never counts more than the step.
    EXPECT_NEAR(usage.energy_j, idle_w * record.duration_s, 0.06 * idle_w * record.duration_s)
        << "GPU " << index;
    EXPECT_LE(usage.energy_j, idle_w * record.duration_s * 1.005) << "GPU " << index;
    EXPECT_EQ(usage.power_limit_w, 200u);
  }
  EXPECT_EQ(limit_mw(0), 250000u);  // the P100's default, put back
}

TEST_F(SlurmStepSessionWithoutCounters, WithoutPollingTheRecordSaysWhyAGpuHasNoFigure) {
  const StepState state = begin(14, "0", {1}, std::nullopt);
  const StepRecord record = end_step(site_, *daemon_, state);
  EXPECT_TRUE(record.gpus.empty());
  ASSERT_TRUE(record.note);
  EXPECT_NE(record.note->find("GPU 1 has no energy counter and its power was not polled"),
            std::string::npos)
      << *record.note;
}

}  // namespace
}  // namespace zeus::slurm
