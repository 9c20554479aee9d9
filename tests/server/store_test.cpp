// One suite for the Store interface, run against SQLite (server_store_test) and against a real
// PostgreSQL started for the test (server_postgres_test, label "postgres"; skipped when
// PostgreSQL is not installed). ZEUS_STORE_TEST_POSTGRES picks the backend at compile time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store_test_support.hpp"

namespace {

using namespace zeus::testing::store_suite;

TEST_P(StoreTest, OpeningAppliesEveryMigration) {
  EXPECT_EQ(store_->schema_version(), static_cast<int>(zeus::server::schema::migrations().size()));
  EXPECT_FALSE(store_->describe().empty());
  store_->transact([](StoreTransaction& tx) { EXPECT_TRUE(tx.list_job_ids("", 10).empty()); });
}

TEST_P(StoreTest, AWorkingStoreIsHealthy) {
  const StoreHealth health = store_->health();
  EXPECT_TRUE(health.ok) << health.message;
  EXPECT_EQ(health.message, "");
  insert(full_job("store-test-1"));
  EXPECT_TRUE(store_->health().ok);
}

TEST_P(StoreTest, ReopeningKeepsTheDataAndDoesNotMigrateAgain) {
  insert(full_job("store-test-1"));
  store_.reset();
  // Migration 1 is plain CREATE TABLE: running it again would fail the open.
  store_ = database_->open(StoreOptions{});
  EXPECT_EQ(store_->schema_version(), static_cast<int>(zeus::server::schema::migrations().size()));
  const std::optional<JobRecord> job = get_job("store-test-1");
  ASSERT_TRUE(job.has_value());
  expect_job_eq(*job, full_job("store-test-1"));
#if ZEUS_STORE_TEST_POSTGRES
  EXPECT_EQ(postgres_->server().query_value(postgres_->name(), "SELECT count(*) FROM zeus_schema"),
            "1");
#endif
}

TEST_P(StoreTest, ASchemaNewerThanThisProgramIsRefused) {
  store_.reset();
  database_->execute("UPDATE zeus_schema SET version = 99");
  expect_store_error([&] { database_->open(StoreOptions{}); }, StoreFailure::kCorrupt,
                     {"schema version 99", "upgrade zeus"});
}

TEST_P(StoreTest, JobRoundTripsWithEveryFieldSet) {
  const JobRecord job = full_job("store-test-full");
  insert(job);
  const std::optional<JobRecord> read = get_job("store-test-full");
  ASSERT_TRUE(read.has_value());
  expect_job_eq(*read, job);
  EXPECT_EQ(*read->min_cost, 0.1 + 0.2);
  EXPECT_EQ(read->spec.eta_knob, 0.1 + 0.2);
  EXPECT_EQ(*read->spec.mab_seed, (std::int64_t{1} << 62) + 1);
}

TEST_P(StoreTest, JobRoundTripsWithOptionalsUnset) {
  const JobRecord job = minimal_job("store-test-min");
  insert(job);
  const std::optional<JobRecord> read = get_job("store-test-min");
  ASSERT_TRUE(read.has_value());
  expect_job_eq(*read, job);
  EXPECT_FALSE(read->min_cost.has_value());
  EXPECT_FALSE(read->spec.beta_knob.has_value());
  EXPECT_FALSE(read->spec.mab_seed.has_value());
}

TEST_P(StoreTest, LockJobReadsTheJobOrNothing) {
  insert(full_job("store-test-1"));
  store_->transact([](StoreTransaction& tx) {
    const std::optional<JobRecord> job = tx.lock_job("store-test-1");
    ASSERT_TRUE(job.has_value());
    expect_job_eq(*job, full_job("store-test-1"));
    EXPECT_FALSE(tx.lock_job("store-test-absent").has_value());
    EXPECT_FALSE(tx.get_job("store-test-absent").has_value());
  });
}

TEST_P(StoreTest, UpdateJobWritesPolicyStateStageAndMinCost) {
  JobRecord job = minimal_job("store-test-1");
  insert(job);
  job.policy_state = R"({"explorations": [1, 2, 3]})";
  job.stage = "MAB";
  job.min_cost = 1.0 / 3.0;
  job.min_cost_batch_size = 32;
  store_->transact([&](StoreTransaction& tx) {
    JobRecord changed = job;
    // Only the four mutable fields are written.
    changed.created_ms = 999;
    changed.spec.max_epochs = 5;
    tx.update_job(changed);
  });
  std::optional<JobRecord> read = get_job("store-test-1");
  ASSERT_TRUE(read.has_value());
  expect_job_eq(*read, job);

  job.min_cost = std::nullopt;
  store_->transact([&](StoreTransaction& tx) { tx.update_job(job); });
  read = get_job("store-test-1");
  ASSERT_TRUE(read.has_value());
  EXPECT_FALSE(read->min_cost.has_value());
}

TEST_P(StoreTest, InsertJobReturnsFalseWhenTheIdIsTaken) {
  insert(full_job("store-test-1"));
  JobRecord other = minimal_job("store-test-1");
  store_->transact([&](StoreTransaction& tx) { EXPECT_FALSE(tx.insert_job(other)); });
  const std::optional<JobRecord> read = get_job("store-test-1");
  ASSERT_TRUE(read.has_value());
  expect_job_eq(*read, full_job("store-test-1"));
}

TEST_P(StoreTest, DeleteJobAndListJobIds) {
  insert(minimal_job("store-test-b"));
  insert(minimal_job("store-test-B"));
  insert(minimal_job("store-test-a"));
  store_->transact([](StoreTransaction& tx) {
    EXPECT_EQ(tx.list_job_ids("", 10),
              (std::vector<std::string>{"store-test-B", "store-test-a", "store-test-b"}));
    EXPECT_EQ(tx.count_jobs(), 3);
    EXPECT_TRUE(tx.delete_job("store-test-a"));
    EXPECT_FALSE(tx.delete_job("store-test-a"));
    EXPECT_FALSE(tx.delete_job("store-test-absent"));
    EXPECT_EQ(tx.list_job_ids("", 10), (std::vector<std::string>{"store-test-B", "store-test-b"}));
    EXPECT_EQ(tx.count_jobs(), 2);
  });
  EXPECT_FALSE(get_job("store-test-a").has_value());
}

// GET /jobs pages: `limit` ids after `after`, in byte order (a multi-byte id after every ASCII
// one), whatever the database's collation.
TEST_P(StoreTest, ListJobIdsPagesInByteOrder) {
  const std::vector<std::string> ids = {"store-page-A", "store-page-a", "store-page-b",
                                        "store-page-\xc3\xa9", "store-page-z"};
  for (const std::string& id : {ids[3], ids[1], ids[4], ids[0], ids[2]}) {
    insert(minimal_job(id));
  }
  store_->transact([&](StoreTransaction& tx) {
    EXPECT_EQ(tx.list_job_ids("", 2), (std::vector<std::string>{ids[0], ids[1]}));
    EXPECT_EQ(tx.list_job_ids(ids[1], 2), (std::vector<std::string>{ids[2], ids[4]}));
    EXPECT_EQ(tx.list_job_ids(ids[4], 2), (std::vector<std::string>{ids[3]}));
    EXPECT_EQ(tx.list_job_ids(ids[3], 2), std::vector<std::string>{});
    EXPECT_EQ(tx.list_job_ids("store-page-a0", 1), (std::vector<std::string>{ids[2]}));
    EXPECT_EQ(tx.count_jobs(), 5);
  });
}

TEST_P(StoreTest, TrialRoundTripsFromDispatchedToSucceeded) {
  insert(full_job("store-test-1"));
  TrialRecord trial = dispatched_trial("store-test-1", 1, 64);
  store_->transact([&](StoreTransaction& tx) { tx.insert_trial(trial); });
  store_->transact([&](StoreTransaction& tx) {
    const std::optional<TrialRecord> read = tx.get_trial("store-test-1", 1);
    ASSERT_TRUE(read.has_value());
    expect_trial_eq(*read, trial);
    EXPECT_FALSE(read->end_ms.has_value());
    EXPECT_FALSE(read->time_s.has_value());
    EXPECT_FALSE(read->energy_j.has_value());
    EXPECT_FALSE(read->metric.has_value());
    EXPECT_FALSE(read->epochs.has_value());
    EXPECT_FALSE(read->converged.has_value());
  });

  trial.status = "Succeeded";
  trial.end_ms = 1'700'000'123'456;
  trial.time_s = 0.1 + 0.2;
  trial.energy_j = 123456789.12345679;
  trial.metric = 1.0 / 3.0;
  trial.epochs = 42;
  trial.converged = false;
  store_->transact([&](StoreTransaction& tx) { tx.update_trial(trial); });
  store_->transact([&](StoreTransaction& tx) {
    const std::optional<TrialRecord> read = tx.get_trial("store-test-1", 1);
    ASSERT_TRUE(read.has_value());
    expect_trial_eq(*read, trial);
  });

  trial.converged = true;
  store_->transact([&](StoreTransaction& tx) { tx.update_trial(trial); });
  store_->transact([&](StoreTransaction& tx) {
    const std::optional<TrialRecord> read = tx.get_trial("store-test-1", 1);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->converged, std::optional<bool>(true));
    EXPECT_FALSE(tx.get_trial("store-test-1", 2).has_value());
    EXPECT_FALSE(tx.get_trial("store-test-absent", 1).has_value());
  });
}

