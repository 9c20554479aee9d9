// The batch-size-optimizer server over real HTTP: the wire-protocol doc's peer scenario (§5),
// then every bad input of the issue.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "server/server_harness.hpp"

namespace {

using nlohmann::json;
using zeus::test::peer_job_spec;
using zeus::test::ServerHarness;

// The peer scenario's synthetic workload: seconds per epoch, watts, epochs to reach 0.9
using Workload = zeus::test::PeerWorkload;

// One training run as the reference client drives it; returns "<bs>:<c|t|a><epochs>".
std::string run_once(const ServerHarness& server, const std::string& job_id, int abort_after,
                     int& requests) {
  auto reg = server.request("POST", "/jobs", peer_job_spec(job_id).dump());
  ++requests;
  EXPECT_TRUE(reg && (reg->status == 200 || reg->status == 201));
  auto got = server.request("GET", "/jobs/batch_size?job_id=" + job_id);
  ++requests;
  EXPECT_EQ(got->status, 200) << got->body;
  const json trial = json::parse(got->body);
  const int batch_size = trial.at("batch_size").get<int>();
  const Workload& w = zeus::test::peer_workload().at(batch_size);
  std::string outcome;
  for (int epoch = 1;; ++epoch) {
    if (abort_after != 0 && epoch > abort_after) {
      outcome = std::to_string(batch_size) + ":a" + std::to_string(abort_after);
      break;
    }
    const bool reached = w.epochs_to_target != 0 && epoch >= w.epochs_to_target;
    json report = trial;
    report["time"] = w.epoch_s * epoch;
    report["energy"] = w.epoch_s * w.power_w * epoch;
    report["metric"] = reached ? 0.9 : (w.epochs_to_target == 0 ? 0.85 : 0.5);
    report["current_epoch"] = epoch;
    auto res = server.request("POST", "/report", report.dump());
    ++requests;
    EXPECT_EQ(res->status, 200) << res->body;
    const json answer = json::parse(res->body);
    if (answer.at("stop_train").get<bool>()) {
      outcome = std::to_string(batch_size) + ":" +
                (answer.at("converged").get<bool>() ? "c" : "t") + std::to_string(epoch);
      break;
    }
  }
  auto end = server.request("PATCH", "/trials", trial.dump());
  ++requests;
  EXPECT_EQ(end->status, 200);
  EXPECT_EQ(end->body, "null");
  return outcome;
}

TEST(BsoHttp, PeerScenarioMatchesTheReferenceSequence) {
  ServerHarness server;
  int requests = 0;
  std::vector<std::string> outcomes;
  for (int run = 1; run <= 14; ++run) {
    outcomes.push_back(run_once(server, "peer-scenario", run == 2 ? 3 : 0, requests));
  }
  const std::vector<std::string> expected = {"128:c10", "64:a3",   "64:c8",   "32:t8",   "256:c16",
                                             "512:t30", "128:c10", "64:c8",   "256:c16", "128:c10",
                                             "128:c10", "128:c10", "128:c10", "128:c10"};
  EXPECT_EQ(outcomes, expected);

  auto state = server.request("GET", "/jobs/peer-scenario");
  ASSERT_EQ(state->status, 200);
  const json job = json::parse(state->body);
  EXPECT_EQ(job.at("stage"), "MAB");
  EXPECT_EQ(job.at("min_cost").get<double>(), 44000.0);
  EXPECT_EQ(job.at("trials").size(), 14u);
  EXPECT_EQ(job.at("trials")[1].at("status"), "Failed");
  EXPECT_EQ(job.at("trials")[3].at("converged"), false);
  std::vector<int> arms;
  for (const json& arm : job.at("arms")) {
    arms.push_back(arm.at("batch_size").get<int>());
  }
  EXPECT_EQ(arms, (std::vector<int>{64, 128, 256}));
}

TEST(BsoHttp, EarlyStopMessageKeepsTheReferenceWording) {
  ServerHarness server;
  int requests = 0;
  run_once(server, "peer-words", 0, requests);  // 128 converges: min cost 44000
  run_once(server, "peer-words", 3, requests);  // 64 aborted
  run_once(server, "peer-words", 0, requests);  // 64 converges
  // Run 4 explores 32, whose cost passes 2 x 44000 at epoch 8.
  auto got = server.request("GET", "/jobs/batch_size?job_id=peer-words");
  json report = json::parse(got->body);
  ASSERT_EQ(report.at("batch_size"), 32);
  report["time"] = 24.0 * 8;
  report["energy"] = 24.0 * 250 * 8;
  report["metric"] = 0.5;
  report["current_epoch"] = 8;
  auto res = server.request("POST", "/report", report.dump());
  const json answer = json::parse(res->body);
  EXPECT_EQ(answer.at("stop_train"), true);
  EXPECT_EQ(answer.at("converged"), false);
  EXPECT_EQ(answer.at("message").get<std::string>(),
            "Batch Size(32) exceeded the cost upper bound: current cost(91200.0) >\n"
            "                    beta_knob(2.0)*min_cost(44000.0)");
}

TEST(BsoHttp, RegistrationAnswers201Then200Then409) {
  ServerHarness server;
  const auto first = server.request("POST", "/jobs", peer_job_spec("peer-a").dump());
  EXPECT_EQ(first->status, 201);
  EXPECT_EQ(first->get_header_value("Content-Type"), "application/json");
  // Same spec with numbers as strings, ints as floats, another key order, an extra field, and
  // the batch sizes unsorted: still identical.
  json same = peer_job_spec("peer-a");
  same["max_power"] = "700";
  same["max_epochs"] = 30.7;
  same["batch_sizes"] = {1024, 512, 256, 128, 64, 32, 16};
  same["unknown_field"] = 1;
  const auto second = server.request("POST", "/jobs", same.dump());
  EXPECT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(second->body, first->body);
  json other = peer_job_spec("peer-a");
  other["number_of_gpus"] = 2;
  const auto third = server.request("POST", "/jobs", other.dump());
  EXPECT_EQ(third->status, 409);
  EXPECT_NE(third->body.find("JobSpec doesn't match"), std::string::npos);
  EXPECT_TRUE(json::parse(third->body).contains("message"));
}

TEST(BsoHttp, NullJobIdGetsAFreshGeneratedId) {
  ServerHarness server;
  json spec = peer_job_spec();
  spec["job_id"] = nullptr;
  const auto a = server.request("POST", "/jobs", spec.dump());
  const auto b = server.request("POST", "/jobs", spec.dump());
  ASSERT_EQ(a->status, 201);
  ASSERT_EQ(b->status, 201);
  const std::string id_a = json::parse(a->body).at("job_id");
  const std::string id_b = json::parse(b->body).at("job_id");
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ(id_a.rfind("peer-", 0), 0u);
  EXPECT_EQ(id_a.size(), std::string("peer-").size() + 8);
}

json detail_of(const httplib::Result& res) {
  return json::parse(res->body).at("detail");
}

TEST(BsoHttp, BadInputGetsPrecise4xxAndTheServerKeepsServing) {
  ServerHarness server;
  // Malformed JSON.
  auto res = server.request("POST", "/jobs", "{\"max_power\": ");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res)[0].at("type"), "value_error.jsondecode");
  // Empty body.
  res = server.request("POST", "/report", "");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res)[0].at("loc"), json({"body"}));
  // Not an object.
  res = server.request("POST", "/jobs", "[1, 2]");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res)[0].at("type"), "type_error.dict");
  // Wrong types.
  json spec = peer_job_spec("peer-bad");
  spec["number_of_gpus"] = "two";
  spec["batch_sizes"] = {16, "x"};
  spec["higher_is_better_metric"] = "maybe";
  res = server.request("POST", "/jobs", spec.dump());
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res).size(), 3u) << res->body;
  // Default batch size not in the list (the reference's root-validator message).
  spec = peer_job_spec("peer-bad");
  spec["default_batch_size"] = 3;
  res = server.request("POST", "/jobs", spec.dump());
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res)[0].at("msg"),
            "Default BS(3) not in batch_sizes([16, 32, 64, 128, 256, 512, 1024]).");
  EXPECT_EQ(detail_of(res)[0].at("loc"), json({"body", "__root__"}));
  // eta out of range, beta <= 0, zero pruning rounds, job_id without the prefix.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"eta_knob", 1.5},
                                                 {"beta_knob", 0.0},
                                                 {"num_pruning_rounds", 0},
                                                 {"max_power", -1},
                                                 {"job_id", "other-1"},
                                                 {"batch_sizes", json::array()}}) {
    spec = peer_job_spec("peer-bad");
    spec[key] = value;
    res = server.request("POST", "/jobs", spec.dump());
    EXPECT_EQ(res->status, 422) << key << ": " << res->body;
  }
  // Unknown job, unknown trial, missing query parameter.
  res = server.request("GET", "/jobs/batch_size?job_id=nobody");
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body).at("message"),
            "Unknown job(nobody). Please register the job first");
  res = server.request("GET", "/jobs/batch_size");
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(detail_of(res)[0].at("loc"), json({"query", "job_id"}));
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-ok").dump())->status, 201);
  json report = {{"job_id", "peer-ok"}, {"batch_size", 128}, {"trial_number", 7}, {"time", 1.0},
                 {"energy", 1.0},       {"metric", 0.1},     {"current_epoch", 1}};
  res = server.request("POST", "/report", report.dump());
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("Unknown trial job_id='peer-ok'"), std::string::npos);
  report["job_id"] = "nobody";
  res = server.request("POST", "/report", report.dump());
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body).at("message"), "Unknown job nobody");
  // Negative or non-finite measurements.
  report["job_id"] = "peer-ok";
  report["time"] = -1.0;
  res = server.request("POST", "/report", report.dump());
  EXPECT_EQ(res->status, 422);
  res =
      server.request("PATCH", "/trials",
                     json{{"job_id", "peer-ok"}, {"batch_size", 128}, {"trial_number", 3}}.dump());
  EXPECT_EQ(res->status, 404);
  EXPECT_NE(res->body.find("Could not find the trial"), std::string::npos);
  // Routing errors.
  res = server.request("GET", "/nowhere");
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->body, R"({"detail":"Not Found"})");
  res = server.request("GET", "/report");
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->body, R"({"detail":"Method Not Allowed"})");
  // Oversized body.
  res = server.request("POST", "/report", std::string(2 << 20, ' '));
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(json::parse(res->body).at("detail"), "Request body too large");
  // Still serving.
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);
  EXPECT_EQ(server.request("DELETE", "/jobs?job_id=peer-ok")->body, "null");
  res = server.request("DELETE", "/jobs?job_id=peer-ok");
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body).at("message"), "No job was deleted.");
}

