// zeus_spank.so on a real Slurm: options refused at submission, caps on exactly the allocated
// GPUs, per-step energy in AdminComment against the simulated ground truth (docs/slurm.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "slurm_cluster.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const auto* const kCluster = ::testing::AddGlobalTestEnvironment(&SlurmCluster::get());

std::vector<std::uint32_t> limits() {
  return SlurmCluster::get().power_limits_w();
}
std::size_t count_at(const std::vector<std::uint32_t>& values, std::uint32_t watts) {
  return static_cast<std::size_t>(std::count(values.begin(), values.end(), watts));
}
bool all_default() {
  return count_at(limits(), 700) == 4;
}

TEST(SlurmOptions, OutOfRangeOrMalformedPowerLimitsAreRefusedAtSubmission) {
  ZEUS_REQUIRE_SLURM();
  for (const std::string value : {"50", "701", "abc", "", "1e3", "-5", "99999999999999999999"}) {
    for (const std::string tail : {" echo job_ran", " --wrap 'echo job_ran'"}) {
      const std::string submit = tail[1] == 'e' ? "srun" : "sbatch -o /dev/null";
      const CommandResult result = run_shell(submit + " --zeus-power-limit='" + value + "'" + tail);
      EXPECT_NE(result.status, 0) << submit << " " << value << ": " << result.output;
      EXPECT_NE(result.output.find("--zeus-power-limit=" + value), std::string::npos)
          << result.output;
      EXPECT_NE(result.output.find("100-700 W"), std::string::npos) << result.output;
      EXPECT_EQ(result.output.find("job_ran"), std::string::npos) << result.output;
      EXPECT_EQ(result.output.find("Submitted"), std::string::npos) << result.output;
    }
  }
}

TEST(SlurmCaps, OnlyTheAllocatedGpusAreCappedForAJobOfAnotherUserAndComeBack) {
  ZEUS_REQUIRE_SLURM();
  ASSERT_TRUE(all_default());
  const CommandResult submitted = run_shell(
      "su -s /bin/sh nobody -c \"sbatch --chdir=/tmp -o /dev/null --gres=gpu:2 "
      "--zeus-power-limit=250W --wrap 'sleep 2'\"");
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  ASSERT_TRUE(seconds_until([] { return count_at(limits(), 250) == 2; }, 15s))
      << "never capped: " << limits()[0];
  EXPECT_EQ(count_at(limits(), 700), 2u);  // the other two GPUs are not the job's
  ASSERT_TRUE(SlurmCluster::get().wait_queue_empty());
  EXPECT_TRUE(seconds_until(all_default, 2s)) << "not restored within 2 s of the job's end";
}

TEST(SlurmCaps, TwoJobsRacingEachCapTheirOwnGpus) {
  ZEUS_REQUIRE_SLURM();
  ASSERT_TRUE(all_default());
  const CommandResult submitted = run_shell(
      "sbatch -o /dev/null --gres=gpu:2 --zeus-power-limit=200 --wrap 'sleep 3' & "
      "sbatch -o /dev/null --gres=gpu:2 --zeus-power-limit=300 --wrap 'sleep 3' & wait");
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  ASSERT_TRUE(seconds_until(
      [] {
        const auto now = limits();
        return count_at(now, 200) == 2 && count_at(now, 300) == 2;
      },
      15s))
      << "limits never reached 2x200 + 2x300";
  ASSERT_TRUE(SlurmCluster::get().wait_queue_empty());
  EXPECT_TRUE(seconds_until(all_default, 2s));
}

TEST(SlurmCaps, AGpuNamedOutsideTheAllocationIsNeverTouched) {
  ZEUS_REQUIRE_SLURM();
  ASSERT_TRUE(all_default());
  // Slurm overwrites SLURM_STEP_GPUS for a step that gets GPUs ...
  CommandResult result = run_shell(
      "SLURM_STEP_GPUS=3 CUDA_VISIBLE_DEVICES=3 srun --gres=gpu:1 --zeus-power-limit=150 "
      "sh -c 'echo gpus=$SLURM_STEP_GPUS; sleep 0.5'");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("gpus=0"), std::string::npos) << result.output;
  // ... and unsets it for a step without (and SLURM_JOB_GPUS for a batch step without); the
  // plugin checks the list against slurmctld's allocation all the same.
  for (const char* submit : {"srun --zeus-power-limit=150 sh -c 'sleep 1.5'",
                             "sbatch -o /dev/null --zeus-power-limit=150 --wrap 'sleep 1.5'"}) {
    result = run_shell(std::string("SLURM_STEP_GPUS=3 SLURM_JOB_GPUS=3 CUDA_VISIBLE_DEVICES=3 ") +
                       submit + " >/dev/null 2>&1 &");
    const auto capped = seconds_until([] { return count_at(limits(), 150) > 0; }, 2500ms);
    EXPECT_FALSE(capped.has_value()) << "a GPU outside the allocation was capped: " << submit;
    EXPECT_TRUE(SlurmCluster::get().wait_queue_empty());
    EXPECT_TRUE(all_default());
  }
}