TEST_P(StoreTest, FailedTrialKeepsItsEndAndNoMeasurements) {
  insert(full_job("store-test-1"));
  TrialRecord trial = dispatched_trial("store-test-1", 1, 8);
  trial.type = "MAB";
  store_->transact([&](StoreTransaction& tx) { tx.insert_trial(trial); });
  trial.status = "Failed";
  trial.end_ms = 1'700'000'000'999;
  trial.epochs = 3;
  store_->transact([&](StoreTransaction& tx) { tx.update_trial(trial); });
  const std::vector<TrialRecord> trials = list_trials("store-test-1");
  ASSERT_EQ(trials.size(), 1u);
  expect_trial_eq(trials[0], trial);
}

TEST_P(StoreTest, ListTrialsIsOrderedByTrialNumber) {
  insert(full_job("store-test-1"));
  insert(full_job("store-test-2"));
  store_->transact([](StoreTransaction& tx) {
    for (const int number : {3, 10, 1, 2}) {
      TrialRecord trial = dispatched_trial("store-test-1", number, 16);
      trial.type = number == 10 ? "Concurrent" : "Exploration";
      tx.insert_trial(trial);
    }
    tx.insert_trial(dispatched_trial("store-test-2", 1, 32));
  });
  const std::vector<TrialRecord> trials = list_trials("store-test-1");
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].trial_number, 1);
  EXPECT_EQ(trials[1].trial_number, 2);
  EXPECT_EQ(trials[2].trial_number, 3);
  EXPECT_EQ(trials[3].trial_number, 10);
  EXPECT_EQ(trials[3].type, "Concurrent");
  EXPECT_EQ(list_trials("store-test-2").size(), 1u);
  EXPECT_TRUE(list_trials("store-test-absent").empty());
  // A page: the trials numbered above `after`, at most `limit` of them, still in order.
  std::vector<TrialRecord> page;
  store_->transact([&](StoreTransaction& tx) { page = tx.list_trials("store-test-1", 1, 2); });
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].trial_number, 2);
  EXPECT_EQ(page[1].trial_number, 3);
  store_->transact([&](StoreTransaction& tx) { page = tx.list_trials("store-test-1", 3, 5); });
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].trial_number, 10);
  store_->transact([&](StoreTransaction& tx) { page = tx.list_trials("store-test-1", 10, 5); });
  EXPECT_TRUE(page.empty());
}