TEST(BsoHttp, DuplicateSlashesAreCollapsed) {
  ServerHarness server;
  EXPECT_EQ(server.request("POST", "//jobs", peer_job_spec("peer-s").dump())->status, 201);
  EXPECT_EQ(server.request("GET", "//jobs/batch_size?job_id=peer-s")->status, 200);
}

TEST(BsoHttp, ALateConcurrentTrialDoesNotFailItsClient) {
  // Two runs in flight during pruning: the second gets a Concurrent trial. It reports after
  // the job has switched to the bandit, which the reference rejects with 400.
  ServerHarness server;
  json spec = peer_job_spec("peer-late");
  spec["batch_sizes"] = {64, 128};
  spec["num_pruning_rounds"] = 1;
  ASSERT_EQ(server.request("POST", "/jobs", spec.dump())->status, 201);
  const json first = json::parse(server.request("GET", "/jobs/batch_size?job_id=peer-late")->body);
  const json concurrent =
      json::parse(server.request("GET", "/jobs/batch_size?job_id=peer-late")->body);
  EXPECT_EQ(concurrent.at("batch_size"), 128);  // the min-cost batch size so far (b0)
  auto finish = [&](json trial, double cost_per_epoch) {
    trial["time"] = cost_per_epoch / 700.0;
    trial["energy"] = cost_per_epoch;
    trial["metric"] = 0.95;
    trial["current_epoch"] = 1;
    return server.request("POST", "/report", trial.dump());
  };
  ASSERT_EQ(finish(first, 1000.0)->status, 200);
  const json second = json::parse(server.request("GET", "/jobs/batch_size?job_id=peer-late")->body);
  EXPECT_EQ(second.at("batch_size"), 64);
  ASSERT_EQ(finish(second, 900.0)->status, 200);
  const json mab = json::parse(server.request("GET", "/jobs/batch_size?job_id=peer-late")->body);
  EXPECT_EQ(json::parse(server.request("GET", "/jobs/peer-late")->body).at("stage"), "MAB");
  (void)mab;
  const auto late = finish(concurrent, 1100.0);
  EXPECT_EQ(late->status, 200) << late->body;
  EXPECT_EQ(json::parse(late->body).at("converged"), true);
}

