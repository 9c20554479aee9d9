// The PostgreSQL store: a pool of libpq connections, one READ COMMITTED transaction per
// Store::transact, row locks (SELECT ... FOR UPDATE) for the job being changed, round trips cut
// by pipelining (BEGIN goes with the transaction's first read, and the writes whose outcome the
// caller does not read go with the next read or with COMMIT), and schema
// migrations serialised across processes by an advisory lock; the jobs' and trials' SQL. The
// libpq plumbing and the pool are postgres_connection.{hpp,cpp}. See docs/bso-storage.md.
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "schema.hpp"
#include "server/postgres_connection.hpp"
#include "server/store.hpp"
#include "store_rows.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/error.hpp"

namespace zeus::server {
namespace {

using pg::ConnectionPool;
using pg::Lease;
using pg::Params;
using pg::PgError;
using pg::Result;
using pg::Row;
using pg::Session;

// pg_advisory_xact_lock key taken while migrating ("zeus" in ASCII, then 1), so that server
// processes starting at once against one database migrate it exactly once.
constexpr std::int64_t kMigrationLockKey = 0x7A65757300000001;

class PgTransaction final : public StoreTransaction {
 public:
  explicit PgTransaction(Session& session) : session_(session) {}

  // Whether a write statement ran (for the store's health).
  bool wrote() const { return wrote_; }

  // Sends the deferred writes and COMMIT (with BEGIN, when nothing was sent yet): one round trip.
  // A connection lost here may or may not have committed: StoreError(kUnavailable), never a
  // rerun of the body.
  void commit() {
    if (!begun_ && deferred_.empty()) {
      return;  // nothing ran in the transaction
    }
    std::vector<Session::Statement> statements = take_pending();
    statements.push_back({"COMMIT", Params(), "committing"});
    try {
      session_.pipeline(statements);
    } catch (const PgError& error) {
      if (error.connection_lost()) {
        throw StoreError(
            StoreFailure::kUnavailable,
            std::string(error.what()) + " (the transaction may or may not have been committed)");
      }
      throw;
    }
  }

  std::optional<JobRecord> lock_job(const std::string& job_id) override {
    return select_job(job_id, true);
  }
  std::optional<JobRecord> get_job(const std::string& job_id) override {
    return select_job(job_id, false);
  }
  // Both statements in one round trip (with BEGIN and the deferred writes, if any).
  std::optional<JobRecord> lock_job_with_trial(const std::string& job_id, int trial_number,
                                               std::optional<TrialRecord>& trial) override {
    const std::string what =
        "locking job '" + job_id + "' and reading its trial " + std::to_string(trial_number);
    std::vector<Session::Statement> statements = take_pending();
    statements.push_back(
        {std::string("SELECT ") + rows::kJobColumns + " FROM bso_job WHERE job_id = $1 FOR UPDATE",
         Params().text(job_id), what});
    statements.push_back({std::string("SELECT ") + rows::kTrialColumns +
                              " FROM bso_trial WHERE job_id = $1 AND trial_number = $2",
                          Params().text(job_id).integer(trial_number), what});
    const std::vector<Result> results = session_.pipeline(statements);
    const Result& job = results[results.size() - 2];
    const Result& found = results.back();
    if (PQntuples(job.get()) == 0) {
      trial.reset();
      return std::nullopt;
    }
    trial = PQntuples(found.get()) == 0
                ? std::nullopt
                : std::optional<TrialRecord>(rows::trial_from_row(Row(found.get(), 0, what)));
    return rows::job_from_row(Row(job.get(), 0, what));
  }

  bool insert_job(const JobRecord& job) override {
    if (!job.spec.job_id || job.spec.job_id->empty()) {
      throw Error(ErrorKind::kInvalidArgument, "insert_job needs a job whose spec.job_id is set");
    }
    const std::string& job_id = *job.spec.job_id;
    const std::string what = "inserting job '" + job_id + "'";
    wrote_ = true;
    const Result inserted =
        run("INSERT INTO bso_job (job_id, job_id_prefix, spec, policy_state, stage, min_cost, "
            "min_cost_batch_size, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "ON CONFLICT (job_id) DO NOTHING",
            Params()
                .text(job_id)
                .text(job.spec.job_id_prefix)
                .text(rows::spec_to_text(job.spec))
                .text(job.policy_state)
                .text(job.stage)
                .optional_real(job.min_cost)
                .integer(job.min_cost_batch_size)
                .integer(job.created_ms),
            what);
    if (std::string_view(PQcmdTuples(inserted.get())) != "1") {
      return false;
    }
    std::string array = "{";
    for (std::size_t i = 0; i < job.spec.batch_sizes.size(); ++i) {
      // Appended piece by piece: GCC 12's -Wrestrict misfires on `"," + std::to_string(...)` at
      // -O3.
      if (i != 0) {
        array += ',';
      }
      array += std::to_string(job.spec.batch_sizes[i]);
    }
    array += "}";
    run("INSERT INTO bso_batch_size (job_id, batch_size) "
        "SELECT $1, unnest($2::integer[]) ON CONFLICT DO NOTHING",
        Params().text(job_id).text(array), "inserting the batch sizes of job '" + job_id + "'");
    return true;
  }