TEST_P(StoreTest, ATrialNeedsOneOfTheJobsBatchSizes) {
  insert(full_job("store-test-1"));
  expect_store_error(
      [&] {
        store_->transact([](StoreTransaction& tx) {
          tx.insert_trial(dispatched_trial("store-test-1", 1, 12));  // 12 is not a candidate
        });
      },
      StoreFailure::kOther, {});
  EXPECT_TRUE(list_trials("store-test-1").empty());
}

TEST_P(StoreTest, DeletingAJobDeletesItsTrials) {
  insert(full_job("store-test-1"));
  store_->transact([](StoreTransaction& tx) {
    tx.insert_trial(dispatched_trial("store-test-1", 1, 8));
    tx.insert_trial(dispatched_trial("store-test-1", 2, 16));
  });
  store_->transact([](StoreTransaction& tx) { EXPECT_TRUE(tx.delete_job("store-test-1")); });
  EXPECT_TRUE(list_trials("store-test-1").empty());
  // The same id again starts from nothing (no trials, no old batch sizes).
  insert(minimal_job("store-test-1"));
  store_->transact([](StoreTransaction& tx) {
    EXPECT_TRUE(tx.list_trials("store-test-1").empty());
    EXPECT_FALSE(tx.get_trial("store-test-1", 1).has_value());
    tx.insert_trial(dispatched_trial("store-test-1", 1, 32));
  });
  EXPECT_EQ(list_trials("store-test-1").size(), 1u);
}

