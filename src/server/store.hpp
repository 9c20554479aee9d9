// Storage for the batch-size-optimizer server, behind one interface with two implementations:
// SQLite (embedded, the default) and PostgreSQL (shared by several server processes). The
// service runs every request as one transaction through Store::transact.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/utf8.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/error.hpp"

namespace zeus::server {

// A job as stored: its spec (job_id always set) and the policy core's exact state.
struct JobRecord {
  bso::JobSpec spec;
  std::string policy_state;  // zeus::optimizer::BatchSizeSearch::save() text (either policy)
  std::string stage;         // "Pruning" or "MAB"
  std::optional<double> min_cost;
  int min_cost_batch_size = 0;
  std::int64_t created_ms = 0;  // Unix time, milliseconds
};

// A trial as stored. time/energy/metric/epochs/converged are set once it has a final report.
struct TrialRecord {
  std::string job_id;
  int trial_number = 0;
  int batch_size = 0;
  std::string type;    // "Exploration", "Concurrent" or "MAB"
  std::string status;  // "Dispatched", "Succeeded" or "Failed"
  std::int64_t start_ms = 0;
  std::optional<std::int64_t> end_ms;
  std::optional<double> time_s;
  std::optional<double> energy_j;
  std::optional<double> metric;
  std::optional<int> epochs;
  std::optional<bool> converged;
};

// Why storage failed; the HTTP layer maps these to 503 (unavailable, read-only) or 500.
enum class StoreFailure {
  kUnavailable,  // cannot connect, or the connection dropped
  kReadOnly,     // the database refuses writes
  kConflict,     // retries of a serialization failure were exhausted
  kCorrupt,      // a stored row does not parse, or the schema is newer than this program
  kOther,
};

// The message names the database (file, or host and database; never a password) and is valid
// UTF-8.
class StoreError : public Error {
 public:
  StoreError(StoreFailure failure, const std::string& message)
      : Error(ErrorKind::kIo, to_valid_utf8(message)), failure_(failure) {}
  StoreFailure failure() const noexcept { return failure_; }

 private:
  StoreFailure failure_;
};

// The operations of one transaction. Only valid inside Store::transact's body.
class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;

  // The job, locked against other writers (other threads and processes) until the transaction
  // ends. nullopt when it does not exist.
  virtual std::optional<JobRecord> lock_job(const std::string& job_id) = 0;
  // The job without a lock (for reads).
  virtual std::optional<JobRecord> get_job(const std::string& job_id) = 0;
  // lock_job, then get_trial of that job into `trial` (nullopt: no job, or no such trial). A
  // store may send both at once (PostgreSQL: one round trip).
  virtual std::optional<JobRecord> lock_job_with_trial(const std::string& job_id, int trial_number,
                                                       std::optional<TrialRecord>& trial) {
    std::optional<JobRecord> job = lock_job(job_id);
    trial = job ? get_trial(job_id, trial_number) : std::nullopt;
    return job;
  }
  // Inserts a new job (spec.job_id set) with its batch sizes; false when the id is taken.
  virtual bool insert_job(const JobRecord& job) = 0;
  // Writes policy_state, stage, min_cost and min_cost_batch_size.
  virtual void update_job(const JobRecord& job) = 0;
  // Deletes the job and its trials; false when there was none.
  virtual bool delete_job(const std::string& job_id) = 0;
  // Up to `limit` job ids after `after` (all when empty) in byte order: one page of GET /jobs.
  virtual std::vector<std::string> list_job_ids(const std::string& after, std::size_t limit) = 0;
  // How many jobs the store holds (the --max-jobs quota).
  virtual std::int64_t count_jobs() = 0;

  virtual std::optional<TrialRecord> get_trial(const std::string& job_id, int trial_number) = 0;
  virtual void insert_trial(const TrialRecord& trial) = 0;
  // Writes status, end_ms, time_s, energy_j, metric, epochs and converged.
  virtual void update_trial(const TrialRecord& trial) = 0;
  // A job's trials numbered above `after_trial_number`, by trial number, at most `limit` of them.
  virtual std::vector<TrialRecord> list_trials(const std::string& job_id, int after_trial_number,
                                               std::size_t limit) = 0;
  // All trials of a job, by trial number (tests and small jobs; GET /jobs/{id} pages).
  std::vector<TrialRecord> list_trials(const std::string& job_id) {
    return list_trials(job_id, 0, std::numeric_limits<std::size_t>::max());
  }
};

// Whether the database can serve requests now (GET /healthz).
struct StoreHealth {
  bool ok = true;
  std::string message;  // why not, naming the database (never a password); empty when ok
};

class Store {
 public:
  virtual ~Store() = default;

  // Runs `body` as one transaction: committed when it returns, rolled back when it throws (the
  // exception then propagates). A serialization failure or a busy database reruns the whole
  // body (a bounded number of times), so `body` must have no effects outside the transaction
  // until it returns. Safe to call from many threads at once.
  virtual void transact(const std::function<void(StoreTransaction&)>& body) = 0;

  // "sqlite:///path" or "postgresql://user@host:port/db" (no password), for logs.
  virtual std::string describe() const = 0;
  // The schema version now in the database (the number of migrations applied).
  virtual int schema_version() = 0;

  // Whether reads and writes work now. Not ok when a cheap read fails, when the database is
  // read-only (an SQLite file opened read-only; a PostgreSQL standby or
  // default_transaction_read_only), or when the last transaction that failed because of the
  // storage (disk full, I/O error, read-only, corruption) has not been followed by a write that
  // succeeded. While such a failure is remembered, each call tries a one-row write (except after
  // corruption, which only a real write clears), so health comes back once writes work. Never
  // throws; safe to call from many threads, at any rate (it runs one or two small statements).
  virtual StoreHealth health() = 0;
};

struct StoreOptions {
  int pool_size = 8;  // connections (PostgreSQL) kept open
  // How long to wait for a lock before giving up (503). Below the reference client's 5 s timeout.
  int busy_timeout_ms = 2000;
  int max_retries = 10;  // reruns of a transaction after a serialization failure
  // SQLite: run PRAGMA quick_check when opening (one read of the whole file) and refuse a
  // corrupt file with StoreError(kCorrupt). `zeus bso serve --skip-integrity-check` clears it.
  bool check_integrity = true;
};

// Opens (and creates) the database at `url` and applies the built-in schema migrations:
//   sqlite:///relative/or/absolute/path.db, sqlite:////abs/path.db, sqlite://:memory:
//   postgresql://user:password@host:port/dbname?... (also postgres://)
// Throws zeus::Error(kInvalidArgument) for an unknown scheme, StoreError when the database
// cannot be opened or migrated, or (SQLite, with check_integrity) is corrupt.
std::unique_ptr<Store> open_store(const std::string& url, const StoreOptions& options = {});

std::unique_ptr<Store> open_sqlite_store(const std::string& path, const StoreOptions& options);
// `url` is a libpq connection URI.
std::unique_ptr<Store> open_postgres_store(const std::string& url, const StoreOptions& options);

}  // namespace zeus::server