  void update_job(const JobRecord& job) override {
    wrote_ = true;
    const std::string job_id = job.spec.job_id.value_or("");
    defer(
        "UPDATE bso_job SET policy_state = $2, stage = $3, min_cost = $4, "
        "min_cost_batch_size = $5 WHERE job_id = $1",
        Params()
            .text(job_id)
            .text(job.policy_state)
            .text(job.stage)
            .optional_real(job.min_cost)
            .integer(job.min_cost_batch_size),
        "updating job '" + job_id + "'");
  }

  bool delete_job(const std::string& job_id) override {
    wrote_ = true;
    // The foreign keys cascade to bso_batch_size and bso_trial.
    const Result result = run("DELETE FROM bso_job WHERE job_id = $1", Params().text(job_id),
                              "deleting job '" + job_id + "'");
    return std::string_view(PQcmdTuples(result.get())) == "1";
  }

  std::vector<std::string> list_job_ids(const std::string& after, std::size_t limit) override {
    // COLLATE "C": byte order, like SQLite's, whatever the database's locale (where that is not
    // "C" the primary key's index does not give this order: each page then scans the table, in
    // bounded memory, a top-N sort).
    const Result result = session_.exec(
        "SELECT job_id FROM bso_job WHERE job_id COLLATE \"C\" > $1 ORDER BY job_id COLLATE "
        "\"C\" LIMIT $2",
        Params().text(after).integer(static_cast<std::int64_t>(limit)), "listing jobs");
    std::vector<std::string> ids;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
      ids.emplace_back(PQgetvalue(result.get(), row, 0));
    }
    return ids;
  }

  std::int64_t count_jobs() override {
    const Result result = session_.exec("SELECT count(*) FROM bso_job", Params(), "counting jobs");
    return std::stoll(PQgetvalue(result.get(), 0, 0));
  }

  std::optional<TrialRecord> get_trial(const std::string& job_id, int trial_number) override {
    const std::string what =
        "reading trial " + std::to_string(trial_number) + " of job '" + job_id + "'";
    const Result result = read(std::string("SELECT ") + rows::kTrialColumns +
                                   " FROM bso_trial WHERE job_id = $1 AND trial_number = $2",
                               Params().text(job_id).integer(trial_number), what);
    if (PQntuples(result.get()) == 0) {
      return std::nullopt;
    }
    return rows::trial_from_row(Row(result.get(), 0, what));
  }

  void insert_trial(const TrialRecord& trial) override {
    defer(
        "INSERT INTO bso_trial (job_id, trial_number, batch_size, type, status, start_ms, end_ms, "
        "time_s, energy_j, metric, epochs, converged) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        Params()
            .text(trial.job_id)
            .integer(trial.trial_number)
            .integer(trial.batch_size)
            .text(trial.type)
            .text(trial.status)
            .integer(trial.start_ms)
            .optional_integer(trial.end_ms)
            .optional_real(trial.time_s)
            .optional_real(trial.energy_j)
            .optional_real(trial.metric)
            .optional_integer(trial.epochs)
            .optional_boolean(trial.converged),
        "inserting trial " + std::to_string(trial.trial_number) + " of job '" + trial.job_id + "'");
  }

  void update_trial(const TrialRecord& trial) override {
    defer(
        "UPDATE bso_trial SET status = $3, end_ms = $4, time_s = $5, energy_j = $6, metric = $7, "
        "epochs = $8, converged = $9 WHERE job_id = $1 AND trial_number = $2",
        Params()
            .text(trial.job_id)
            .integer(trial.trial_number)
            .text(trial.status)
            .optional_integer(trial.end_ms)
            .optional_real(trial.time_s)
            .optional_real(trial.energy_j)
            .optional_real(trial.metric)
            .optional_integer(trial.epochs)
            .optional_boolean(trial.converged),
        "updating trial " + std::to_string(trial.trial_number) + " of job '" + trial.job_id + "'");
  }

