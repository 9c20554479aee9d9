// The SQLite store: one connection, transactions serialised by a mutex inside the process and by
// BEGIN IMMEDIATE (with a busy timeout) across processes sharing the file. WAL journal; with
// synchronous=NORMAL (the default) a committed transaction survives the process being killed,
// synchronous=FULL (?synchronous=full) also survives power loss.
#include <sqlite3.h>
#include <sys/statvfs.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/text.hpp"
#include "schema.hpp"
#include "server/sqlite_statement.hpp"
#include "server/store.hpp"
#include "store_rows.hpp"

namespace zeus::server {
namespace {

// After a storage failure, health is ok again only once the database's file system has this much
// room (docs/security.md): about what the largest registration writes.
constexpr unsigned long long kMinFreeBytes = 1ULL << 20;

using sqlite::exec;
using sqlite::file_of;
using sqlite::SqliteError;
using sqlite::Statement;
using sqlite::StatementCache;

const std::string kJobById =
    std::string("SELECT ") + rows::kJobColumns + " FROM bso_job WHERE job_id = ?1";
const std::string kTrialColumns = std::string("SELECT ") + rows::kTrialColumns + " FROM bso_trial";
const std::string kTrialByNumber = kTrialColumns + " WHERE job_id = ?1 AND trial_number = ?2";
const std::string kTrialsOfJob =
    kTrialColumns + " WHERE job_id = ?1 AND trial_number > ?2 ORDER BY trial_number LIMIT ?3";

class SqliteTransaction final : public StoreTransaction {
 public:
  SqliteTransaction(sqlite3* db, StatementCache& cache) : db_(db), cache_(cache) {}

