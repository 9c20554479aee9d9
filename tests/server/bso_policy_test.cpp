// The server's two batch-size policies: `--policy` as the default of a server, the JobSpec's
// `policy` member, "low-regret" jobs through the service and through real HTTP (reports out of
// order, a crashed trial, the per-trial threshold, GET /jobs), and states stored before there
// were two policies, which load as the paper's.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bso/wire_text.hpp"
#include "server/server_harness.hpp"
#include "server/service.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/optimizer/batch_size_policy.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace {

using nlohmann::json;
using zeus::bso::JobSpec;
using zeus::bso::TrialId;
using zeus::server::BsoService;
using zeus::server::JobState;
using zeus::test::peer_job_spec;
using zeus::test::peer_workload;
using zeus::test::ServerHarness;

JobSpec peer_spec(const std::string& job_id) {
  return zeus::bso::job_spec_from_json(peer_job_spec(job_id));
}

// Trains `trial` on the peer workload epoch by epoch, as a client does, until the server says
// stop; returns "<bs>:<c|t><epochs>" and the last answer's message.
std::string finish(BsoService& service, const TrialId& trial, std::string* message = nullptr) {
  const zeus::test::PeerWorkload& w = peer_workload().at(trial.batch_size);
  for (int epoch = 1;; ++epoch) {
    zeus::bso::TrainingResult result;
    result.trial = trial;
    result.time_s = w.epoch_s * epoch;
    result.energy_j = w.epoch_s * w.power_w * epoch;
    result.metric = w.epochs_to_target != 0 && epoch >= w.epochs_to_target ? 0.9 : 0.5;
    result.current_epoch = epoch;
    const zeus::bso::ReportResponse answer = service.report(result);
    if (answer.stop_train) {
      if (message != nullptr) {
        *message = answer.message;
      }
      service.end_trial(trial);  // what the client does at the end of every run: a no-op here
      return std::to_string(trial.batch_size) + ":" + (answer.converged ? "c" : "t") +
             std::to_string(epoch);
    }
  }
}

std::string run(BsoService& service, const std::string& job_id) {
  return finish(service, service.next_batch_size(job_id));
}

const zeus::server::TrialSummary& trial_of(const JobState& state, int trial_number) {
  for (const auto& trial : state.trials) {
    if (trial.record.trial_number == trial_number) {
      return trial;
    }
  }
  ADD_FAILURE() << "no trial " << trial_number;
  return state.trials.front();
}

struct Fixture {
  explicit Fixture(std::string default_policy = "low-regret")
      : service(*store, nullptr, std::move(default_policy)) {}
  std::unique_ptr<zeus::server::Store> store = zeus::server::open_store("sqlite://:memory:");
  BsoService service;
};

TEST(BsoPolicy, AnUnknownDefaultPolicyIsRefusedNamingTheKnownOnes) {
  auto store = zeus::server::open_store("sqlite://:memory:");
  try {
    BsoService service(*store, nullptr, "bandit");
    ADD_FAILURE() << "accepted";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    const std::string what = error.what();
    EXPECT_NE(what.find("bandit"), std::string::npos) << what;
    EXPECT_NE(what.find("low-regret"), std::string::npos) << what;
    EXPECT_NE(what.find("zeus"), std::string::npos) << what;
  }
}

TEST(BsoPolicy, ALowRegretJobFindsTheCheapestBatchSize) {
  Fixture f;
  const auto registered = f.service.register_job(peer_spec("peer-lr"));
  ASSERT_TRUE(registered.spec.policy.has_value());
  EXPECT_EQ(*registered.spec.policy, "low-regret");  // the server's default, stored
  std::vector<std::string> outcomes;
  for (int i = 0; i < 16; ++i) {
    outcomes.push_back(run(f.service, "peer-lr"));
  }
  EXPECT_EQ(outcomes.front(), "128:c10");  // b0 first, as in the paper
  const std::optional<JobState> state = f.service.job_state("peer-lr");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->spec.policy, "low-regret");
  EXPECT_EQ(state->min_cost_batch_size, 128);
  EXPECT_EQ(state->min_cost, 44000.0);
  EXPECT_EQ(state->stage, "MAB");
  EXPECT_TRUE(state->arms.empty());  // the paper's bandit view is for "zeus" jobs
  ASSERT_FALSE(state->arm_views.empty());
  EXPECT_FALSE(state->cost_threshold.has_value());
  // Once exploration is over the cheapest batch size runs most of the time.
  int best = 0;
  for (std::size_t i = outcomes.size() - 6; i < outcomes.size(); ++i) {
    best += outcomes[i] == "128:c10" ? 1 : 0;
  }
  EXPECT_GE(best, 4) << ::testing::PrintToString(outcomes);
  // Batch sizes that never reach the target are probed once, and never run again.
  std::map<int, int> failed_runs;
  for (const std::string& outcome : outcomes) {
    if (outcome.find(":t") != std::string::npos) {
      ++failed_runs[std::stoi(outcome)];
    }
  }
  for (const auto& [batch_size, count] : failed_runs) {
    EXPECT_EQ(count, 1) << batch_size << ": " << ::testing::PrintToString(outcomes);
  }
}

