// The batch-size-optimizer server over real HTTP: the wire-protocol doc's peer scenario (§5),
// then every bad input of the issue.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "server/server_harness.hpp"
#include "support/file_size_limit.hpp"

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
  EXPECT_EQ(
      json::parse(res->body).at("detail").get<std::string>().rfind("Request body too large", 0),
      0u);
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

// Every answer must be JSON (never a 500 from a serialiser choking on client bytes).
json body_json(const httplib::Result& res) {
  EXPECT_TRUE(res) << "no answer";
  return json::parse(res->body);
}

// The first entry of a 422's detail list whose loc is `loc`, or null.
json detail_at(const httplib::Result& res, const json& loc) {
  const json answer = body_json(res);
  for (const json& entry : answer.at("detail")) {
    if (entry.at("loc") == loc) {
      return entry;
    }
  }
  ADD_FAILURE() << "no detail at " << loc.dump() << " in " << res->body;
  return nullptr;
}

TEST(BsoHttp, NumbersBeyondADoubleAre422NamingWhereTheyAre) {
  ServerHarness server;
  std::string text = peer_job_spec("peer-big").dump();
  text.replace(text.find("700.0"), 5, "1e999");
  auto res = server.request("POST", "/jobs", text);
  ASSERT_EQ(res->status, 422) << res->body;
  json entry = detail_at(res, {"body", "max_power"});
  EXPECT_EQ(entry.at("type"), "value_error.number.out_of_range");
  EXPECT_NE(entry.at("msg").get<std::string>().find("1e999 is out of range"), std::string::npos)
      << entry;
  // Inside a list, negative, and in a report.
  res = server.request("POST", "/jobs", R"({"batch_sizes": [16, -1e400]})");
  ASSERT_EQ(res->status, 422) << res->body;
  EXPECT_EQ(detail_at(res, {"body", "batch_sizes", 1}).at("type"),
            "value_error.number.out_of_range");
  res = server.request("POST", "/report", R"({"job_id": "x", "time": 1e999})");
  ASSERT_EQ(res->status, 422) << res->body;
  detail_at(res, {"body", "time"});
  res = server.request("POST", "/report", "1e999");
  ASSERT_EQ(res->status, 422) << res->body;
  detail_at(res, {"body"});
  // In a string, and integers beyond 64 bits.
  json spec = peer_job_spec("peer-big");
  spec["max_power"] = "1e999";
  spec["mab_seed"] = 18446744073709551615ULL;
  res = server.request("POST", "/jobs", spec.dump());
  ASSERT_EQ(res->status, 422) << res->body;
  EXPECT_EQ(detail_at(res, {"body", "max_power"}).at("type"), "value_error.number.out_of_range");
  EXPECT_EQ(detail_at(res, {"body", "mab_seed"}).at("type"), "value_error.number.not_le");
  EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-big").dump())->status, 201);
}

TEST(BsoHttp, InvalidUtf8Is422NamingTheField) {
  ServerHarness server;
  // In a string value.
  std::string text = peer_job_spec("peer-utf").dump();
  text.replace(text.find("\"peer-utf\""), 10, "\"peer-\xff\"");
  auto res = server.request("POST", "/jobs", text);
  ASSERT_EQ(res->status, 422) << res->body;
  json entry = detail_at(res, {"body", "job_id"});
  EXPECT_EQ(entry.at("type"), "value_error.str.utf8");
  EXPECT_NE(entry.at("msg").get<std::string>().find("byte 0xFF"), std::string::npos) << entry;
  // In a key: the key as far as it is readable.
  res = server.request("POST", "/jobs",
                       "{\"job_\xff"
                       "id\": \"x\"}");
  ASSERT_EQ(res->status, 422) << res->body;
  EXPECT_EQ(detail_at(res, {"body", "job_\xEF\xBF\xBD"}).at("type"), "value_error.str.utf8");
  // Inside a list, in a report.
  res = server.request("POST", "/report", "{\"job_id\": \"a\", \"x\": [1, \"\xc3\x28\"]}");
  ASSERT_EQ(res->status, 422) << res->body;
  detail_at(res, {"body", "x", 1});
  // A syntax error whose text quotes the bad bytes is still a JSON answer.
  res = server.request("POST", "/jobs", "\xff\xfe");
  ASSERT_EQ(res->status, 422) << res->body;
  EXPECT_EQ(body_json(res).at("detail")[0].at("type"), "value_error.jsondecode");
  // In the query string and the path (the handler gets the percent-decoded bytes).
  res = server.request("GET", "/jobs/batch_size?job_id=%ff");
  ASSERT_EQ(res->status, 422) << res->body;
  EXPECT_EQ(detail_at(res, {"query", "job_id"}).at("type"), "value_error.str.utf8");
  res = server.request("DELETE", "/jobs?job_id=ab%c3");
  ASSERT_EQ(res->status, 422) << res->body;
  detail_at(res, {"query", "job_id"});
  res = server.request("GET", "/jobs/%ff%fe");
  ASSERT_EQ(res->status, 422) << res->body;
  detail_at(res, {"path", "job_id"});
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);
}

