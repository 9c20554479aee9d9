// The Store suite's fixture (store_test.cpp, store_sqlite_test.cpp, store_postgres_test.cpp): an
// empty database per test on SQLite or on the test's own PostgreSQL (ZEUS_STORE_TEST_POSTGRES
// picks the backend at compile time), records with every field set, and comparisons.
#pragma once

#include "server/store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "schema.hpp"
#include "zeus/bso/wire.hpp"

#if ZEUS_STORE_TEST_POSTGRES
#include "server/postgres_fixture.hpp"
#endif

namespace zeus::testing::store_suite {

using zeus::server::JobRecord;
using zeus::server::Store;
using zeus::server::StoreError;
using zeus::server::StoreFailure;
using zeus::server::StoreHealth;
using zeus::server::StoreOptions;
using zeus::server::StoreTransaction;
using zeus::server::TrialRecord;

enum class Backend { kSqlite, kPostgres };

// One empty database for one test; open() may be called several times (like several server
// processes, or a restart).
class TestDatabase {
 public:
  virtual ~TestDatabase() = default;
  virtual std::unique_ptr<Store> open(const StoreOptions& options) = 0;
  // Raw SQL behind the store's back (to fake a newer schema).
  virtual void execute(const std::string& sql) = 0;
};

class SqliteDatabase final : public TestDatabase {
 public:
  SqliteDatabase() {
    static std::atomic<int> counter{0};
    directory_ =
        std::filesystem::temp_directory_path() /
        ("zeus-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(directory_);
  }
  ~SqliteDatabase() override { std::filesystem::remove_all(directory_); }
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  std::unique_ptr<Store> open(const StoreOptions& options) override {
    return zeus::server::open_sqlite_store((directory_ / "bso.db").string() + locking_, options);
  }
  // Later opens share the file (?locking=shared) instead of owning it.
  void share() { locking_ = "?locking=shared"; }
  void execute(const std::string& sql) override {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((directory_ / "bso.db").c_str(), &db), SQLITE_OK);
    char* message = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
    const std::string text = message != nullptr ? message : "";
    sqlite3_free(message);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << text;
  }

 private:
  std::filesystem::path directory_;
  std::string locking_;
};

#if ZEUS_STORE_TEST_POSTGRES

// One server for the whole process (each test gets its own database on it). A server that is
// installed but does not start fails every test with the same message, tried once.
inline zeus::test::PostgresServer* shared_server(std::string& why) {
  static std::mutex mutex;
  static std::unique_ptr<zeus::test::PostgresServer> server;
  static std::string skip_reason;
  static std::string start_error;
  static bool tried = false;
  std::lock_guard lock(mutex);
  if (!tried) {
    tried = true;
    try {
      server = zeus::test::PostgresServer::start_or_skip_reason(skip_reason);
    } catch (const std::exception& error) {
      start_error = error.what();
    }
  }
  if (!start_error.empty()) {
    throw std::runtime_error("the test PostgreSQL server did not start: " + start_error);
  }
  why = skip_reason;
  return server.get();
}

// "t<n>_<test name>", lower case, within PostgreSQL's 63 bytes.
inline std::string database_name() {
  static std::atomic<int> counter{0};
  std::string name = "t" + std::to_string(counter++) + "_";
  for (const char c :
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      name += '_';
    }
  }
  return name.substr(0, 63);
}

class PostgresDatabase final : public TestDatabase {
 public:
  explicit PostgresDatabase(zeus::test::PostgresServer& server)
      : server_(server), name_(database_name()) {
    server_.create_database(name_);
  }
  std::unique_ptr<Store> open(const StoreOptions& options) override {
    return zeus::server::open_postgres_store(url(), options);
  }
  void execute(const std::string& sql) override { server_.execute(name_, sql); }

  std::string url() const { return server_.url(name_); }
  const std::string& name() const { return name_; }
  zeus::test::PostgresServer& server() const { return server_; }

 private:
  zeus::test::PostgresServer& server_;
  std::string name_;
};

#endif

// ---- records ---------------------------------------------------------------------------------

inline constexpr const char* kPrefix = "store-test";

// Every field set, with doubles that only survive an exact round trip.
inline JobRecord full_job(const std::string& job_id) {
  JobRecord job;
  zeus::bso::JobSpec& spec = job.spec;
  spec.max_power_w = 1234.5678901234567;
  spec.number_of_gpus = 4;
  spec.gpu_model = "NVIDIA H200 \"SXM\" 'quoted' ünïcode";
  spec.job_id = job_id;
  spec.job_id_prefix = kPrefix;
  spec.batch_sizes = {8, 16, 32, 64, 1024};
  spec.default_batch_size = 32;
  spec.eta_knob = 0.1 + 0.2;  // 0.30000000000000004
  spec.beta_knob = 1.0 / 3.0;
  spec.target_metric = 0.7123456789012345;
  spec.higher_is_better_metric = false;
  spec.max_epochs = 77;
  spec.num_pruning_rounds = 3;
  spec.window_size = 10;
  spec.mab_prior_mean = -2.5e-300;
  spec.mab_prior_precision = 1e300;
  spec.mab_num_explorations = 5;
  spec.mab_seed = (std::int64_t{1} << 62) + 1;  // not representable as a double
  job.policy_state = R"({"state": "opaque", "quote": "'", "backslash": "\\"})";
  job.stage = "Pruning";
  job.min_cost = 0.1 + 0.2;
  job.min_cost_batch_size = 16;
  job.created_ms = 1'700'000'000'123;
  return job;
}