TEST(SlurmEnergy, AStepsEnergyMatchesTheSimulatedGroundTruthWithinHalfAPercent) {
  ZEUS_REQUIRE_SLURM();
  const double idle_w = device::simulated_gpu_model("h200").idle_power_mw / 1000.0;
  for (const double seconds : {1.0, 3.0}) {
    const double before = SlurmCluster::get().energy_j(0);
    const CommandResult result =
        run_shell("srun --gres=gpu:1 --zeus-energy sh -c 'echo job=$SLURM_JOB_ID; sleep " +
                  std::to_string(seconds) + "'");
    const double after = SlurmCluster::get().energy_j(0);
    ASSERT_EQ(result.status, 0) << result.output;
    const auto at = result.output.find("job=");
    ASSERT_NE(at, std::string::npos) << result.output;
    const auto job_id = static_cast<std::uint32_t>(std::stoul(result.output.substr(at + 4)));
    const json comment = json::parse(SlurmCluster::get().admin_comment(job_id));
    const json& steps = comment.at("zeus").at("steps");
    ASSERT_TRUE(steps.contains("0")) << comment.dump();
    const json& record = steps.at("0").begin().value();
    const double energy = record.at("gpus").at("0").at("energy_j").get<double>();
    const double duration = record.at("duration_s").get<double>();
    EXPECT_GE(duration, seconds);
    EXPECT_NEAR(energy, idle_w * duration, 0.005 * idle_w * duration) << record.dump();
    std::printf("step of %.0f s: %.3f J over %.3f s, %+.4f%% against %.1f W x duration\n", seconds,
                energy, duration, (energy / (idle_w * duration) - 1.0) * 100.0, idle_w);
    EXPECT_LE(energy, after - before + 0.01);  // inside the test's own window
    EXPECT_EQ(record.at("source"), "counter");
    // --zeus-energy: the summary on srun's stderr.
    EXPECT_NE(result.output.find("zeus: step " + std::to_string(job_id) + ".0 on "),
              std::string::npos)
        << result.output;
  }
}

TEST(SlurmEnergy, BatchAndEachStepAreRecordedBesideWhatAdminCommentAlreadyHeld) {
  ZEUS_REQUIRE_SLURM();
  const auto out = SlurmCluster::get().dir() / "batch.out";
  const CommandResult submitted = run_shell(
      "sbatch -o " + out.string() +
      " --gres=gpu:2 --zeus-energy --zeus-power-limit=400 --wrap '"
      "scontrol update job=$SLURM_JOB_ID AdminComment=\"{\\\"site\\\":{\\\"kept\\\":1}}\"; "
      "srun --gres=gpu:1 sleep 0.5; srun --gres=gpu:2 sleep 0.5'");
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  const std::uint32_t job_id = submitted_job_id(submitted.output);
  ASSERT_TRUE(SlurmCluster::get().wait_queue_empty());
  const std::string text = SlurmCluster::get().admin_comment(job_id);
  const json comment = json::parse(text);
  EXPECT_EQ(comment.at("site").at("kept"), 1) << text;
  const json& steps = comment.at("zeus").at("steps");
  for (const char* step : {"batch", "0", "1"}) {
    EXPECT_TRUE(steps.contains(step)) << step << " missing: " << text;
  }
  EXPECT_EQ(steps.at("1").begin().value().at("gpus").size(), 2u) << text;
  EXPECT_EQ(steps.at("0").begin().value().at("gpus").size(), 1u) << text;
  // The steps ran under the job's cap, set by the batch step and kept by the steps.
  EXPECT_EQ(steps.at("1").begin().value().at("gpus").at("0").at("power_limit_w"), 400) << text;
  EXPECT_TRUE(seconds_until(all_default, 2s));
  std::ifstream in(out);
  const std::string batch_err{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(batch_err.find("zeus: step " + std::to_string(job_id) + ".batch on "),
            std::string::npos)
      << batch_err;
}

TEST(SlurmEnergy, ACancelledJobKeepsItsRecordSoFar) {
  ZEUS_REQUIRE_SLURM();
  // Slurm refuses AdminComment once a job is cancelled, before its steps end: the record so far,
  // written every update_interval (1 s here), is what stays.
  const CommandResult submitted =
      run_shell("sbatch -o /dev/null --gres=gpu:1 --zeus-power-limit=300 --wrap 'sleep 60'");
  const std::uint32_t job_id = submitted_job_id(submitted.output);
  ASSERT_NE(job_id, 0u) << submitted.output;
  ASSERT_TRUE(seconds_until(
      [&] {
        return SlurmCluster::get().admin_comment(job_id).find("\"partial\":true") !=
               std::string::npos;
      },
      10s))
      << SlurmCluster::get().admin_comment(job_id);
  std::this_thread::sleep_for(1500ms);
  run_shell("scancel " + std::to_string(job_id));
  ASSERT_TRUE(SlurmCluster::get().wait_queue_empty());
  const json comment = json::parse(SlurmCluster::get().admin_comment(job_id));
  const json& record = comment.at("zeus").at("steps").at("batch").begin().value();
  EXPECT_EQ(record.at("partial"), true) << record.dump();
  EXPECT_GT(record.at("duration_s").get<double>(), 1.0) << record.dump();
  EXPECT_GT(record.at("gpus").at("0").at("energy_j").get<double>(), 50.0) << record.dump();
  EXPECT_EQ(record.at("gpus").at("0").at("power_limit_w"), 300) << record.dump();
  EXPECT_TRUE(seconds_until(all_default, 2s));
}

TEST(SlurmEnergy, AnAdminCommentThatIsNotJsonIsLeftAlone) {
  ZEUS_REQUIRE_SLURM();
  const CommandResult submitted = run_shell(
      "sbatch -o /dev/null --gres=gpu:1 --wrap 'scontrol update job=$SLURM_JOB_ID "
      "AdminComment=\"reserved for the site\"; srun --gres=gpu:1 sleep 0.2'");
  ASSERT_EQ(submitted.status, 0) << submitted.output;
  const std::uint32_t job_id = submitted_job_id(submitted.output);
  ASSERT_TRUE(SlurmCluster::get().wait_queue_empty());
  EXPECT_EQ(SlurmCluster::get().admin_comment(job_id), "reserved for the site");
}

}  // namespace
}  // namespace zeus::testing