TEST(BsoPolicy, ReportsOutOfOrderAndACrashedTrial) {
  Fixture f;
  f.service.register_job(peer_spec("peer-order"));
  EXPECT_EQ(run(f.service, "peer-order"), "128:c10");
  // Three runs at once; the last dispatched reports first, the middle one crashes.
  const TrialId first = f.service.next_batch_size("peer-order");
  const TrialId second = f.service.next_batch_size("peer-order");
  const TrialId third = f.service.next_batch_size("peer-order");
  EXPECT_EQ(std::set<int>({first.trial_number, second.trial_number, third.trial_number}).size(),
            3u);
  {
    // Each running trial shows the cost at which it will be stopped.
    const std::optional<JobState> state = f.service.job_state("peer-order");
    ASSERT_TRUE(state);
    for (const TrialId& trial : {first, second, third}) {
      EXPECT_TRUE(trial_of(*state, trial.trial_number).cost_threshold.has_value());
    }
  }
  finish(f.service, third);
  f.service.end_trial(second);  // the run died before reporting
  finish(f.service, first);
  const std::optional<JobState> state = f.service.job_state("peer-order");
  ASSERT_TRUE(state);
  EXPECT_EQ(trial_of(*state, first.trial_number).record.status, "Succeeded");
  EXPECT_EQ(trial_of(*state, second.trial_number).record.status, "Failed");
  EXPECT_EQ(trial_of(*state, third.trial_number).record.status, "Succeeded");
  for (const auto& trial : state->trials) {
    EXPECT_FALSE(trial.cost_threshold.has_value()) << "trial " << trial.record.trial_number;
  }
  // A crashed first probe of a batch size is forgotten: the walk probes it again.
  std::vector<int> later;
  for (int i = 0; i < 12; ++i) {
    later.push_back(std::stoi(run(f.service, "peer-order")));
  }
  if (trial_of(*state, second.trial_number).record.type == "Exploration") {
    EXPECT_NE(std::find(later.begin(), later.end(), second.batch_size), later.end())
        << second.batch_size << " not probed again: " << ::testing::PrintToString(later);
  }
  const std::optional<JobState> after = f.service.job_state("peer-order");
  EXPECT_EQ(after->min_cost_batch_size, 128);
}

TEST(BsoPolicy, TheEarlyStopMessageSaysWhatTheThresholdWas) {
  Fixture f;
  f.service.register_job(peer_spec("peer-stop"));
  std::string message;
  for (int i = 0; i < 8 && message.find("exceeded") == std::string::npos; ++i) {
    const TrialId trial = f.service.next_batch_size("peer-stop");
    const std::optional<double> threshold =
        trial_of(*f.service.job_state("peer-stop"), trial.trial_number).cost_threshold;
    finish(f.service, trial, &message);
    if (message.find("exceeded") != std::string::npos) {
      ASSERT_TRUE(threshold.has_value());
      const std::string head = "Batch Size(" + std::to_string(trial.batch_size) +
                               ") exceeded the cost upper bound: current cost(";
      const std::string tail = ") > cost_threshold(" + zeus::bso::python_float_repr(*threshold) +
                               "), the low-regret policy's limit for this trial";
      EXPECT_EQ(message.rfind(head, 0), 0u) << message;
      ASSERT_GE(message.size(), tail.size());
      EXPECT_EQ(message.substr(message.size() - tail.size()), tail) << message;
    }
  }
  EXPECT_NE(message.find("exceeded"), std::string::npos) << "no run was stopped early";
}