  std::optional<JobRecord> lock_job(const std::string& job_id) override {
    // BEGIN IMMEDIATE already holds the database's write lock.
    return get_job(job_id);
  }
  std::optional<JobRecord> get_job(const std::string& job_id) override {
    Statement query(db_, cache_, kJobById);
    query.bind(1, job_id);
    if (!query.step()) {
      return std::nullopt;
    }
    return rows::job_from_row(query);
  }
  bool insert_job(const JobRecord& job) override {
    const std::string& id = job.spec.job_id.value();
    Statement insert(db_, cache_,
                     "INSERT INTO bso_job (job_id, job_id_prefix, spec, policy_state, stage, "
                     "min_cost, min_cost_batch_size, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                     "?7, ?8) ON CONFLICT (job_id) DO NOTHING");
    insert.bind(1, id)
        .bind(2, job.spec.job_id_prefix)
        .bind(3, rows::spec_to_text(job.spec))
        .bind(4, job.policy_state)
        .bind(5, job.stage)
        .bind(6, job.min_cost)
        .bind(7, job.min_cost_batch_size)
        .bind(8, job.created_ms);
    insert.step();
    if (sqlite3_changes(db_) == 0) {
      return false;
    }
    Statement size(db_, cache_, "INSERT INTO bso_batch_size (job_id, batch_size) VALUES (?1, ?2)");
    for (const int batch_size : job.spec.batch_sizes) {
      size.reset();
      size.bind(1, id).bind(2, batch_size);
      size.step();
    }
    return true;
  }
  void update_job(const JobRecord& job) override {
    Statement update(db_, cache_,
                     "UPDATE bso_job SET policy_state = ?2, stage = ?3, min_cost = ?4, "
                     "min_cost_batch_size = ?5 WHERE job_id = ?1");
    update.bind(1, job.spec.job_id.value())
        .bind(2, job.policy_state)
        .bind(3, job.stage)
        .bind(4, job.min_cost)
        .bind(5, job.min_cost_batch_size);
    update.step();
  }
  bool delete_job(const std::string& job_id) override {
    Statement remove(db_, cache_, "DELETE FROM bso_job WHERE job_id = ?1");
    remove.bind(1, job_id);
    remove.step();
    return sqlite3_changes(db_) > 0;
  }
  std::vector<std::string> list_job_ids(const std::string& after, std::size_t limit) override {
    Statement query(db_, cache_,
                    "SELECT job_id FROM bso_job WHERE job_id > ?1 ORDER BY job_id LIMIT ?2");
    query.bind(1, after).bind(2, static_cast<std::int64_t>(limit));
    std::vector<std::string> ids;
    while (query.step()) {
      ids.push_back(query.text(0));
    }
    return ids;
  }
  std::int64_t count_jobs() override {
    Statement query(db_, cache_, "SELECT count(*) FROM bso_job");
    return query.step() ? query.int64(0) : 0;
  }
  std::optional<TrialRecord> get_trial(const std::string& job_id, int trial_number) override {
    Statement query(db_, cache_, kTrialByNumber);
    query.bind(1, job_id).bind(2, trial_number);
    if (!query.step()) {
      return std::nullopt;
    }
    return rows::trial_from_row(query);
  }
  void insert_trial(const TrialRecord& trial) override {
    Statement insert(db_, cache_,
                     "INSERT INTO bso_trial (job_id, trial_number, batch_size, type, status, "
                     "start_ms, end_ms, time_s, energy_j, metric, epochs, converged) VALUES (?1, "
                     "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    insert.bind(1, trial.job_id)
        .bind(2, trial.trial_number)
        .bind(3, trial.batch_size)
        .bind(4, trial.type)
        .bind(5, trial.status)
        .bind(6, trial.start_ms)
        .bind(7, trial.end_ms)
        .bind(8, trial.time_s)
        .bind(9, trial.energy_j)
        .bind(10, trial.metric)
        .bind(11, trial.epochs)
        .bind(12, trial.converged);
    insert.step();
  }
  void update_trial(const TrialRecord& trial) override {
    Statement update(db_, cache_,
                     "UPDATE bso_trial SET status = ?3, end_ms = ?4, time_s = ?5, energy_j = ?6, "
                     "metric = ?7, epochs = ?8, converged = ?9 WHERE job_id = ?1 AND "
                     "trial_number = ?2");
    update.bind(1, trial.job_id)
        .bind(2, trial.trial_number)
        .bind(3, trial.status)
        .bind(4, trial.end_ms)
        .bind(5, trial.time_s)
        .bind(6, trial.energy_j)
        .bind(7, trial.metric)
        .bind(8, trial.epochs)
        .bind(9, trial.converged);
    update.step();
  }
  using StoreTransaction::list_trials;
  std::vector<TrialRecord> list_trials(const std::string& job_id, int after_trial_number,
                                       std::size_t limit) override {
    Statement query(db_, cache_, kTrialsOfJob);
    query.bind(1, job_id);
    query.bind(2, after_trial_number);
    query.bind(3, static_cast<std::int64_t>(
                      std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max())));
    std::vector<TrialRecord> trials;
    while (query.step()) {
      trials.push_back(rows::trial_from_row(query));
    }
    return trials;
  }