TEST(BsoHttp, AReportWhoseCostOverflowsIs422NamingTimeAndEnergy) {
  ServerHarness server;
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-cost").dump())->status, 201);
  json report = body_json(server.request("GET", "/jobs/batch_size?job_id=peer-cost"));
  report["metric"] = 0.5;
  report["current_epoch"] = 1;
  for (const double value : {1.7e308, 1e200}) {
    report["time"] = value;
    report["energy"] = value;
    const auto res = server.request("POST", "/report", report.dump());
    ASSERT_EQ(res->status, 422) << res->body;
    const json time = detail_at(res, {"body", "time"});
    detail_at(res, {"body", "energy"});
    EXPECT_NE(time.at("msg").get<std::string>().find("cost"), std::string::npos) << time;
    EXPECT_NE(time.at("msg").get<std::string>().find(value > 1e300 ? "not a finite number"
                                                                   : "above the limit 1e+100"),
              std::string::npos)
        << time;
  }
  // The job took no harm: a sane report goes through and the state reads back.
  report["time"] = 10.0;
  report["energy"] = 4000.0;
  EXPECT_EQ(server.request("POST", "/report", report.dump())->status, 200);
  EXPECT_EQ(server.request("GET", "/jobs/peer-cost")->status, 200);
}

TEST(BsoHttp, JobIdsThatCouldNotBeReadBackAreRefusedAtRegistration) {
  ServerHarness server;
  const std::vector<std::string> bad_ids = {
      "peer/a",
      "peer\nb",
      std::string("peer\0c", 6),
      "peer\x7f",
      "peer\xc2\x85",  // U+0085, a C1 control
      "",
      "peer-" + std::string(zeus::bso::kMaxJobIdBytes - 4, 'x'),  // 257 bytes
  };
  for (const std::string& id : bad_ids) {
    const auto res = server.request("POST", "/jobs", peer_job_spec(id).dump());
    ASSERT_EQ(res->status, 422) << json(id).dump() << ": " << res->body;
    const json entry = detail_at(res, {"body", "job_id"});
    EXPECT_EQ(entry.at("type"), "value_error.job_id") << entry;
    EXPECT_EQ(entry.at("msg").get<std::string>().rfind("job_id ", 0), 0u) << entry;
  }
  // Prefixes of generated ids.
  json spec = peer_job_spec();
  spec["job_id"] = nullptr;
  for (const std::string& prefix :
       {std::string("a/b"), std::string(zeus::bso::kMaxJobIdPrefixBytes + 1, 'p')}) {
    spec["job_id_prefix"] = prefix;
    const auto res = server.request("POST", "/jobs", spec.dump());
    ASSERT_EQ(res->status, 422) << res->body;
    detail_at(res, {"body", "job_id_prefix"});
  }
  // The longest ids, and ids beyond ASCII, register and read back.
  const std::string longest = "peer-" + std::string(zeus::bso::kMaxJobIdBytes - 5, 'x');
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec(longest).dump())->status, 201);
  EXPECT_EQ(server.request("GET", "/jobs/" + longest)->status, 200);
  spec["job_id_prefix"] = std::string(zeus::bso::kMaxJobIdPrefixBytes, 'p');
  const auto generated = server.request("POST", "/jobs", spec.dump());
  ASSERT_EQ(generated->status, 201) << generated->body;
  const std::string id = body_json(generated).at("job_id");
  EXPECT_EQ(id.size(), zeus::bso::kMaxJobIdBytes);
  EXPECT_EQ(server.request("GET", "/jobs/" + id)->status, 200);
  const std::string unicode = "peer-\xc3\xbcnicode-\xe2\x82\xac";
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec(unicode).dump())->status, 201);
  EXPECT_EQ(server.request("GET", "/jobs/" + unicode)->status, 200);
}