TEST(BsoPolicy, AJobAsksForAPolicyByNameAndReRegistrationComparesIt) {
  Fixture f("zeus");
  JobSpec spec = peer_spec("peer-named");
  spec.policy = "low-regret";
  auto result = f.service.register_job(spec);
  EXPECT_TRUE(result.created);
  EXPECT_EQ(result.spec.policy, "low-regret");
  // The same spec again, and the same without a policy (the reference's client): 200.
  EXPECT_FALSE(f.service.register_job(spec).created);
  result = f.service.register_job(peer_spec("peer-named"));
  EXPECT_FALSE(result.created);
  EXPECT_EQ(result.spec.policy, "low-regret");
  // Another policy by name is another job.
  spec.policy = "zeus";
  try {
    f.service.register_job(spec);
    ADD_FAILURE() << "accepted";
  } catch (const zeus::server::ServiceError& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kAlreadyExists);
    EXPECT_NE(std::string(error.what()).find("low-regret"), std::string::npos) << error.what();
  }
  // Without a policy, a job gets the server's default.
  result = f.service.register_job(peer_spec("peer-default"));
  EXPECT_EQ(result.spec.policy, "zeus");
  // An unknown name: 422 at ["body", "policy"], naming the known ones.
  spec = peer_spec("peer-unknown");
  spec.policy = "Zeus";
  try {
    f.service.register_job(spec);
    ADD_FAILURE() << "accepted";
  } catch (const zeus::bso::ValidationError& error) {
    ASSERT_EQ(error.errors().size(), 1u);
    EXPECT_EQ(error.errors()[0].loc, json({"body", "policy"}));
    EXPECT_NE(error.errors()[0].msg.find("low-regret"), std::string::npos);
  }
  EXPECT_FALSE(f.service.job_state("peer-unknown").has_value());
}

// The server measures a low-regret run's steady per-epoch cost from its last two cumulative
// reports (here the first epoch pays a profiling overhead, so cost / epochs would be too high),
// keeping a running trial's latest report in its row; a trial that crashes keeps none.
TEST(BsoPolicy, ALowRegretRunsEpochCostIsItsLastEpochs) {
  Fixture f;
  f.service.register_job(peer_spec("peer-epoch"));
  const TrialId trial = f.service.next_batch_size("peer-epoch");
  ASSERT_EQ(trial.batch_size, 128);
  // 128: 8 s and 400 W per epoch; the first epoch takes 8 s more (profiling).
  auto report = [&](int epoch, double metric) {
    zeus::bso::TrainingResult result;
    result.trial = trial;
    result.time_s = 8.0 * epoch + 8.0;
    result.energy_j = 400.0 * result.time_s;
    result.metric = metric;
    result.current_epoch = epoch;
    return f.service.report(result);
  };
  for (int epoch = 1; epoch < 10; ++epoch) {
    ASSERT_FALSE(report(epoch, 0.5).stop_train);
  }
  {
    const auto running = trial_of(*f.service.job_state("peer-epoch"), trial.trial_number);
    EXPECT_EQ(running.record.status, "Dispatched");
    EXPECT_EQ(running.record.epochs, 9);
    EXPECT_EQ(running.record.time_s, 80.0);
  }
  ASSERT_TRUE(report(10, 0.9).converged);
  std::optional<zeus::server::JobRecord> job;
  f.store->transact([&](zeus::server::StoreTransaction& tx) { job = tx.get_job("peer-epoch"); });
  const auto policy = zeus::optimizer::LowRegretPolicy::restore(job->policy_state);
  // One epoch: 0.5 x 8 s x 400 W + 0.5 x 700 W x 8 s.
  EXPECT_DOUBLE_EQ(policy.candidates().at(128).epoch_cost, 0.5 * 3200.0 + 0.5 * 700.0 * 8.0);

  // A trial that ran some epochs, then crashed: Failed, without measurements.
  const TrialId crashed = f.service.next_batch_size("peer-epoch");
  zeus::bso::TrainingResult result;
  result.trial = crashed;
  result.time_s = 10.0;
  result.energy_j = 3000.0;
  result.metric = 0.1;
  result.current_epoch = 1;
  ASSERT_FALSE(f.service.report(result).stop_train);
  f.service.end_trial(crashed);
  const auto failed = trial_of(*f.service.job_state("peer-epoch"), crashed.trial_number);
  EXPECT_EQ(failed.record.status, "Failed");
  EXPECT_FALSE(failed.record.time_s.has_value());
  EXPECT_FALSE(failed.record.epochs.has_value());
  EXPECT_FALSE(failed.cost.has_value());
}

// A job row as a server wrote it before there were two policies: its spec has no "policy" and
// its policy state no "policy" member.
zeus::server::JobRecord legacy_copy(const zeus::server::JobRecord& job, const std::string& id) {
  zeus::server::JobRecord legacy = job;
  legacy.spec.job_id = id;
  legacy.spec.policy.reset();
  json state = json::parse(job.policy_state);
  EXPECT_EQ(state.at("policy"), "zeus");
  state.erase("policy");
  legacy.policy_state = state.dump();
  return legacy;
}