  using StoreTransaction::list_trials;
  std::vector<TrialRecord> list_trials(const std::string& job_id, int after,
                                       std::size_t limit) override {
    const std::string what = "listing the trials of job '" + job_id + "'";
    const Result result =
        read(std::string("SELECT ") + rows::kTrialColumns +
                 " FROM bso_trial WHERE job_id = $1 AND trial_number > $2 ORDER BY trial_number "
                 "LIMIT $3",
             Params().text(job_id).integer(after).integer(static_cast<std::int64_t>(
                 std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max()))),
             what);
    std::vector<TrialRecord> trials;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
      trials.push_back(rows::trial_from_row(Row(result.get(), row, what)));
    }
    return trials;
  }

 private:
  std::optional<JobRecord> select_job(const std::string& job_id, bool lock) {
    const std::string what = (lock ? "locking job '" : "reading job '") + job_id + "'";
    const std::string sql = std::string("SELECT ") + rows::kJobColumns +
                            " FROM bso_job WHERE job_id = $1" + (lock ? " FOR UPDATE" : "");
    const Result result =
        lock ? run(sql, Params().text(job_id), what) : read(sql, Params().text(job_id), what);
    if (PQntuples(result.get()) == 0) {
      return std::nullopt;
    }
    return rows::job_from_row(Row(result.get(), 0, what));
  }

  // A statement whose result is read now: sent with BEGIN (the transaction's first) and the
  // deferred writes before it, in one round trip. (A statement sent straight through session_
  // as the transaction's first runs on its own, outside it: only a lone read may.)
  // A read that takes no lock, run before anything else, goes alone and opens no transaction:
  // under READ COMMITTED each statement reads its own snapshot anyway, so it reads the same; a
  // body that stops there costs no BEGIN and no COMMIT.
  Result read(const std::string& sql, Params params, const std::string& what) {
    if (!begun_ && deferred_.empty()) {
      return session_.exec(sql.c_str(), params, what);
    }
    return run(sql, std::move(params), what);
  }
  Result run(const std::string& sql, Params params, const std::string& what) {
    if (begun_ && deferred_.empty()) {
      return session_.exec(sql.c_str(), params, what);
    }
    std::vector<Session::Statement> statements = take_pending();
    statements.push_back({sql, std::move(params), what});
    std::vector<Result> results = session_.pipeline(statements);
    return std::move(results.back());
  }
  // A write whose outcome (beyond success) nobody reads: sent with the next statement or COMMIT.
  // Its failure fails the transaction then.
  void defer(const char* sql, Params params, std::string what) {
    wrote_ = true;
    deferred_.push_back({sql, std::move(params), std::move(what)});
    if (deferred_.size() >= kMaxDeferred) {
      flush();
    }
  }
  // Sends the deferred writes now (a long transaction's memory stays bounded).
  void flush() { session_.pipeline(take_pending()); }
  // BEGIN when not sent yet, then the deferred writes: what goes before the next statement.
  std::vector<Session::Statement> take_pending() {
    std::vector<Session::Statement> statements;
    if (!begun_) {
      statements.push_back({kBegin, Params(), "starting a transaction"});
      begun_ = true;
    }
    for (Session::Statement& statement : deferred_) {
      statements.push_back(std::move(statement));
    }
    deferred_.clear();
    return statements;
  }

  static constexpr std::size_t kMaxDeferred = 64;

  static constexpr const char* kBegin = "BEGIN ISOLATION LEVEL READ COMMITTED";

  Session& session_;
  bool wrote_ = false;
  bool begun_ = false;
  std::vector<Session::Statement> deferred_;
};

