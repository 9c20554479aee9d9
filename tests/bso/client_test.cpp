// The batch-size-optimizer client against a scripted HTTP peer on a loopback port: the exact
// requests it sends, the lifecycle (cumulative time and energy on simulated GPUs with a manual
// clock) and the end-of-run PATCH (client_retry_test.cpp: retries with backoff, errors, URLs and
// tokens).
#include "zeus/runtime/batch_size_optimizer.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client_test_support.hpp"
#include "support/expect_error.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using zeus::testing::expect_error;
// json, ErrorKind and the zeus::bso names come with the rig.
using namespace zeus::testing::bso_client;

// ---- Registration ----

TEST(BsoClient, RegistersTheFullSpecWithTheGpuConfiguration) {
  Peer peer;
  Rig rig(2, "h200");
  FastRetries retries;
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), retries.options());

  const auto posts = peer.requests("POST", "/jobs");
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].path, "/jobs");
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(posts[0].body);
  std::vector<std::string> keys;
  for (const auto& item : body.items()) {
    keys.push_back(item.key());
  }
  const std::vector<std::string> expected_keys = {"max_power",
                                                  "number_of_gpus",
                                                  "gpu_model",
                                                  "job_id",
                                                  "job_id_prefix",
                                                  "batch_sizes",
                                                  "default_batch_size",
                                                  "eta_knob",
                                                  "beta_knob",
                                                  "target_metric",
                                                  "higher_is_better_metric",
                                                  "max_epochs",
                                                  "num_pruning_rounds",
                                                  "window_size",
                                                  "mab_prior_mean",
                                                  "mab_prior_precision",
                                                  "mab_num_explorations",
                                                  "mab_seed"};
  EXPECT_EQ(keys, expected_keys);
  EXPECT_EQ(body["max_power"], 1400.0);  // 700 W x 2 GPUs
  EXPECT_TRUE(body["max_power"].is_number_float());
  EXPECT_EQ(body["number_of_gpus"], 2);
  EXPECT_EQ(body["gpu_model"], "NVIDIA H200");
  EXPECT_EQ(body["job_id"], "mnist-job");
  EXPECT_EQ(body["job_id_prefix"], "mnist");
  EXPECT_EQ(body["batch_sizes"], json({32, 64, 128, 256}));
  EXPECT_EQ(body["default_batch_size"], 128);
  EXPECT_EQ(body["eta_knob"], 0.25);
  EXPECT_EQ(body["beta_knob"], 3.0);
  EXPECT_EQ(body["target_metric"], 0.9);
  EXPECT_EQ(body["higher_is_better_metric"], true);
  EXPECT_EQ(body["max_epochs"], 30);
  EXPECT_EQ(body["num_pruning_rounds"], 2);
  EXPECT_EQ(body["window_size"], 0);
  EXPECT_EQ(body["mab_prior_mean"], 0.0);
  EXPECT_EQ(body["mab_prior_precision"], 0.0);
  EXPECT_EQ(body["mab_num_explorations"], 2);
  EXPECT_EQ(body["mab_seed"], 123456);
  EXPECT_TRUE(posts[0].authorization.empty());

  EXPECT_TRUE(bso.job_created());
  EXPECT_EQ(bso.job().job_id, "mnist-job");
  EXPECT_EQ(bso.job().batch_sizes, std::vector<int>({32, 64, 128, 256}));
  EXPECT_TRUE(retries.delays->empty());
}

TEST(BsoClient, UnsetJobIdAndBetaAreSentAsNullAndTheServersIdIsKept) {
  Peer peer;
  Rig rig(1, "v100");
  JobSpec spec = sample_job();
  spec.job_id.reset();
  spec.beta_knob.reset();
  spec.mab_seed.reset();
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
  const json body = json::parse(peer.requests("POST", "/jobs").at(0).body);
  EXPECT_TRUE(body["job_id"].is_null());
  EXPECT_TRUE(body["beta_knob"].is_null());
  EXPECT_TRUE(body["mab_seed"].is_null());
  EXPECT_EQ(body["max_power"], 250.0);
  EXPECT_EQ(body["gpu_model"], "Tesla V100-PCIE-32GB");
  EXPECT_EQ(bso.job().job_id, "mnist-0123abcd");
}

TEST(BsoClient, ThePolicyIsSentOnlyWhenSet) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  }
  EXPECT_FALSE(json::parse(peer.requests("POST", "/jobs").at(0).body).contains("policy"));
  JobSpec spec = sample_job();
  spec.policy = "low-regret";
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
  const json body = json::parse(peer.requests("POST", "/jobs").at(1).body);
  EXPECT_EQ(body.at("policy"), "low-regret");
}