TEST(BsoPolicy, AStateStoredBeforeThereWereTwoPoliciesLoadsAsThePapers) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-legacy");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  {
    auto store = zeus::server::open_store(url);
    BsoService service(*store, nullptr, "low-regret");  // a default that must not apply
    JobSpec spec = peer_spec("peer-now");
    spec.policy = "zeus";
    service.register_job(spec);
    for (int i = 0; i < 3; ++i) {
      run(service, "peer-now");
    }
    std::optional<zeus::server::JobRecord> now;
    store->transact([&](zeus::server::StoreTransaction& tx) { now = tx.get_job("peer-now"); });
    ASSERT_TRUE(now);
    store->transact([&](zeus::server::StoreTransaction& tx) {
      ASSERT_TRUE(tx.insert_job(legacy_copy(*now, "peer-old")));
    });
  }
  // A new server process on the file (the state is read back from the row).
  auto store = zeus::server::open_store(url);
  BsoService service(*store, nullptr, "low-regret");
  std::optional<zeus::server::JobRecord> old;
  store->transact([&](zeus::server::StoreTransaction& tx) { old = tx.get_job("peer-old"); });
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->spec.policy.has_value());
  EXPECT_EQ(old->policy_state.find("\"policy\""), std::string::npos);

  // The reference client re-registers it: the same job, shown as the paper's.
  const auto again = service.register_job(peer_spec("peer-old"));
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.spec.policy, "zeus");
  JobSpec other = peer_spec("peer-old");
  other.policy = "low-regret";
  EXPECT_THROW(service.register_job(other), zeus::server::ServiceError);
  const std::optional<JobState> state = service.job_state("peer-old");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->spec.policy, "zeus");
  EXPECT_TRUE(state->arm_views.empty());
  EXPECT_EQ(state->cost_threshold, 88000.0);  // beta x min cost, as before

  // It goes on exactly as the job it was copied from.
  for (int i = 0; i < 6; ++i) {
    const TrialId from_old = service.next_batch_size("peer-old");
    const TrialId from_now = service.next_batch_size("peer-now");
    EXPECT_EQ(from_old.batch_size, from_now.batch_size) << "run " << i;
    EXPECT_EQ(from_old.trial_number, from_now.trial_number) << "run " << i;
    EXPECT_EQ(finish(service, from_old), finish(service, from_now));
  }
  std::optional<zeus::server::JobRecord> updated;
  store->transact([&](zeus::server::StoreTransaction& tx) { updated = tx.get_job("peer-old"); });
  EXPECT_EQ(json::parse(updated->policy_state).at("policy"), "zeus");
  store.reset();
  std::filesystem::remove_all(dir);
}

// ---- Through real HTTP ----

json post_json(const ServerHarness& server, const std::string& path, const json& body,
               int expected_status) {
  auto res = server.request("POST", path, body.dump());
  EXPECT_TRUE(res);
  EXPECT_EQ(res->status, expected_status) << res->body;
  return json::parse(res->body);
}

// One training run as a client drives it over HTTP; returns "<bs>:<c|t><epochs>".
std::string http_run(const ServerHarness& server, const json& spec) {
  auto reg = server.request("POST", "/jobs", spec.dump());
  EXPECT_TRUE(reg && (reg->status == 200 || reg->status == 201));
  const std::string job_id = spec.at("job_id");
  auto got = server.request("GET", "/jobs/batch_size?job_id=" + job_id);
  EXPECT_EQ(got->status, 200) << got->body;
  const json trial = json::parse(got->body);
  const int batch_size = trial.at("batch_size").get<int>();
  const zeus::test::PeerWorkload& w = peer_workload().at(batch_size);
  for (int epoch = 1;; ++epoch) {
    json report = trial;
    report["time"] = w.epoch_s * epoch;
    report["energy"] = w.epoch_s * w.power_w * epoch;
    report["metric"] = w.epochs_to_target != 0 && epoch >= w.epochs_to_target ? 0.9 : 0.5;
    report["current_epoch"] = epoch;
    const json answer = post_json(server, "/report", report, 200);
    if (answer.at("stop_train").get<bool>()) {
      server.request("PATCH", "/trials", trial.dump());
      return std::to_string(batch_size) + ":" + (answer.at("converged").get<bool>() ? "c" : "t") +
             std::to_string(epoch);
    }
  }
}

