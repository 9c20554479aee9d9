// The C++ client end to end against the real server in-process (SQLite, HTTP on a loopback
// port): the wire-protocol doc's peer scenario (§5) driven through BatchSizeOptimizer on a
// simulated H200 whose power and time come from the scenario's synthetic workload, then the
// server's own errors as the client reports them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server/server_harness.hpp"
#include "support/expect_error.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/runtime/batch_size_optimizer.hpp"

namespace {

using zeus::ErrorKind;
using zeus::bso::BatchSizeOptimizer;
using zeus::bso::BsoClient;
using zeus::bso::ClientOptions;
using zeus::bso::JobSpec;
using zeus::bso::TrainFailedError;
using zeus::test::ServerHarness;
using zeus::testing::expect_error;

using Workload = zeus::test::PeerWorkload;

struct Rig {
  std::shared_ptr<zeus::ManualClock> clock = std::make_shared<zeus::ManualClock>();
  std::shared_ptr<zeus::device::SimulatedGpu> gpu;
  zeus::device::Gpus gpus;
  std::shared_ptr<zeus::monitor::ZeusMonitor> monitor;

  Rig() {
    gpu = std::make_shared<zeus::device::SimulatedGpu>(zeus::device::simulated_gpu_model("h200"), 0,
                                                       clock);
    gpus = zeus::device::Gpus({gpu}, {0});
    zeus::monitor::ZeusMonitorOptions options;
    options.clock = clock;
    options.cpu_indices = std::vector<int>{};
    options.start_sampler_thread = false;
    monitor = std::make_shared<zeus::monitor::ZeusMonitor>(
        gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{}, options);
  }
  // Makes the GPU draw `power_w` (idle 75 W, full load 700 W).
  void draw(double power_w) {
    const auto& model = gpu->model();
    gpu->set_utilization((power_w * 1000.0 - model.idle_power_mw) /
                         (model.peak_power_mw - model.idle_power_mw));
  }
};

// The scenario's job, as the reference driver registers it (the GPU part is filled in by the
// client: 700 W, 1 GPU, "NVIDIA H200").
JobSpec peer_job() {
  JobSpec spec;
  spec.job_id = "peer-scenario";
  spec.job_id_prefix = "peer";
  spec.batch_sizes = {16, 32, 64, 128, 256, 512, 1024};
  spec.default_batch_size = 128;
  spec.eta_knob = 0.5;
  spec.beta_knob = 2.0;
  spec.target_metric = 0.9;
  spec.max_epochs = 30;
  spec.num_pruning_rounds = 2;
  spec.mab_seed = 123456;
  return spec;
}

ClientOptions quick() {
  ClientOptions options;
  options.retry.max_attempts = 2;
  options.retry.initial_delay_s = 0.01;
  options.env = [](const std::string&) { return std::nullopt; };
  return options;
}

// One training run; returns "<bs>:<c|t|a><epochs>" like the server tests.
std::string run_once(const ServerHarness& server, Rig& rig, int abort_after) {
  BatchSizeOptimizer bso(rig.monitor, rig.gpus, server.base_url(), peer_job(), quick());
  const int batch_size = bso.get_batch_size();
  const Workload& w = zeus::test::peer_workload().at(batch_size);
  rig.draw(w.power_w);
  bso.on_train_begin();
  for (int epoch = 1;; ++epoch) {
    if (abort_after != 0 && epoch > abort_after) {
      return std::to_string(batch_size) + ":a" + std::to_string(abort_after);
    }
    rig.clock->advance_s(w.epoch_s);
    const bool reached = w.epochs_to_target != 0 && epoch >= w.epochs_to_target;
    const double metric = reached ? 0.9 : (w.epochs_to_target == 0 ? 0.85 : 0.5);
    try {
      const auto response = bso.on_evaluate(metric);
      if (response.stop_train) {
        EXPECT_NEAR(bso.time_s(), w.epoch_s * epoch, 1e-6);
        EXPECT_NEAR(bso.energy_j(), w.epoch_s * w.power_w * epoch, 0.01);
        return std::to_string(batch_size) + ":c" + std::to_string(epoch);
      }
    } catch (const TrainFailedError& error) {
      EXPECT_TRUE(bso.training_finished());
      return std::to_string(batch_size) + ":t" + std::to_string(epoch);
    }
  }
}

TEST(BsoClientServer, PeerScenarioMatchesTheReferenceSequence) {
  ServerHarness server;
  Rig rig;
  std::vector<std::string> outcomes;
  for (int run = 1; run <= 14; ++run) {
    outcomes.push_back(run_once(server, rig, run == 2 ? 3 : 0));
  }
  const std::vector<std::string> expected = {"128:c10", "64:a3",   "64:c8",   "32:t8",   "256:c16",
                                             "512:t30", "128:c10", "64:c8",   "256:c16", "128:c10",
                                             "128:c10", "128:c10", "128:c10", "128:c10"};
  EXPECT_EQ(outcomes, expected);
  // Every run's trial was ended: none is left running (run 2's became failed).
  const auto state = server.service().job_state("peer-scenario");
  ASSERT_TRUE(state.has_value());
  int dispatched = 0;
  int failed = 0;
  for (const auto& trial : state->trials) {
    dispatched += trial.record.status == "Dispatched" ? 1 : 0;
    failed += trial.record.status == "Failed" ? 1 : 0;
  }
  EXPECT_EQ(dispatched, 0) << zeus::server::to_json(*state).dump(2);
  EXPECT_EQ(failed, 1) << zeus::server::to_json(*state).dump(2);
}

TEST(BsoClientServer, TheServersErrorsReachTheCaller) {
  ServerHarness server;
  Rig rig;
  BsoClient client(server.base_url() + "/", quick());
  expect_error([&] { client.next_batch_size("nobody"); }, ErrorKind::kInvalidArgument,
               {"GET /jobs/batch_size", "400", "nobody"});
  expect_error(
      [&] {
        client.end_trial({"nobody", 64, 1});
      },
      ErrorKind::kNotFound, {"PATCH /trials", "404"});
  EXPECT_FALSE(client.delete_job("nobody"));

  // Same job id, other GPU configuration: 409.
  { BatchSizeOptimizer first(rig.monitor, rig.gpus, server.base_url(), peer_job(), quick()); }
  Rig other;
  JobSpec changed = peer_job();
  changed.max_epochs = 31;
  expect_error(
      [&] {
        BatchSizeOptimizer second(other.monitor, other.gpus, server.base_url(), changed, quick());
      },
      ErrorKind::kInvalidArgument, {"POST /jobs", "409", "doesn't match"});
  // The identical spec registers again (200).
  BatchSizeOptimizer again(rig.monitor, rig.gpus, server.base_url(), peer_job(), quick());
  EXPECT_FALSE(again.job_created());
  EXPECT_TRUE(client.delete_job("peer-scenario"));
}

// JobSpec::policy: sent when set (our extension), the server's choice kept in job() otherwise.
TEST(BsoClientServer, AJobAsksForAPolicyByName) {
  ServerHarness server;  // default "zeus"
  Rig rig;
  JobSpec spec = peer_job();
  spec.policy = "low-regret";
  {
    BatchSizeOptimizer bso(rig.monitor, rig.gpus, server.base_url(), spec, quick());
    EXPECT_TRUE(bso.job_created());
    EXPECT_EQ(bso.job().policy, "low-regret");
    EXPECT_EQ(bso.get_batch_size(), 128);  // b0 first
  }
  // The same job without a policy (as a reference client registers it): the stored one.
  BatchSizeOptimizer again(rig.monitor, rig.gpus, server.base_url(), peer_job(), quick());
  EXPECT_FALSE(again.job_created());
  EXPECT_EQ(again.job().policy, "low-regret");
  EXPECT_EQ(server.service().job_state("peer-scenario")->spec.policy, "low-regret");
  // An unknown policy is the server's 422, naming the known ones.
  JobSpec unknown = peer_job();
  unknown.job_id = "peer-unknown";
  unknown.policy = "greedy";
  expect_error(
      [&] { BatchSizeOptimizer bad(rig.monitor, rig.gpus, server.base_url(), unknown, quick()); },
      ErrorKind::kInvalidArgument, {"POST /jobs", "422", "greedy", "low-regret"});
}

}  // namespace