 private:
  sqlite3* db_;
  StatementCache& cache_;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, const StoreOptions& options, bool synchronous_full, bool exclusive)
      : path_(std::move(path)), options_(options) {
    const int rc =
        sqlite3_open_v2(path_.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      db_ = nullptr;
      throw StoreError(StoreFailure::kUnavailable,
                       "cannot open the SQLite database \"" + path_ + "\": " + message +
                           " (check that its directory exists and is writable)");
    }
    bool checking = false;  // a failure then is one the check found: skipping it may serve
    try {
      sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
      exec(db_, "PRAGMA foreign_keys = ON");
      if (exclusive) {
        // The server owns the file: its lock is taken once and kept, and the WAL index lives in
        // process memory, so a transaction makes no file-locking system calls (about 9 fewer
        // per request). Set before the first WAL access, as SQLite requires.
        exec(db_, "PRAGMA locking_mode = EXCLUSIVE");
      }
      if (path_ != ":memory:") {
        // WAL needs a writable directory; on a read-only database keep the existing mode.
        if (sqlite3_db_readonly(db_, "main") == 0) {
          Statement wal(db_, "PRAGMA journal_mode = WAL");
          wal.step();
        }
      }
      exec(db_, synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
      if (options_.check_integrity) {
        checking = true;
        check_integrity();
        checking = false;
      }
      migrate();
    } catch (const SqliteError& error) {
      const std::string file = file_of(db_);
      const bool read_only = sqlite3_db_readonly(db_, "main") == 1;
      sqlite3_close(db_);
      db_ = nullptr;
      if (error.corruption()) {
        throw corrupt_file(
            file, (checking ? "PRAGMA quick_check failed: " : "") + std::string(error.what()),
            checking);
      }
      if (read_only) {
        throw StoreError(StoreFailure::kReadOnly,
                         "cannot open the SQLite database \"" + file +
                             "\": this user may only read it (the file or its directory is not "
                             "writable, or its file system is read-only), and SQLite cannot read "
                             "a database in WAL mode without writing beside it; give this user "
                             "write access to the file and its directory (" +
                             error.what() + ")");
      }
      if (error.failure() != StoreFailure::kConflict) {
        throw;
      }
      throw StoreError(StoreFailure::kConflict,
                       "the SQLite database \"" + path_ +
                           "\" is in use by another process (another zeus bso serve?): a "
                           "SQLite database serves one server process; stop the other one, "
                           "or use PostgreSQL to run several servers (" +
                           error.what() + ")");
    } catch (...) {
      sqlite3_close(db_);
      db_ = nullptr;
      throw;
    }
  }
  ~SqliteStore() override {
    cache_.clear();
    sqlite3_close(db_);
  }

  // No retry loop: BEGIN IMMEDIATE takes the write lock first, so a transaction cannot deadlock
  // half-way; SQLite's busy handler has already waited busy_timeout_ms for another process's
  // lock when SQLITE_BUSY comes back.
  void transact(const std::function<void(StoreTransaction&)>& body) override {
    std::lock_guard lock(mutex_);
    try {
      if (run_once(body)) {
        failure_.reset();  // a write went through: the storage works again
      }
    } catch (const SqliteError& error) {
      if (error.storage_failure()) {
        failure_ = rows::StorageFailure{error.what(), error.corruption()};
      }
      throw;
    }
  }

  std::string describe() const override { return "sqlite:///" + path_; }

  int schema_version() override {
    std::lock_guard lock(mutex_);
    return read_version();
  }

  StoreHealth health() override {
    std::lock_guard lock(mutex_);
    try {
      if (sqlite3_db_readonly(db_, "main") == 1) {
        return {false, "SQLite database \"" + file_of(db_) +
                           "\" is open read-only (this user may not write the file or its "
                           "directory, or its file system is read-only): every write fails"};
      }
      if (failure_) {
        if (failure_->corruption) {
          return {false, "the last transaction failed: " + failure_->message};
        }
        // A one-page probe fits in the space that the failed transaction's frames already took
        // in the WAL, so on a full file system it succeeds while every real write still fails:
        // after a storage failure, health also wants room for a real write.
        if (const std::string short_of_space = too_little_space(); !short_of_space.empty()) {
          return {false, short_of_space + "; the last write failed: " + failure_->message};
        }
        try {
          probe_write();
        } catch (const SqliteError& error) {
          failure_->message = error.what();
          return {false, std::string("writes fail: ") + error.what()};
        }
        failure_.reset();
      }
      read_version();
      return {true, {}};
    } catch (const std::exception& error) {
      return {false, error.what()};
    }
  }

 private:
  // True when the transaction changed rows.
  bool run_once(const std::function<void(StoreTransaction&)>& body) {
    exec(db_, "BEGIN IMMEDIATE");
    try {
      const int changes_before = sqlite3_total_changes(db_);
      SqliteTransaction transaction(db_, cache_);
      body(transaction);
      const bool wrote = sqlite3_total_changes(db_) != changes_before;
      exec(db_, "COMMIT");
      return wrote;
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // One small committed write that leaves the schema version as it was: a page appended to the
  // WAL (SQLite skips writing a row rewritten with its own content, hence the two updates).
  void probe_write() {
    exec(db_, "BEGIN IMMEDIATE");
    try {
      exec(db_, "UPDATE zeus_schema SET version = version + 1");
      exec(db_, "UPDATE zeus_schema SET version = version - 1");
      exec(db_, "COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // Why the file system that holds the database has too little room for a real write
  // (kMinFreeBytes); empty when it has room, or cannot say.
  std::string too_little_space() const {
    const std::string file = file_of(db_);
    struct statvfs info {};
    if (file == ":memory:" || ::statvfs(file.c_str(), &info) != 0) {
      return {};
    }
    const unsigned long long free_bytes =
        static_cast<unsigned long long>(info.f_bavail) * info.f_frsize;
    if (free_bytes >= kMinFreeBytes) {
      return {};
    }
    return "the file system that holds the SQLite database \"" + file + "\" has " +
           std::to_string(free_bytes / 1024) + " KiB free (health returns once it has " +
           std::to_string(kMinFreeBytes >> 20) + " MiB and a write works): free some space";
  }

  int read_version() {
    Statement query(db_, "SELECT version FROM zeus_schema");
    return query.step() ? static_cast<int>(query.int64(0)) : 0;
  }

  // PRAGMA quick_check: every page's structure and every record's format (not the indexes'
  // content), in one read of the file.
  void check_integrity() {
    Statement check(db_, "PRAGMA quick_check(8)");
    std::string problems;
    while (check.step()) {
      const std::string line = check.text(0);
      if (line != "ok") {
        problems += (problems.empty() ? "" : "; ") + line;
      }
    }
    if (!problems.empty()) {
      throw corrupt_file(file_of(db_), "PRAGMA quick_check found: " + problems, true);
    }
  }

  // `found_by_check`: the integrity check found it, so skipping the check serves the file.
  static StoreError corrupt_file(const std::string& file, const std::string& detail,
                                 bool found_by_check) {
    return StoreError(
        StoreFailure::kCorrupt,
        "the SQLite database \"" + file + "\" is corrupt (" + detail +
            "). zeus bso serve refuses to serve it: stop every process that uses it and keep a "
            "copy of the file, then restore it from a backup, or recover what is readable with "
            "`sqlite3 '" +
            file + "' .recover | sqlite3 '" + file + ".recovered'` and serve the recovered file" +
            (found_by_check
                 ? std::string("; --skip-integrity-check (StoreOptions::check_integrity = false) "
                               "serves it as it is, and requests that touch the damaged pages "
                               "fail")
                 : std::string()));
  }

  void migrate() {
    const auto& all = schema::migrations();
    exec(db_, "BEGIN IMMEDIATE");
    try {
      exec(db_, std::string(schema::kVersionTable));
      const int version = read_version();
      if (version > static_cast<int>(all.size())) {
        throw StoreError(StoreFailure::kCorrupt,
                         "the database schema version " + std::to_string(version) +
                             " is newer than this zeus knows (" + std::to_string(all.size()) +
                             "); upgrade zeus");
      }
      for (std::size_t i = static_cast<std::size_t>(version); i < all.size(); ++i) {
        exec(db_, std::string(all[i]));
      }
      if (version < static_cast<int>(all.size())) {
        exec(db_, "DELETE FROM zeus_schema");
        exec(db_, "INSERT INTO zeus_schema (version) VALUES (" + std::to_string(all.size()) + ")");
      }
      exec(db_, "COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  std::string path_;
  StoreOptions options_;
  sqlite3* db_ = nullptr;
  StatementCache cache_;
  std::mutex mutex_;
  std::optional<rows::StorageFailure> failure_;  // under mutex_
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path, const StoreOptions& options) {
  std::string file = path;
  bool synchronous_full = false;
  bool exclusive = true;
  if (const auto query = file.find('?'); query != std::string::npos) {
    std::string parameters = file.substr(query + 1);
    file.resize(query);
    for (const std::string_view parameter : text::split(parameters, '&')) {
      if (parameter == "synchronous=full" || parameter == "synchronous=normal") {
        synchronous_full = parameter == "synchronous=full";
      } else if (parameter == "locking=exclusive" || parameter == "locking=shared") {
        exclusive = parameter == "locking=exclusive";
      } else {
        throw Error(ErrorKind::kInvalidArgument,
                    "unknown SQLite URL parameter \"" + std::string(parameter) +
                        "\"; use synchronous=normal|full and locking=exclusive|shared");
      }
    }
  }
  if (file.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the SQLite URL has no file path; use sqlite:///relative.db or "
                "sqlite:////absolute/path.db");
  }
  return std::make_unique<SqliteStore>(file, options, synchronous_full, exclusive);
}

}  // namespace zeus::server