TEST(BsoPolicyHttp, ALowRegretServerRunsTheReferenceClientsJobs) {
  ServerHarness server({}, {}, "low-regret");
  const json spec = peer_job_spec("peer-http");  // the reference's body: no "policy"
  const json created = post_json(server, "/jobs", spec, 201);
  EXPECT_EQ(created.at("policy"), "low-regret");
  std::vector<std::string> outcomes;
  for (int i = 0; i < 12; ++i) {
    outcomes.push_back(http_run(server, spec));
  }
  EXPECT_EQ(outcomes.front(), "128:c10");
  auto res = server.request("GET", "/jobs/peer-http");
  ASSERT_EQ(res->status, 200);
  const json job = json::parse(res->body);
  EXPECT_EQ(job.at("spec").at("policy"), "low-regret");
  EXPECT_EQ(job.at("min_cost_batch_size"), 128);
  EXPECT_EQ(job.at("stage"), "MAB");
  EXPECT_TRUE(job.at("cost_threshold").is_null());
  ASSERT_FALSE(job.at("arms").empty());
  for (const json& arm : job.at("arms")) {
    EXPECT_TRUE(arm.contains("batch_size"));
    EXPECT_TRUE(arm.contains("num_observations"));
    EXPECT_TRUE(arm.contains("mean_cost"));
    EXPECT_FALSE(arm.contains("param_mean"));
  }
  EXPECT_EQ(job.at("trials").size(), 12u);
}

TEST(BsoPolicyHttp, ThePolicyMemberOfAJobSpec) {
  ServerHarness server;  // default "zeus"
  json spec = peer_job_spec("peer-member");
  spec["policy"] = "low-regret";
  EXPECT_EQ(post_json(server, "/jobs", spec, 201).at("policy"), "low-regret");
  // The reference's body for the same job: 200, the job as stored.
  EXPECT_EQ(post_json(server, "/jobs", peer_job_spec("peer-member"), 200).at("policy"),
            "low-regret");
  spec["policy"] = "zeus";
  post_json(server, "/jobs", spec, 409);
  // Unknown names and non-strings are 422 at ["body", "policy"].
  for (const json& bad : {json("thompson"), json::array()}) {
    json body = peer_job_spec("peer-bad");
    body["policy"] = bad;
    const json answer = post_json(server, "/jobs", body, 422);
    ASSERT_EQ(answer.at("detail").size(), 1u) << answer;
    EXPECT_EQ(answer.at("detail")[0].at("loc"), json({"body", "policy"})) << answer;
  }
  json body = peer_job_spec("peer-bad");
  body["policy"] = "thompson";
  const json answer = post_json(server, "/jobs", body, 422);
  const std::string msg = answer.at("detail")[0].at("msg");
  EXPECT_NE(msg.find("\"zeus\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"low-regret\""), std::string::npos) << msg;
  // null: the server's default. A job on the paper's policy is answered as the reference
  // answers, without "policy" (the reference's clients compare the spec's fields).
  body["policy"] = nullptr;
  EXPECT_FALSE(post_json(server, "/jobs", body, 201).contains("policy"));
  // A paper job's GET /jobs/{id} is as before: the bandit's arms and the job's threshold.
  for (int i = 0; i < 10; ++i) {  // two pruning rounds, then the bandit
    http_run(server, peer_job_spec("peer-bad"));
  }
  const json job = json::parse(server.request("GET", "/jobs/peer-bad")->body);
  EXPECT_FALSE(job.at("spec").contains("policy"));  // as the reference shows it
  EXPECT_EQ(job.at("cost_threshold"), 88000.0);
  ASSERT_FALSE(job.at("arms").empty());
  EXPECT_TRUE(job.at("arms")[0].contains("param_mean"));
  EXPECT_FALSE(job.at("arms")[0].contains("mean_cost"));
  for (const json& trial : job.at("trials")) {
    EXPECT_FALSE(trial.contains("cost_threshold"));
  }
}

TEST(BsoPolicyHttp, ALowRegretJobGoesOnAfterARestart) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-policy-restart");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  json spec = peer_job_spec("peer-restart");
  spec["policy"] = "low-regret";
  std::vector<std::string> before;
  {
    ServerHarness server(url);
    for (int i = 0; i < 4; ++i) {
      before.push_back(http_run(server, spec));
    }
  }
  ServerHarness server(url);
  // The reference's body finds the stored job.
  EXPECT_EQ(post_json(server, "/jobs", peer_job_spec("peer-restart"), 200).at("policy"),
            "low-regret");
  for (int i = 0; i < 4; ++i) {
    http_run(server, peer_job_spec("peer-restart"));
  }
  const json job = json::parse(server.request("GET", "/jobs/peer-restart")->body);
  EXPECT_EQ(job.at("trials").size(), 8u);
  EXPECT_EQ(job.at("trials")[4].at("trial_number"), 5);
  EXPECT_EQ(job.at("min_cost_batch_size"), 128);
  server.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