TEST(BsoHttp, StateSurvivesARestartOfTheServer) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-restart");
  const std::string url = "sqlite:///" + (dir / "bso.db").string();
  int requests = 0;
  {
    ServerHarness server(url);
    run_once(server, "peer-restart", 0, requests);
    run_once(server, "peer-restart", 3, requests);
  }
  {
    ServerHarness server(url);
    // Run 3 re-explores 64 (run 2 was aborted), as without the restart.
    EXPECT_EQ(run_once(server, "peer-restart", 0, requests), "64:c8");
  }
  std::filesystem::remove_all(dir);
}

TEST(BsoHttp, BearerTokenWhenConfigured) {
  zeus::server::HttpServerOptions options;
  options.token = "0123456789abcdef-secret";
  ServerHarness server({}, options);
  auto res = server.request("POST", "/jobs", peer_job_spec("peer-t").dump());
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(res->get_header_value("WWW-Authenticate"), "Bearer");
  httplib::Client client("127.0.0.1", server.port());
  client.set_bearer_token_auth("wrong-token");
  EXPECT_EQ(client.Get("/jobs/batch_size?job_id=x")->status, 401);
  client.set_bearer_token_auth(options.token.c_str());
  EXPECT_EQ(client.Post("/jobs", peer_job_spec("peer-t").dump(), "")->status, 201);
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);  // health needs no token
}

}  // namespace