TEST(BsoHttp, HealthzIs503WhileWritesFailAndOkOnceTheyWorkAgain) {
  ServerHarness server;
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-full").dump())->status, 201);
  EXPECT_EQ(server.request("GET", "/healthz")->body, R"({"status":"ok"})");
  const std::filesystem::path db = server.dir() / "bso.db";
  {
    zeus::testing::FileSizeLimit full(
        zeus::testing::FileSizeLimit::largest({db, db.string() + "-wal"}) + 100);
    int status = 0;
    for (int i = 0; i < 200 && status != 503; ++i) {
      status =
          server.request("POST", "/jobs", peer_job_spec("peer-full-" + std::to_string(i)).dump())
              ->status;
    }
    ASSERT_EQ(status, 503) << "no write failed";
    for (int probe = 0; probe < 2; ++probe) {
      const auto health = server.request("GET", "/healthz");
      EXPECT_EQ(health->status, 503) << health->body;
      const json answer = body_json(health);
      EXPECT_EQ(answer.at("status"), "unavailable");
      EXPECT_NE(answer.at("storage").get<std::string>().find(db.string()), std::string::npos)
          << answer;
    }
    full.lift();
  }
  const auto health = server.request("GET", "/healthz");
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(health->body, R"({"status":"ok"})");
  EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-full-after").dump())->status, 201);
  EXPECT_EQ(server.request("GET", "/jobs/peer-full")->status, 200);
}

// The same on a real full file system (a 2 MiB tmpfs; skipped where it cannot be mounted): a
// one-page write probe fits in the WAL space the failed write left, so health said ok while
// every real write got 503.
TEST(BsoHttp, HealthzIs503OnAFullFileSystemAndOkOnceThereIsRoom) {
  const auto dir = zeus::test::make_temp_dir("zeus-bso-tmpfs");
  if (std::system(("mount -t tmpfs -o size=2m tmpfs '" + dir.string() + "' 2>/dev/null").c_str()) !=
      0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot mount a tmpfs here (not root?)";
  }
  // Unmounted however the test ends (after the server, declared below, has closed the file).
  struct Unmount {
    std::filesystem::path dir;
    ~Unmount() {
      EXPECT_EQ(std::system(("umount '" + dir.string() + "'").c_str()), 0);
      std::filesystem::remove_all(dir);
    }
  } unmount{dir};
  {
    const auto filler = dir / "filler";
    {
      std::ofstream out(filler);
      out << std::string(1200 << 10, 'x');
    }
    zeus::server::HttpServerOptions options;
    options.max_registrations_per_minute = 0;
    ServerHarness server("sqlite:///" + (dir / "bso.db").string(), options);
    int status = 0;
    for (int i = 0; i < 500 && status != 503; ++i) {
      auto spec = peer_job_spec("peer-fs-" + std::to_string(i));
      spec["batch_sizes"] = json::array();
      for (int b = 1; b <= 300; ++b) {
        spec["batch_sizes"].push_back(b);
      }
      status = server.request("POST", "/jobs", spec.dump())->status;
    }
    ASSERT_EQ(status, 503) << "the file system never filled";
    // Full for the smallest registration too.
    status = 0;
    for (int i = 0; i < 500 && status != 503; ++i) {
      status =
          server.request("POST", "/jobs", peer_job_spec("peer-fs-s" + std::to_string(i)).dump())
              ->status;
    }
    ASSERT_EQ(status, 503) << "small writes never failed";
    for (int probe = 0; probe < 2; ++probe) {
      const auto health = server.request("GET", "/healthz");
      EXPECT_EQ(health->status, 503) << health->body;
      EXPECT_NE(health->body.find("KiB free"), std::string::npos) << health->body;
      EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-fs-x").dump())->status, 503);
    }
    std::filesystem::remove(filler);
    const auto health = server.request("GET", "/healthz");
    EXPECT_EQ(health->status, 200) << health->body;
    EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-fs-after").dump())->status, 201);
  }
}

}  // namespace
