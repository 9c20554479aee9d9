// Bounds on what one client can make the BSO server hold or send (issue 27, item 5): GET /jobs
// in pages, a spec's list and text lengths, and the operator's quotas (--max-jobs,
// --max-registrations-per-minute) with their 429 answers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/peer_rate.hpp"
#include "server/server_harness.hpp"

namespace {

using nlohmann::json;
using zeus::test::peer_job_spec;
using zeus::test::ServerHarness;

json body_json(const httplib::Result& result) {
  return json::parse(result->body);
}

// Jobs put straight into the store: a listing test must not wait on thousands of requests.
void add_jobs(ServerHarness& server, int count) {
  const auto spec = zeus::bso::job_spec_from_json(peer_job_spec("peer-template"));
  server.store().transact([&](zeus::server::StoreTransaction& tx) {
    for (int i = 0; i < count; ++i) {
      zeus::server::JobRecord job;
      job.spec = spec;
      job.spec.job_id = "peer-many-" + std::to_string(100000 + i);
      job.stage = "Pruning";
      job.min_cost_batch_size = spec.default_batch_size;
      ASSERT_TRUE(tx.insert_job(job));
    }
  });
}

TEST(BsoLimits, JobListingsArePagesFollowedByTheirNextCursor) {
  ServerHarness server;
  for (const char* id : {"peer-c", "peer-a", "peer-b"}) {
    ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec(id).dump())->status, 201);
  }
  // A store smaller than a page answers as before: every id, no cursor.
  EXPECT_EQ(server.request("GET", "/jobs")->body, R"({"jobs":["peer-a","peer-b","peer-c"]})");
  const json first = body_json(server.request("GET", "/jobs?limit=2"));
  EXPECT_EQ(first, json::parse(R"({"jobs":["peer-a","peer-b"],"next":"peer-b"})"));
  EXPECT_EQ(server.request("GET", "/jobs?limit=2&after=peer-b")->body, R"({"jobs":["peer-c"]})");
  EXPECT_EQ(server.request("GET", "/jobs?limit=3")->body,
            R"({"jobs":["peer-a","peer-b","peer-c"]})");
  EXPECT_EQ(server.request("GET", "/jobs?after=peer-c")->body, R"({"jobs":[]})");
  for (const char* bad : {"0", "1001", "-1", "abc", "2x", ""}) {
    const auto answer = server.request("GET", std::string("/jobs?limit=") + bad);
    EXPECT_EQ(answer->status, 422) << bad;
    EXPECT_EQ(body_json(answer).at("detail").at(0).at("loc"), json::parse(R"(["query","limit"])"))
        << answer->body;
    EXPECT_NE(answer->body.find("1000"), std::string::npos) << answer->body;
  }
}

TEST(BsoLimits, AListingIsBoundedWhateverTheStoreHolds) {
  ServerHarness server;
  add_jobs(server, 2500);
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    const auto answer = server.request("GET", "/jobs" + (after.empty() ? "" : "?after=" + after));
    ASSERT_EQ(answer->status, 200);
    EXPECT_LT(answer->body.size(), zeus::server::kMaxJobsPage * 32);
    const json body = json::parse(answer->body);
    EXPECT_LE(body.at("jobs").size(), zeus::server::kMaxJobsPage);
    for (const auto& id : body.at("jobs")) {
      seen.push_back(id.get<std::string>());
    }
    if (!body.contains("next")) {
      break;
    }
    after = body.at("next").get<std::string>();
  }
  ASSERT_EQ(seen.size(), 2500u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

TEST(BsoLimits, ASpecsListsAndTextAreBoundedWith422NamingTheFieldAndLimit) {
  ServerHarness server;
  auto spec = peer_job_spec("peer-long");
  spec["batch_sizes"] = json::array();
  for (int i = 1; i <= 4097; ++i) {
    spec["batch_sizes"].push_back(i);
  }
  auto answer = server.request("POST", "/jobs", spec.dump());
  ASSERT_EQ(answer->status, 422) << answer->body;
  EXPECT_EQ(body_json(answer).at("detail").at(0).at("loc"),
            json::parse(R"(["body","batch_sizes"])"));
  EXPECT_NE(answer->body.find("at most 4096 items"), std::string::npos) << answer->body;
  EXPECT_LT(answer->body.size(), 1000u);  // the list is not echoed back

  spec["batch_sizes"].erase(spec["batch_sizes"].size() - 1);
  answer = server.request("POST", "/jobs", spec.dump());
  EXPECT_EQ(answer->status, 201) << answer->body.substr(0, 300);

  auto model = peer_job_spec("peer-model");
  model["gpu_model"] = std::string(257, 'x');
  answer = server.request("POST", "/jobs", model.dump());
  ASSERT_EQ(answer->status, 422) << answer->body;
  EXPECT_EQ(body_json(answer).at("detail").at(0).at("loc"), json::parse(R"(["body","gpu_model"])"));
  EXPECT_NE(answer->body.find("at most 256 characters"), std::string::npos) << answer->body;

  // The window is a list too: that many costs kept per batch size.
  auto window = peer_job_spec("peer-window");
  window["window_size"] = 1001;
  answer = server.request("POST", "/jobs", window.dump());
  ASSERT_EQ(answer->status, 422) << answer->body;
  EXPECT_EQ(body_json(answer).at("detail").at(0).at("loc"),
            json::parse(R"(["body","window_size"])"));
  EXPECT_NE(answer->body.find("less than or equal to 1000"), std::string::npos) << answer->body;
  window["window_size"] = 1000;
  EXPECT_EQ(server.request("POST", "/jobs", window.dump())->status, 201);
}

TEST(BsoLimits, MaxJobsRefusesNewJobsWith429ButNotReRegistrations) {
  ServerHarness server;
  server.service().set_max_jobs(2);
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-q1").dump())->status, 201);
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-q2").dump())->status, 201);
  auto answer = server.request("POST", "/jobs", peer_job_spec("peer-q3").dump());
  ASSERT_EQ(answer->status, 429) << answer->body;
  EXPECT_NE(body_json(answer).at("message").get<std::string>().find("--max-jobs"),
            std::string::npos);
  auto generated = peer_job_spec();
  generated["job_id"] = nullptr;
  EXPECT_EQ(server.request("POST", "/jobs", generated.dump())->status, 429);
  // A recurring job (the same spec again) is not a new one.
  EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-q1").dump())->status, 200);
  ASSERT_EQ(server.request("DELETE", "/jobs?job_id=peer-q2")->status, 200);
  EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-q3").dump())->status, 201);
}

TEST(BsoLimits, RegistrationsPerPeerAreRateLimitedWith429AndRetryAfter) {
  zeus::server::HttpServerOptions options;
  options.max_registrations_per_minute = 5;
  ServerHarness server({}, options);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(
        server.request("POST", "/jobs", peer_job_spec("peer-r" + std::to_string(i)).dump())->status,
        201);
  }
  const auto answer = server.request("POST", "/jobs", peer_job_spec("peer-r5").dump());
  ASSERT_EQ(answer->status, 429) << answer->body;
  EXPECT_TRUE(answer->has_header("Retry-After"));
  EXPECT_NE(answer->body.find("--max-registrations-per-minute"), std::string::npos);
  // Other routes are not counted.
  EXPECT_EQ(server.request("GET", "/jobs/batch_size?job_id=peer-r0")->status, 200);
}