// Optional fields unset.
inline JobRecord minimal_job(const std::string& job_id) {
  JobRecord job;
  zeus::bso::JobSpec& spec = job.spec;
  spec.max_power_w = 300;
  spec.number_of_gpus = 1;
  spec.gpu_model = "V100";
  spec.job_id = job_id;
  spec.job_id_prefix = kPrefix;
  spec.batch_sizes = {32};
  spec.default_batch_size = 32;
  spec.beta_knob = std::nullopt;
  spec.mab_seed = std::nullopt;
  job.policy_state = "{}";
  job.stage = "Pruning";
  job.min_cost = std::nullopt;
  job.min_cost_batch_size = 0;
  job.created_ms = 1;
  return job;
}

inline TrialRecord dispatched_trial(const std::string& job_id, int trial_number, int batch_size) {
  TrialRecord trial;
  trial.job_id = job_id;
  trial.trial_number = trial_number;
  trial.batch_size = batch_size;
  trial.type = "Exploration";
  trial.status = "Dispatched";
  trial.start_ms = 1'700'000'000'000 + trial_number;
  return trial;
}

inline void expect_job_eq(const JobRecord& actual, const JobRecord& expected) {
  EXPECT_TRUE(actual.spec == expected.spec)
      << "spec differs: " << zeus::bso::to_json(actual.spec).dump() << " vs "
      << zeus::bso::to_json(expected.spec).dump();
  EXPECT_EQ(actual.policy_state, expected.policy_state);
  EXPECT_EQ(actual.stage, expected.stage);
  EXPECT_EQ(actual.min_cost, expected.min_cost);
  EXPECT_EQ(actual.min_cost_batch_size, expected.min_cost_batch_size);
  EXPECT_EQ(actual.created_ms, expected.created_ms);
}

inline void expect_trial_eq(const TrialRecord& actual, const TrialRecord& expected) {
  EXPECT_EQ(actual.job_id, expected.job_id);
  EXPECT_EQ(actual.trial_number, expected.trial_number);
  EXPECT_EQ(actual.batch_size, expected.batch_size);
  EXPECT_EQ(actual.type, expected.type);
  EXPECT_EQ(actual.status, expected.status);
  EXPECT_EQ(actual.start_ms, expected.start_ms);
  EXPECT_EQ(actual.end_ms, expected.end_ms);
  EXPECT_EQ(actual.time_s, expected.time_s);
  EXPECT_EQ(actual.energy_j, expected.energy_j);
  EXPECT_EQ(actual.metric, expected.metric);
  EXPECT_EQ(actual.epochs, expected.epochs);
  EXPECT_EQ(actual.converged, expected.converged);
}

template <typename Body>
void expect_store_error(Body&& body, StoreFailure failure,
                        const std::vector<std::string>& fragments,
                        const std::vector<std::string>& absent = {}) {
  try {
    body();
    ADD_FAILURE() << "no StoreError thrown";
  } catch (const StoreError& error) {
    EXPECT_EQ(static_cast<int>(error.failure()), static_cast<int>(failure)) << error.what();
    const std::string message = error.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
    }
    for (const std::string& fragment : absent) {
      EXPECT_EQ(message.find(fragment), std::string::npos)
          << "'" << fragment << "' should not be in: " << message;
    }
  }
}

// Adds one to the counter kept in the job's policy_state, under the job's row lock.
inline void increment(Store& store, const std::string& job_id) {
  store.transact([&](StoreTransaction& tx) {
    std::optional<JobRecord> job = tx.lock_job(job_id);
    ASSERT_TRUE(job.has_value());
    job->policy_state = std::to_string(std::stoi(job->policy_state) + 1);
    tx.update_job(*job);
  });
}

// ---- the suite --------------------------------------------------------------------------------

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
#if ZEUS_STORE_TEST_POSTGRES
      std::string why;
      zeus::test::PostgresServer* server = shared_server(why);
      if (server == nullptr) {
        GTEST_SKIP() << why;
      }
      auto postgres = std::make_unique<PostgresDatabase>(*server);
      postgres_ = postgres.get();
      database_ = std::move(postgres);
#endif
    } else {
      database_ = std::make_unique<SqliteDatabase>();
    }
    ASSERT_TRUE(database_ != nullptr);
    store_ = database_->open(StoreOptions{});
  }

  void insert(const JobRecord& job) {
    store_->transact([&](StoreTransaction& tx) { ASSERT_TRUE(tx.insert_job(job)); });
  }
  std::optional<JobRecord> get_job(const std::string& job_id) {
    std::optional<JobRecord> job;
    store_->transact([&](StoreTransaction& tx) { job = tx.get_job(job_id); });
    return job;
  }
  std::vector<TrialRecord> list_trials(const std::string& job_id) {
    std::vector<TrialRecord> trials;
    store_->transact([&](StoreTransaction& tx) { trials = tx.list_trials(job_id); });
    return trials;
  }

  std::unique_ptr<TestDatabase> database_;
#if ZEUS_STORE_TEST_POSTGRES
  PostgresDatabase* postgres_ = nullptr;
#endif
  std::unique_ptr<Store> store_;
};

}  // namespace zeus::testing::store_suite