TEST_P(StoreTest, AThrowingBodyWritesNothing) {
  EXPECT_THROW(store_->transact([](StoreTransaction& tx) {
    ASSERT_TRUE(tx.insert_job(full_job("store-test-1")));
    tx.insert_trial(dispatched_trial("store-test-1", 1, 8));
    throw std::runtime_error("the body failed");
  }),
               std::runtime_error);
  EXPECT_FALSE(get_job("store-test-1").has_value());
  EXPECT_TRUE(list_trials("store-test-1").empty());
  // The store is still usable, and the id is free.
  insert(full_job("store-test-1"));
  EXPECT_TRUE(get_job("store-test-1").has_value());
}

TEST_P(StoreTest, ConcurrentTransactionsLoseNoUpdate) {
  JobRecord job = minimal_job("store-test-counter");
  job.policy_state = "0";
  insert(job);
  constexpr int kThreads = 16;
  constexpr int kIncrements = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        increment(*store_, "store-test-counter");
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(get_job("store-test-counter")->policy_state, std::to_string(kThreads * kIncrements));
}

// Two Store objects on one database, as two server processes would have.
TEST_P(StoreTest, TwoStoresOnOneDatabaseLoseNoUpdate) {
  JobRecord job = minimal_job("store-test-counter");
  job.policy_state = "0";
  insert(job);
  if (auto* sqlite = dynamic_cast<SqliteDatabase*>(database_.get())) {
    // By default a server process owns its SQLite file: a second one is refused, clearly.
    StoreOptions quick;
    quick.busy_timeout_ms = 50;
    try {
      database_->open(quick);
      ADD_FAILURE() << "a second store opened an SQLite file another one owns";
    } catch (const StoreError& error) {
      EXPECT_EQ(error.failure(), StoreFailure::kConflict);
      EXPECT_NE(std::string(error.what()).find("in use by another process"), std::string::npos)
          << error.what();
    }
    // With ?locking=shared, both stores take the lock per transaction.
    store_.reset();
    sqlite->share();
    store_ = database_->open(StoreOptions{});
  }
  std::unique_ptr<Store> second = database_->open(StoreOptions{});
  constexpr int kThreads = 16;
  constexpr int kIncrements = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Store& store = t % 2 == 0 ? *store_ : *second;
    threads.emplace_back([&store] {
      for (int i = 0; i < kIncrements; ++i) {
        increment(store, "store-test-counter");
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(get_job("store-test-counter")->policy_state, std::to_string(kThreads * kIncrements));
}

#if ZEUS_STORE_TEST_POSTGRES
INSTANTIATE_TEST_SUITE_P(Postgres, StoreTest, ::testing::Values(Backend::kPostgres));
#else
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(Backend::kSqlite));
#endif

}  // namespace
