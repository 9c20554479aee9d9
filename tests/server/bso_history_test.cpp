// Issue 27: a BSO trial cycle must not cost more, nor the server hold more, as a job's history
// grows. A job with 1,024 batch sizes whose runs crash (ended by PATCH /trials, or abandoned
// without a word) against a fresh job of the same spec, on SQLite and on a real PostgreSQL
// (started by the test; skipped without it).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "server/service.hpp"
#include "server/store.hpp"
#include "support/sanitizers.hpp"
#include "support/temp_dir.hpp"
#include "zeus/optimizer/batch_size_search.hpp"
#if ZEUS_HISTORY_TEST_POSTGRES
#include "server/postgres_fixture.hpp"
#endif

namespace {

using zeus::server::BsoService;
using zeus::server::JobRecord;
using zeus::server::Store;
using zeus::server::StoreTransaction;
using zeus::server::TrialRecord;

constexpr int kHistory = 100'000;

zeus::bso::JobSpec wide_job(const std::string& id) {
  zeus::bso::JobSpec spec;
  spec.job_id = id;
  spec.job_id_prefix = "hist";
  spec.max_power_w = 700.0;
  spec.number_of_gpus = 1;
  spec.gpu_model = "h100";
  for (int b = 1; b <= 1024; ++b) {
    spec.batch_sizes.push_back(b);
  }
  spec.default_batch_size = 512;
  spec.mab_seed = 7;
  return spec;
}

// One trial cycle as a crashed client makes it: dispatch, then PATCH /trials.
void crash_cycle(BsoService& service, const std::string& job) {
  service.end_trial(service.next_batch_size(job));
}

std::string policy_state(Store& store, const std::string& job) {
  std::string state;
  store.transact([&](StoreTransaction& tx) { state = tx.get_job(job)->policy_state; });
  return state;
}

// kHistory trials, fast: the job's policy runs them in memory (nine in ten ended as failed, one
// in ten abandoned, so that the running-trial cap is reached), its rows are inserted in one
// transaction, and the job row takes the policy's state: what as many requests would have left.
void add_history(BsoService& service, const std::string& job) {
  Store& store = service.store();
  store.transact([&](StoreTransaction& tx) {
    JobRecord record = *tx.lock_job(job);
    std::unique_ptr<zeus::optimizer::BatchSizeSearch> policy =
        zeus::optimizer::restore_batch_size_search(record.policy_state);
    for (int i = 0; i < kHistory; ++i) {
      const zeus::optimizer::Decision decision = policy->next();
      TrialRecord trial;
      trial.job_id = job;
      trial.trial_number = decision.trial_id;
      trial.batch_size = decision.batch_size;
      trial.type = zeus::optimizer::trial_kind_wire_name(decision.kind);
      trial.start_ms = 1;
      if (i % 10 == 9) {
        trial.status = "Dispatched";
      } else {
        policy->fail(decision.trial_id);
        trial.status = "Failed";
        trial.end_ms = 2;
      }
      tx.insert_trial(trial);
    }
    record.policy_state = policy->save();
    tx.update_job(record);
  });
}

double percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return samples[static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1))];
}

std::int64_t rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoll(line.substr(6));
    }
  }
  return 0;
}

// The p99 of a crash cycle on the job with history over that of the fresh job, cycles of the two
// interleaved so that a loaded machine slows both alike.
double p99_ratio(BsoService& service, const std::string& old_job, const std::string& fresh_job) {
  std::vector<double> old_us;
  std::vector<double> fresh_us;
  for (int i = 0; i < 400; ++i) {
    for (const bool old : {true, false}) {
      const auto start = std::chrono::steady_clock::now();
      crash_cycle(service, old ? old_job : fresh_job);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      (old ? old_us : fresh_us).push_back(us);
    }
  }
  const double ratio = percentile(old_us, 0.99) / percentile(fresh_us, 0.99);
  std::printf("p50 %.0f us (history) vs %.0f us (fresh); p99 %.0f vs %.0f us: %.2fx\n",
              percentile(old_us, 0.5), percentile(fresh_us, 0.5), percentile(old_us, 0.99),
              percentile(fresh_us, 0.99), ratio);
  return ratio;
}

void history_does_not_slow_a_cycle(Store& store) {
  BsoService service(store);
  service.register_job(wide_job("hist-fresh"));
  service.register_job(wide_job("hist-old"));
  // The repro first, through the service: 3,000 crashed trials. The state stays the
  // size a fresh job's has.
  for (int i = 0; i < 3000; ++i) {
    crash_cycle(service, "hist-old");
  }
  for (int i = 0; i < 10; ++i) {
    crash_cycle(service, "hist-fresh");
  }
  EXPECT_LE(policy_state(store, "hist-old").size(),
            policy_state(store, "hist-fresh").size() + 1024);

  add_history(service, "hist-old");
  // At most kMaxRunningTrials abandoned trials are kept: the state is bounded, not the history.
  EXPECT_LT(policy_state(store, "hist-old").size(), 64u * 1024u);

  // Within 1.5x; a loaded machine may spoil one measurement, not three.
  double best = 1e9;
  for (int attempt = 0; attempt < 3 && best >= 1.5; ++attempt) {
    best = std::min(best, p99_ratio(service, "hist-old", "hist-fresh"));
  }
  EXPECT_LT(best, 1.5);
  const std::int64_t rss = rss_kib();
  std::printf("RSS %lld KiB\n", static_cast<long long>(rss));
  EXPECT_LT(rss, 200 * 1024);
}

TEST(BsoHistory, ACycleOnAJobWith100kTrialsCostsWhatAFreshJobsDoesOnSqlite) {
  if (zeus::testing::kSanitized) {
    GTEST_SKIP() << zeus::testing::kMeasuredInReleaseOnly;
  }
  zeus::testing::TempDir dir;
  const std::unique_ptr<Store> store =
      zeus::server::open_store("sqlite:///" + (dir.path() / "bso.db").string());
  history_does_not_slow_a_cycle(*store);
}

#if ZEUS_HISTORY_TEST_POSTGRES
TEST(BsoHistory, ACycleOnAJobWith100kTrialsCostsWhatAFreshJobsDoesOnPostgres) {
  if (zeus::testing::kSanitized) {
    GTEST_SKIP() << zeus::testing::kMeasuredInReleaseOnly;
  }
  std::string why;
  const auto postgres = zeus::test::PostgresServer::start_or_skip_reason(why);
  if (!postgres) {
    GTEST_SKIP() << why;
  }
  postgres->create_database("bso_history");
  const std::unique_ptr<Store> store = zeus::server::open_store(postgres->url("bso_history"));
  history_does_not_slow_a_cycle(*store);
}
#endif

}  // namespace
