// Many clients at once against one server, and (with PostgreSQL) two servers on one database:
// at the end every acknowledged trial and report is stored exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server/postgres_fixture.hpp"
#include "server/server_harness.hpp"

namespace zeus::test {

using nlohmann::json;

struct Acknowledged {
  std::mutex mutex;
  std::map<std::string, std::set<int>> dispatched;  // job -> trial numbers handed out
  std::map<std::string, std::set<int>> finished;    // job -> trials whose final report was 200
  std::map<std::string, std::set<int>> failed;      // job -> trials ended without a report
  std::atomic<int> errors{0};
};

// One client: `cycles` runs, each get batch size -> report (final) -> end, on the given jobs in
// turn; every 5th run ends without a report (a crashed run). Ports alternate when several
// servers share the database.
void client_loop(const std::vector<int>& ports, const std::vector<std::string>& jobs, int client,
                 int cycles, Acknowledged& acks) {
  for (int cycle = 0; cycle < cycles; ++cycle) {
    const int port = ports[static_cast<std::size_t>(client + cycle) % ports.size()];
    const std::string& job = jobs[static_cast<std::size_t>(client + cycle) % jobs.size()];
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(20, 0);
    auto got = http.Get(("/jobs/batch_size?job_id=" + job).c_str());
    if (!got || got->status != 200) {
      ++acks.errors;
      ADD_FAILURE() << "batch_size: " << (got ? got->body : httplib::to_string(got.error()));
      continue;
    }
    json trial = json::parse(got->body);
    const int number = trial.at("trial_number").get<int>();
    {
      std::lock_guard lock(acks.mutex);
      EXPECT_TRUE(acks.dispatched[job].insert(number).second) << "trial handed out twice";
    }
    const bool crash = (client + cycle) % 5 == 4;
    if (!crash) {
      json report = trial;
      const double bs = trial.at("batch_size").get<double>();
      report["time"] = 100.0 + bs / 10.0;
      report["energy"] = 20000.0 + bs * 10.0;
      report["metric"] = 0.95;
      report["current_epoch"] = 3;
      auto res = http.Post("/report", report.dump(), "");
      if (!res || res->status != 200) {
        ++acks.errors;
        ADD_FAILURE() << "report: " << (res ? res->body : httplib::to_string(res.error()));
        continue;
      }
      std::lock_guard lock(acks.mutex);
      acks.finished[job].insert(number);
    }
    auto end = http.Patch("/trials", trial.dump(), "");
    if (!end || end->status != 200) {
      ++acks.errors;
      ADD_FAILURE() << "end: " << (end ? end->body : httplib::to_string(end.error()));
      continue;
    }
    if (crash) {
      std::lock_guard lock(acks.mutex);
      acks.failed[job].insert(number);
    }
  }
}

// Checks the stored trials against what the clients were told.
void check_consistent(server::Store& store, const Acknowledged& acks) {
  for (const auto& [job, numbers] : acks.dispatched) {
    std::vector<server::TrialRecord> trials;
    store.transact([&](server::StoreTransaction& tx) { trials = tx.list_trials(job); });
    ASSERT_EQ(trials.size(), numbers.size()) << job;
    int expected_number = 1;
    for (const server::TrialRecord& trial : trials) {
      EXPECT_EQ(trial.trial_number, expected_number++) << job;  // 1..N, no gap, no duplicate
      const bool finished = acks.finished.at(job).count(trial.trial_number) != 0;
      const bool failed =
          acks.failed.count(job) != 0 && acks.failed.at(job).count(trial.trial_number) != 0;
      if (finished) {
        EXPECT_EQ(trial.status, "Succeeded") << job << " #" << trial.trial_number;
        EXPECT_TRUE(trial.time_s.has_value());
      } else if (failed) {
        EXPECT_EQ(trial.status, "Failed") << job << " #" << trial.trial_number;
      }
    }
  }
}

std::vector<std::string> register_jobs(const ServerHarness& server, int count) {
  std::vector<std::string> jobs;
  for (int i = 0; i < count; ++i) {
    jobs.push_back("peer-load-" + std::to_string(i));
    auto spec = peer_job_spec(jobs.back());
    spec["mab_seed"] = i;
    auto res = server.request("POST", "/jobs", spec.dump());
    EXPECT_TRUE(res && (res->status == 201 || res->status == 200));
  }
  return jobs;
}

void run_clients(const std::vector<int>& ports, const std::vector<std::string>& jobs, int clients,
                 int cycles, Acknowledged& acks) {
  std::vector<std::thread> threads;
  for (int client = 0; client < clients; ++client) {
    threads.emplace_back([&, client] { client_loop(ports, jobs, client, cycles, acks); });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
}

TEST(BsoConcurrency, ThirtyTwoClientsOnFourJobsLoseNothing) {
  ServerHarness server;
  const std::vector<std::string> jobs = register_jobs(server, 4);
  Acknowledged acks;
  run_clients({server.port()}, jobs, 32, 12, acks);
  EXPECT_EQ(acks.errors.load(), 0);
  check_consistent(server.store(), acks);
  int total = 0;
  for (const auto& [job, numbers] : acks.dispatched) {
    total += static_cast<int>(numbers.size());
  }
  EXPECT_EQ(total, 32 * 12);
}

TEST(BsoConcurrency, TwoServersOnOnePostgresLoseNothing) {
  std::string why;
  const auto postgres = PostgresServer::start_or_skip_reason(why);
  if (!postgres) {
    GTEST_SKIP() << why;
  }
  postgres->create_database("bso_two_servers");
  const std::string url = postgres->url("bso_two_servers");
  ServerHarness first(url);
  ServerHarness second(url);  // its own store, connections and HTTP server: like a 2nd process
  const std::vector<std::string> jobs = register_jobs(first, 4);
  Acknowledged acks;
  run_clients({first.port(), second.port()}, jobs, 32, 8, acks);
  EXPECT_EQ(acks.errors.load(), 0);
  check_consistent(first.store(), acks);
}

TEST(BsoDatabaseFailures, UnreachableAndReadOnlyDatabasesGet503AndTheServerRecovers) {
  std::string why;
  const auto postgres = PostgresServer::start_or_skip_reason(why);
  if (!postgres) {
    GTEST_SKIP() << why;
  }
  postgres->create_database("bso_failures");
  ServerHarness server(postgres->url("bso_failures"));
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-f").dump())->status, 201);
  const std::string kick =
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'bso_failures' "
      "AND pid <> pg_backend_pid()";

  // Unreachable: the database refuses connections and the server's are cut.
  postgres->execute("postgres", "ALTER DATABASE bso_failures WITH ALLOW_CONNECTIONS false");
  postgres->query_value("postgres", kick);
  auto res = server.request("GET", "/jobs/batch_size?job_id=peer-f");
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_NE(json::parse(res->body).at("message").get<std::string>().find("database unavailable"),
            std::string::npos)
      << res->body;
  EXPECT_EQ(server.request("GET", "/healthz")->status, 503);
  postgres->execute("postgres", "ALTER DATABASE bso_failures WITH ALLOW_CONNECTIONS true");
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);
  EXPECT_EQ(server.request("GET", "/jobs/batch_size?job_id=peer-f")->status, 200);

  // Read-only: new sessions refuse writes.
  postgres->execute("postgres",
                    "ALTER DATABASE bso_failures SET default_transaction_read_only = on");
  postgres->query_value("postgres", kick);
  res = server.request("POST", "/jobs", peer_job_spec("peer-g").dump());
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_NE(res->body.find("read-only"), std::string::npos) << res->body;
  EXPECT_EQ(server.request("GET", "/jobs/peer-f")->status, 200);  // reads still work
  const auto health = server.request("GET", "/healthz");
  EXPECT_EQ(health->status, 503) << health->body;
  EXPECT_NE(json::parse(health->body).at("storage").get<std::string>().find("read-only"),
            std::string::npos)
      << health->body;
  postgres->execute("postgres",
                    "ALTER DATABASE bso_failures SET default_transaction_read_only = off");
  postgres->query_value("postgres", kick);
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);
  EXPECT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-g").dump())->status, 201);
}

}  // namespace zeus::test