class PostgresStore final : public Store {
 public:
  PostgresStore(const std::string& url, const StoreOptions& options)
      : url_(url),
        description_(pg::redact(url)),
        password_(pg::password_of(url)),
        options_(options) {
    // A password that is also the user or database name ("postgres") is no secret there, and
    // hiding it would only garble messages such as 'user "postgres" does not exist'.
    if (!password_.empty() && description_.find(password_) != std::string::npos) {
      password_.clear();
    }
    if (options.pool_size < 1) {
      throw Error(ErrorKind::kInvalidArgument, "the PostgreSQL pool_size must be at least 1, not " +
                                                   std::to_string(options.pool_size));
    }
    if (options.max_retries < 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  "max_retries must be 0 or more, not " + std::to_string(options.max_retries));
    }
    pool_ = std::make_unique<ConnectionPool>(url_, description_, password_, options_);
    migrate();
  }

  ~PostgresStore() override = default;
  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  void transact(const std::function<void(StoreTransaction&)>& body) override {
    try {
      if (transact_with_retries(body)) {
        forget_failure();  // a write went through: the storage works again
      }
    } catch (const PgError& error) {
      if (pg::storage_failure(error.sqlstate())) {
        remember_failure(error.what(), error.failure() == StoreFailure::kCorrupt);
      }
      throw;
    }
  }

  std::string describe() const override { return description_; }

  int schema_version() override {
    Lease lease(*pool_);
    Session session(lease.get(), description_, password_);
    return read_version(session).value_or(0);
  }

  StoreHealth health() override {
    try {
      std::optional<rows::StorageFailure> failure;
      {
        std::lock_guard lock(failure_mutex_);
        failure = failure_;
      }
      if (failure && failure->corruption) {
        return {false, "the last transaction failed: " + failure->message};
      }
      // A connection lost since its last use (a server restart) is replaced once, as transact
      // does.
      for (int attempt = 0;; ++attempt) {
        Lease lease(*pool_);
        Session session(lease.get(), description_, password_);
        try {
          if (failure) {
            session.exec("BEGIN ISOLATION LEVEL READ COMMITTED", "starting a transaction");
            session.exec("UPDATE zeus_schema SET version = version", Params(),
                         "probing whether writes work");
            session.exec("COMMIT", "committing the write probe");
            forget_failure();
            return {true, {}};
          }
          const Result read_only =
              session.exec("SELECT current_setting('transaction_read_only')", Params(),
                           "checking whether the database takes writes");
          if (std::string_view(PQgetvalue(read_only.get(), 0, 0)) == "on") {
            return {false, "PostgreSQL at " + description_ +
                               " is read-only (transaction_read_only is on: a standby, or "
                               "default_transaction_read_only): every write fails"};
          }
          read_version(session);
          return {true, {}};
        } catch (const PgError& error) {
          rollback_quietly(session);
          if (error.connection_lost() && attempt == 0) {
            pool_->drop_idle();
            continue;
          }
          if (failure) {
            remember_failure(error.what(), false);
            return {false, std::string("writes fail: ") + error.what()};
          }
          throw;
        }
      }
    } catch (const std::exception& error) {
      return {false, error.what()};
    }
  }

 private:
  void remember_failure(const std::string& message, bool corruption) {
    std::lock_guard lock(failure_mutex_);
    failure_ = rows::StorageFailure{message, corruption};
  }
  void forget_failure() {
    std::lock_guard lock(failure_mutex_);
    failure_.reset();
  }

  // True when the committed transaction wrote.
  bool transact_with_retries(const std::function<void(StoreTransaction&)>& body) {
    bool reconnected = false;
    for (int attempt = 0;; ++attempt) {
      Lease lease(*pool_);
      Session session(lease.get(), description_, password_);
      try {
        return run_once(session, body);
      } catch (const PgError& error) {
        rollback_quietly(session);
        if (error.connection_lost()) {
          // Nothing was committed (a loss during COMMIT is not a PgError any more), so the body
          // may run once more. The idle connections most likely went with this one (a server
          // restart): close them all and start afresh.
          pool_->drop_idle();
          if (reconnected) {
            throw;
          }
          reconnected = true;
          continue;
        }
        if (!error.serialization_failure()) {
          throw;
        }
        if (attempt >= options_.max_retries) {
          throw StoreError(
              StoreFailure::kConflict,
              "PostgreSQL at " + description_ + ": the transaction failed " +
                  std::to_string(attempt + 1) +
                  " times with a serialization failure or deadlock; last: " + error.what());
        }
      } catch (...) {
        rollback_quietly(session);
        throw;
      }
      back_off(attempt);
    }
  }

  // True when the transaction wrote.
  static bool run_once(Session& session, const std::function<void(StoreTransaction&)>& body) {
    PgTransaction transaction(session);
    body(transaction);
    if (PQtransactionStatus(session.connection()) == PQTRANS_INERROR) {
      throw StoreError(StoreFailure::kOther,
                       "PostgreSQL at " + session.description() +
                           ": a statement of the transaction failed and the error was caught "
                           "inside the transaction; nothing was committed");
    }
    transaction.commit();
    return transaction.wrote();
  }

  static void rollback_quietly(Session& session) {
    PGconn* connection = session.connection();
    if (PQstatus(connection) == CONNECTION_OK && PQtransactionStatus(connection) != PQTRANS_IDLE) {
      PQclear(PQexec(connection, "ROLLBACK"));
    }
  }

  static void back_off(int attempt) {
    thread_local std::mt19937 rng{std::random_device{}()};
    const int cap_us = std::min(200'000, 1'000 << std::min(attempt, 8));
    std::uniform_int_distribution<int> jitter_us(cap_us / 2, cap_us);
    std::this_thread::sleep_for(std::chrono::microseconds(jitter_us(rng)));
  }

  // The recorded version; nullopt when zeus_schema is absent or empty (version 0).
  static std::optional<int> read_version(Session& session) {
    const Result exists = session.exec("SELECT to_regclass('zeus_schema') IS NOT NULL", Params(),
                                       "reading the schema version");
    if (std::string_view(PQgetvalue(exists.get(), 0, 0)) != "t") {
      return std::nullopt;
    }
    const Result result =
        session.exec("SELECT version FROM zeus_schema", Params(), "reading the schema version");
    const int rows = PQntuples(result.get());
    if (rows == 0) {
      return std::nullopt;
    }
    if (rows > 1) {
      throw StoreError(StoreFailure::kCorrupt, "PostgreSQL at " + session.description() +
                                                   ": zeus_schema has " + std::to_string(rows) +
                                                   " rows instead of one");
    }
    return Row(result.get(), 0, "zeus_schema").integer<int>(0);
  }

  void migrate() {
    const std::vector<std::string_view>& migrations = schema::migrations();
    const int known = static_cast<int>(migrations.size());
    const auto check_not_newer = [known](int version) {
      if (version > known) {
        throw StoreError(StoreFailure::kCorrupt, "database schema version " +
                                                     std::to_string(version) +
                                                     " is newer than this zeus (" +
                                                     std::to_string(known) + "); upgrade zeus");
      }
    };
    // Up to date (the usual case): no lock and no write, so a read-only database opens too.
    int current = 0;
    transact_session([&](Session& session) { current = read_version(session).value_or(0); });
    check_not_newer(current);
    if (current == known) {
      return;
    }
    transact_session([&](Session& session) {
      // Other processes opening the database now wait here, then find it migrated.
      session.exec("SELECT pg_advisory_xact_lock($1::bigint)", Params().integer(kMigrationLockKey),
                   "waiting for the migration lock");
      session.exec(std::string(schema::kVersionTable).c_str(), "creating zeus_schema");
      const std::optional<int> recorded = read_version(session);
      const int version = recorded.value_or(0);
      check_not_newer(version);
      if (version == known) {
        return;
      }
      for (int i = version; i < known; ++i) {
        session.exec(std::string(migrations[static_cast<std::size_t>(i)]).c_str(),
                     "applying schema migration " + std::to_string(i + 1));
      }
      session.exec(recorded ? "UPDATE zeus_schema SET version = $1"
                            : "INSERT INTO zeus_schema (version) VALUES ($1)",
                   Params().integer(known), "recording the schema version");
      log().info("PostgreSQL at {}: schema migrated from version {} to {}", description_, version,
                 known);
    });
  }

  // A transaction over a raw session (migrations), with the same error handling as transact.
  template <typename Body>
  void transact_session(Body&& body) {
    Lease lease(*pool_);
    Session session(lease.get(), description_, password_);
    try {
      session.exec("BEGIN ISOLATION LEVEL READ COMMITTED", "starting a transaction");
      body(session);
      session.exec("COMMIT", "committing");
    } catch (...) {
      rollback_quietly(session);
      throw;
    }
  }

  std::string url_;
  std::string description_;
  std::string password_;
  StoreOptions options_;

  std::unique_ptr<ConnectionPool> pool_;

  std::mutex failure_mutex_;
  std::optional<rows::StorageFailure> failure_;  // under failure_mutex_
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& url, const StoreOptions& options) {
  return std::make_unique<PostgresStore>(url, options);
}

}  // namespace zeus::server