TEST(BsoClient, ReRegistrationAnswered200IsNotACreation) {
  Peer peer;
  Rig rig(1, "a100");
  nlohmann::ordered_json stored = zeus::bso::to_json([] {
    JobSpec spec = sample_job();
    spec.batch_sizes = {32, 64, 128, 256};
    spec.max_power_w = 400.0;
    spec.number_of_gpus = 1;
    spec.gpu_model = "NVIDIA A100-SXM4-40GB";
    return spec;
  }());
  peer.script("POST /jobs", {{200, stored.dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  EXPECT_FALSE(bso.job_created());
}

TEST(BsoClient, RefusesGpusOfDifferentModelsAndNoGpu) {
  Peer peer;
  Rig mixed({"v100", "a100"});
  expect_error(
      [&] {
        BatchSizeOptimizer bso(mixed.monitor, mixed.set, peer.url(), sample_job(),
                               FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"one model", "Tesla V100", "NVIDIA A100"});

  Rig none(0, "v100");
  expect_error(
      [&] {
        BatchSizeOptimizer bso(none.monitor, none.set, peer.url(), sample_job(),
                               FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"at least one GPU"});
  EXPECT_TRUE(peer.requests().empty());
}

TEST(BsoClient, AnInvalidSpecIsRefusedBeforeAnyRequest) {
  Peer peer;
  Rig rig(1, "v100");
  JobSpec spec = sample_job();
  spec.default_batch_size = 100;
  spec.eta_knob = 1.5;
  expect_error(
      [&] {
        BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), spec, FastRetries().options());
      },
      ErrorKind::kInvalidArgument, {"invalid batch size optimizer job", "eta_knob"});
  EXPECT_TRUE(peer.requests().empty());
}

// ---- One training run ----

TEST(BsoClient, OnEvaluateWithoutOnTrainBeginMeasuresFromTheTrial) {
  // The reference's rank 0 may report without on_train_begin(): the epoch runs from the moment
  // the trial was handed out.
  Peer peer;
  Rig rig(1, "a100");
  peer.script("POST /report",
              {{200, R"({"stop_train": true, "converged": true, "message": "Train succeeded"})"}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  EXPECT_EQ(bso.get_batch_size(), 64);
  rig.gpus[0]->set_utilization(1.0);  // 400 W
  rig.clock->advance_s(4.0);
  EXPECT_TRUE(bso.on_evaluate(0.9).converged);
  EXPECT_EQ(bso.current_epoch(), 1);
  EXPECT_NEAR(bso.time_s(), 4.0, 1e-9);
  EXPECT_NEAR(bso.energy_j(), 1600.0, 1.0);
}

TEST(BsoClient, ReportsCumulativeTimeAndEnergyAndEndsTheTrial) {
  Peer peer;
  Rig rig(2, "a100");
  peer.script("POST /report",
              {{200, R"({"stop_train": false, "converged": false, "message": "keep training"})"},
               {200, R"({"stop_train": true, "converged": true, "message": "Train succeeded"})"}});
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    expect_error([&] { bso.on_train_begin(); }, ErrorKind::kInvalidArgument, {"get_batch_size"});
    EXPECT_EQ(bso.get_batch_size(), 64);
    EXPECT_EQ(bso.get_batch_size(), 64);  // cached: one request
    const auto gets = peer.requests("GET", "/jobs/batch_size");
    ASSERT_EQ(gets.size(), 1u);
    EXPECT_EQ(gets[0].query_job_id, "mnist-job");
    rig.clock->advance_s(3.0);  // set-up before training: on_train_begin() starts afresh
    bso.on_train_begin();
    rig.gpus[0]->set_utilization(1.0);  // 400 W
    rig.gpus[1]->set_utilization(1.0);
    rig.clock->advance_s(10.0);
    const auto first = bso.on_evaluate(0.5);
    EXPECT_FALSE(first.stop_train);
    EXPECT_FALSE(bso.training_finished());
    rig.gpus[1]->set_utilization(0.5);  // 227.5 W
    rig.clock->advance_s(5.0);
    const auto second = bso.on_evaluate(0.95);
    EXPECT_TRUE(second.stop_train);
    EXPECT_TRUE(second.converged);
    EXPECT_TRUE(bso.training_finished());
    EXPECT_EQ(bso.current_epoch(), 2);
    EXPECT_NEAR(bso.time_s(), 15.0, 1e-9);
    EXPECT_NEAR(bso.energy_j(), 800.0 * 10.0 + (400.0 + 227.5) * 5.0, 1.0);
    // After the end, on_evaluate is a no-op returning the last answer.
    EXPECT_EQ(bso.on_evaluate(0.99).message, "Train succeeded");
    EXPECT_TRUE(rig.monitor->open_windows().empty());
    EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
  }
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 2u);
  const json r1 = json::parse(reports[0].body);
  EXPECT_EQ(r1["job_id"], "mnist-job");
  EXPECT_EQ(r1["batch_size"], 64);
  EXPECT_EQ(r1["trial_number"], 1);
  EXPECT_NEAR(r1["time"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(r1["energy"].get<double>(), 8000.0, 1.0);
  EXPECT_EQ(r1["metric"], 0.5);
  EXPECT_EQ(r1["current_epoch"], 1);
  const json r2 = json::parse(reports[1].body);
  EXPECT_NEAR(r2["time"].get<double>(), 15.0, 1e-9);
  EXPECT_NEAR(r2["energy"].get<double>(), 8000.0 + 627.5 * 5.0, 1.0);
  EXPECT_EQ(r2["metric"], 0.95);
  EXPECT_EQ(r2["current_epoch"], 2);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(reports[0].body);
  std::vector<std::string> keys;
  for (const auto& item : ordered.items()) {
    keys.push_back(item.key());
  }
  EXPECT_EQ(keys, std::vector<std::string>({"job_id", "batch_size", "trial_number", "time",
                                            "energy", "metric", "current_epoch"}));

  // Destruction ended the trial.
  const auto patches = peer.requests("PATCH", "/trials");
  ASSERT_EQ(patches.size(), 1u);
  EXPECT_EQ(json::parse(patches[0].body),
            json({{"job_id", "mnist-job"}, {"batch_size", 64}, {"trial_number", 1}}));
}

TEST(BsoClient, AStopWithoutConvergenceThrowsTrainFailed) {
  Peer peer;
  Rig rig(1, "h100");
  const std::string message =
      "Batch Size(64) exceeded the cost upper bound: current cost(91200.0) >\n"
      "                    beta_knob(2.0)*min_cost(44000.0)";
  peer.script(
      "POST /report",
      {{200, json{{"stop_train", true}, {"converged", false}, {"message", message}}.dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  bso.get_batch_size();
  bso.on_train_begin();
  rig.clock->advance_s(1.0);
  try {
    bso.on_evaluate(0.2);
    ADD_FAILURE() << "no TrainFailedError";
  } catch (const TrainFailedError& error) {
    EXPECT_NE(std::string(error.what()).find("Train failed: " + message), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("re-launch"), std::string::npos);
    EXPECT_FALSE(error.response().converged);
  }
  EXPECT_TRUE(bso.training_finished());
  EXPECT_NO_THROW(bso.on_evaluate(0.3));  // finished: nothing more is reported
  EXPECT_EQ(peer.requests("POST", "/report").size(), 1u);
  bso.end();
  bso.end();  // once only
  EXPECT_EQ(peer.requests("PATCH", "/trials").size(), 1u);
}

TEST(BsoClient, AFailedReportKeepsMeasuringAndTheNextOneCarriesTheTotals) {
  Peer peer;
  Rig rig(1, "a100");
  peer.script("POST /report",
              {{400, R"({"message": "bad report"})"},
               {200, R"({"stop_train": false, "converged": false, "message": "go"})"}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  bso.get_batch_size();
  bso.on_train_begin();
  rig.gpus[0]->set_utilization(1.0);  // 400 W
  rig.clock->advance_s(4.0);
  expect_error([&] { bso.on_evaluate(0.1); }, ErrorKind::kInvalidArgument, {"bad report"});
  rig.clock->advance_s(6.0);
  bso.on_evaluate(0.2);
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 2u);
  const json second = json::parse(reports[1].body);
  EXPECT_EQ(second["current_epoch"], 2);
  EXPECT_NEAR(second["time"].get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(second["energy"].get<double>(), 4000.0, 1.0);
}

TEST(BsoClient, AnAbortedRunIsEndedAtDestructionWithItsWindowClosed) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    bso.get_batch_size();
    bso.on_train_begin();
    rig.clock->advance_s(3.0);
    bso.on_evaluate(0.1);  // keep training; then the run "crashes"
    EXPECT_EQ(rig.monitor->open_windows().size(), 1u);
  }
  EXPECT_TRUE(rig.monitor->open_windows().empty());
  EXPECT_EQ(peer.requests("PATCH", "/trials").size(), 1u);
}

// Interruption and resumption (issue 31): suspend() leaves the trial open (no PATCH /trials) and
// returns the unfinished epoch's measurement, uncounted; resume() continues the trial with the
// earlier run's totals, without a new GET /jobs/batch_size, and then ends it as its own.
TEST(BsoClient, ASuspendedTrialIsLeftOpenAndResumedWithItsTotals) {
  Peer peer;
  Rig rig(1, "v100");
  peer.script("POST /report",
              {{200, R"({"stop_train": false, "converged": false, "message": "go"})"},
               {200, R"({"stop_train": false, "converged": false, "message": "go"})"}});
  double first_energy = 0.0;
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    bso.get_batch_size();
    bso.on_train_begin();
    rig.clock->advance_s(4.0);
    bso.on_evaluate(0.1);
    first_energy = bso.energy_j();
    rig.clock->advance_s(2.0);  // Ctrl-C in the middle of the second epoch
    const auto unfinished = bso.suspend();
    ASSERT_TRUE(unfinished.has_value());
    EXPECT_NEAR(unfinished->time_s, 2.0, 1e-9);
    EXPECT_NEAR(bso.time_s(), 4.0, 1e-9);  // not counted
    EXPECT_FALSE(bso.suspend().has_value());
    EXPECT_TRUE(rig.monitor->open_windows().empty());
  }
  EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
    expect_error(
        [&] {
          bso.resume({"mnist-job", 64, 1}, -1, 4.0, 1.0);
        },
        ErrorKind::kInvalidArgument, {"not negative"});
    bso.resume({"mnist-job", 64, 1}, 1, 4.0, first_energy);
    EXPECT_EQ(bso.get_batch_size(), 64);
    EXPECT_EQ(peer.requests("GET", "/jobs/batch_size").size(), 1u);  // the first run's only
    bso.on_train_begin();
    rig.clock->advance_s(3.0);
    bso.on_evaluate(0.2);
  }
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 2u);
  const json resumed = json::parse(reports[1].body);
  EXPECT_EQ(resumed["trial_number"], 1);
  EXPECT_EQ(resumed["current_epoch"], 2);
  EXPECT_NEAR(resumed["time"].get<double>(), 7.0, 1e-9);
  EXPECT_GT(resumed["energy"].get<double>(), first_energy);
  EXPECT_EQ(peer.requests("PATCH", "/trials").size(), 1u);  // the resumed run ended it
}

TEST(BsoClient, WithoutATrialNothingIsEnded) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  }
  EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
}

TEST(BsoClient, OtherRanksUseTheTrialFromRankZeroAndDoNotEndIt) {
  Peer peer;
  Rig rig(1, "v100");
  ClientOptions options = FastRetries().options();
  options.rank = 1;
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), options);
    expect_error([&] { bso.get_batch_size(); }, ErrorKind::kInvalidArgument,
                 {"only rank 0", "rank 1", "set_trial"});
    expect_error(
        [&] {
          bso.set_trial(TrialId{"other-job", 64, 3});
        },
        ErrorKind::kInvalidArgument, {"not a trial of job mnist-job"});
    expect_error(
        [&] {
          bso.set_trial(TrialId{"mnist-job", 48, 3});
        },
        ErrorKind::kInvalidArgument, {"batch size 48"});
    bso.set_trial(TrialId{"mnist-job", 128, 3});
    EXPECT_EQ(bso.get_batch_size(), 128);
    expect_error(
        [&] {
          bso.set_trial(TrialId{"mnist-job", 64, 4});
        },
        ErrorKind::kInvalidArgument, {"already set"});
    bso.on_train_begin();
    rig.clock->advance_s(2.0);
    bso.on_evaluate(0.4);
  }
  EXPECT_TRUE(peer.requests("GET", "/jobs/batch_size").empty());
  const auto reports = peer.requests("POST", "/report");
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(json::parse(reports[0].body)["trial_number"], 3);
  EXPECT_TRUE(peer.requests("PATCH", "/trials").empty());
}

TEST(BsoClient, AStrangeBatchSizeIsAnError) {
  Peer peer;
  Rig rig(1, "v100");
  peer.script("GET /jobs/batch_size",
              {{200, R"({"job_id": "mnist-job", "batch_size": 48, "trial_number": 1})"}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), FastRetries().options());
  expect_error([&] { bso.get_batch_size(); }, ErrorKind::kUnknown,
               {"GET /jobs/batch_size", "strange", "batch size 48", "32, 64, 128, 256"});
  EXPECT_FALSE(bso.trial().has_value());
}

}  // namespace