TEST(BsoLimits, PeerRateRefillsOverAMinuteAndKeepsItsTableBounded) {
  using Clock = zeus::server::PeerRate::Clock;
  zeus::server::PeerRate rate(60);
  const Clock::time_point start{};
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(rate.take("10.0.0.1", start));
  }
  EXPECT_FALSE(rate.take("10.0.0.1", start));
  EXPECT_TRUE(rate.take("10.0.0.2", start));  // another peer has its own
  EXPECT_TRUE(rate.take("10.0.0.1", start + std::chrono::seconds(1)));
  EXPECT_FALSE(rate.take("10.0.0.1", start + std::chrono::seconds(1)));
  // More peers than the table holds, all busy: the newcomers share one bucket.
  zeus::server::PeerRate busy(1);
  for (std::size_t i = 0; i < zeus::server::PeerRate::kMaxPeers + 10; ++i) {
    busy.take("peer-" + std::to_string(i), start);
  }
  EXPECT_FALSE(busy.take("a-new-peer", start));
  EXPECT_TRUE(busy.take("a-new-peer", start + std::chrono::minutes(2)));
  EXPECT_TRUE(zeus::server::PeerRate(0).take("anyone", start));
}

// A job's trials, put straight into the store (the policy's state does not list them).
void add_trials(ServerHarness& server, const std::string& job_id, int count) {
  server.store().transact([&](zeus::server::StoreTransaction& tx) {
    for (int number = 1; number <= count; ++number) {
      zeus::server::TrialRecord trial;
      trial.job_id = job_id;
      trial.trial_number = number;
      trial.batch_size = 32;
      trial.type = "Exploration";
      trial.status = "Failed";
      trial.start_ms = number;
      trial.end_ms = number + 1;
      tx.insert_trial(trial);
    }
  });
}

TEST(BsoLimits, AJobsTrialsComeInBoundedPages) {
  ServerHarness server;
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-long").dump())->status, 201);
  add_trials(server, "peer-long", 2500);
  std::vector<int> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    const auto answer =
        server.request("GET", "/jobs/peer-long" + (after.empty() ? "" : "?trials_after=" + after));
    ASSERT_EQ(answer->status, 200);
    const json body = json::parse(answer->body);
    EXPECT_LE(body.at("trials").size(), zeus::server::BsoService::kMaxTrialsPage);
    EXPECT_EQ(body.at("job_id"), "peer-long");
    for (const auto& trial : body.at("trials")) {
      seen.push_back(trial.at("trial_number").get<int>());
    }
    if (!body.contains("trials_next")) {
      break;
    }
    after = std::to_string(body.at("trials_next").get<int>());
  }
  ASSERT_EQ(seen.size(), 2500u);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], static_cast<int>(i) + 1);
  }
  const json small = body_json(server.request("GET", "/jobs/peer-long?trials_limit=2"));
  EXPECT_EQ(small.at("trials").size(), 2u);
  EXPECT_EQ(small.at("trials_next"), 2);
  const json last = body_json(server.request("GET", "/jobs/peer-long?trials_after=2499"));
  EXPECT_EQ(last.at("trials").size(), 1u);
  EXPECT_FALSE(last.contains("trials_next"));
  for (const char* bad : {"trials_limit=0", "trials_limit=1001", "trials_after=-1",
                          "trials_after=x", "trials_limit="}) {
    const auto answer = server.request("GET", std::string("/jobs/peer-long?") + bad);
    EXPECT_EQ(answer->status, 422) << bad;
  }
}

}  // namespace
