// The PostgreSQL store: a pool of libpq connections, one READ COMMITTED transaction per
// Store::transact, row locks (SELECT ... FOR UPDATE) for the job being changed, and schema
// migrations serialised across processes by an advisory lock. See docs/bso-storage.md.
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
#include "server/store.hpp"
#include "store_rows.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/error.hpp"

namespace zeus::server {
namespace {

// pg_advisory_xact_lock key taken while migrating ("zeus" in ASCII, then 1), so that server
// processes starting at once against one database migrate it exactly once.
constexpr std::int64_t kMigrationLockKey = 0x7A65757300000001;
constexpr int kDefaultConnectTimeoutS = 5;

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnectionDeleter {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};
using Connection = std::unique_ptr<PGconn, ConnectionDeleter>;

// libpq messages end with a newline and may span lines ("\n\tIs the server running ...").
std::string one_line(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) {
      out += ' ';
      space = false;
    }
    out += c;
  }
  return out;
}

bool starts_with_uri_scheme(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

// A libpq URI without its password (user:password@ and ?password=...).
std::string redact_uri(const std::string& url) {
  const std::size_t scheme_end = url.find("://") + 3;
  std::string out = url.substr(0, scheme_end);
  // libpq ends the user part at the first '@' before any '/'.
  std::size_t rest = scheme_end;
  const std::size_t at_or_slash = url.find_first_of("@/", scheme_end);
  if (at_or_slash != std::string::npos && url[at_or_slash] == '@') {
    const std::string user_info = url.substr(scheme_end, at_or_slash - scheme_end);
    out += user_info.substr(0, user_info.find(':'));
    out += '@';
    rest = at_or_slash + 1;
  }
  const std::size_t query = url.find('?', rest);
  out += url.substr(rest, query == std::string::npos ? std::string::npos : query - rest);
  if (query == std::string::npos) {
    return out;
  }
  std::string kept;
  std::size_t begin = query + 1;
  while (begin <= url.size()) {
    std::size_t end = url.find('&', begin);
    if (end == std::string::npos) {
      end = url.size();
    }
    const std::string param = url.substr(begin, end - begin);
    if (!param.empty() && param.substr(0, param.find('=')) != "password") {
      kept += (kept.empty() ? "" : "&") + param;
    }
    begin = end + 1;
  }
  if (!kept.empty()) {
    out += "?" + kept;
  }
  return out;
}

// A keyword/value connection string ("host=... dbname=...") without its password.
std::string redact_keyword_value(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  PQfreemem(error);
  if (options == nullptr) {
    return "(unparseable PostgreSQL connection string)";
  }
  std::string out;
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (option->val == nullptr || std::string_view(option->keyword) == "password") {
      continue;
    }
    std::string value;
    for (const char* c = option->val; *c != '\0'; ++c) {
      if (*c == '\'' || *c == '\\') {
        value += '\\';
      }
      value += *c;
    }
    if (!out.empty()) {
      out.append(" ");
    }
    out.append(option->keyword).append("='").append(value).append("'");
  }
  PQconninfoFree(options);
  return out;
}

std::string redact(const std::string& url) {
  return starts_with_uri_scheme(url) ? redact_uri(url) : redact_keyword_value(url);
}

// The password given in the URL, to scrub it from libpq's messages should one ever quote it.
std::string password_of(const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  PQfreemem(error);
  if (options == nullptr) {
    return {};
  }
  std::string password;
  for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (std::string_view(option->keyword) == "password" && option->val != nullptr) {
      password = option->val;
    }
  }
  PQconninfoFree(options);
  return password;
}

std::string scrub(std::string text, const std::string& password) {
  if (password.empty()) {
    return text;
  }
  for (std::size_t at = text.find(password); at != std::string::npos;
       at = text.find(password, at)) {
    text.replace(at, password.size(), "***");
    at += 3;
  }
  return text;
}

// An error from a statement, with what the retry logic needs to know.
class PgError : public StoreError {
 public:
  PgError(StoreFailure failure, const std::string& message, std::string sqlstate,
          bool connection_lost)
      : StoreError(failure, message),
        sqlstate_(std::move(sqlstate)),
        connection_lost_(connection_lost) {}
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  bool connection_lost() const noexcept { return connection_lost_; }
  // 40001 serialization_failure, 40P01 deadlock_detected: the transaction may simply be rerun.
  bool serialization_failure() const noexcept {
    return sqlstate_ == "40001" || sqlstate_ == "40P01";
  }

 private:
  std::string sqlstate_;
  bool connection_lost_;
};

StoreFailure failure_for(std::string_view sqlstate) {
  if (sqlstate == "40001" || sqlstate == "40P01") {
    return StoreFailure::kConflict;
  }
  if (sqlstate == "25006") {
    return StoreFailure::kReadOnly;
  }
  // 08: connection exceptions; 53: insufficient resources (too many connections, disk full);
  // 57P01-57P03: the server is shutting down or starting; 55P03: lock_timeout expired; 58030:
  // the server's I/O failed.
  if (sqlstate.starts_with("08") || sqlstate.starts_with("53") || sqlstate == "57P01" ||
      sqlstate == "57P02" || sqlstate == "57P03" || sqlstate == "55P03" || sqlstate == "58030") {
    return StoreFailure::kUnavailable;
  }
  // XX001 data_corrupted, XX002 index_corrupted.
  if (sqlstate == "XX001" || sqlstate == "XX002") {
    return StoreFailure::kCorrupt;
  }
  return StoreFailure::kOther;
}

// The server's storage failed (rather than a lock, a connection or a statement): what health()
// remembers until a write succeeds. 25006 read-only, 53100 disk full, 58030 I/O error, XX001 and
// XX002 corruption.
bool storage_failure(std::string_view sqlstate) {
  return sqlstate == "25006" || sqlstate == "53100" || sqlstate == "58030" || sqlstate == "XX001" ||
         sqlstate == "XX002";
}

// Text parameters for PQexecParams; nullopt is SQL NULL.
class Params {
 public:
  Params& text(std::string value) {
    values_.emplace_back(std::move(value));
    return *this;
  }
  Params& integer(std::int64_t value) { return text(std::to_string(value)); }
  Params& real(double value) {
    // 17 significant digits always round-trip a double exactly; PostgreSQL reads "nan" and
    // "inf" too.
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return text(buffer);
  }
  Params& boolean(bool value) { return text(value ? "true" : "false"); }
  Params& null() {
    values_.emplace_back(std::nullopt);
    return *this;
  }
  template <typename T>
  Params& optional_integer(const std::optional<T>& value) {
    return value ? integer(*value) : null();
  }
  Params& optional_real(const std::optional<double>& value) {
    return value ? real(*value) : null();
  }
  Params& optional_boolean(const std::optional<bool>& value) {
    return value ? boolean(*value) : null();
  }

  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> pointers() const {
    std::vector<const char*> out;
    out.reserve(values_.size());
    for (const std::optional<std::string>& value : values_) {
      out.push_back(value ? value->c_str() : nullptr);
    }
    return out;
  }

 private:
  std::vector<std::optional<std::string>> values_;
};

// Reads the columns of one result row, naming the row in errors about stored values that do not
// parse (StoreFailure::kCorrupt).
class Row {
 public:
  Row(const PGresult* result, int row, std::string what)
      : result_(result), row_(row), what_(std::move(what)) {}

  bool is_null(int column) const { return PQgetisnull(result_, row_, column) != 0; }
  std::string text(int column) const { return PQgetvalue(result_, row_, column); }

  template <typename T>
  T integer(int column) const {
    const char* value = PQgetvalue(result_, row_, column);
    const char* end = value + std::char_traits<char>::length(value);
    T out{};
    const auto [ptr, error] = std::from_chars(value, end, out);
    if (error != std::errc() || ptr != end || ptr == value) {
      corrupt(column, value, "an integer");
    }
    return out;
  }
  double real(int column) const {
    const char* value = PQgetvalue(result_, row_, column);
    char* end = nullptr;
    const double out = std::strtod(value, &end);
    if (end == value || *end != '\0') {
      corrupt(column, value, "a number");
    }
    return out;
  }
  bool boolean(int column) const {
    const std::string_view value = PQgetvalue(result_, row_, column);
    if (value != "t" && value != "f") {
      corrupt(column, value, "a boolean ('t' or 'f')");
    }
    return value == "t";
  }
  template <typename T>
  std::optional<T> optional_integer(int column) const {
    return is_null(column) ? std::nullopt : std::optional<T>(integer<T>(column));
  }
  std::optional<double> optional_real(int column) const {
    return is_null(column) ? std::nullopt : std::optional<double>(real(column));
  }
  std::optional<bool> optional_boolean(int column) const {
    return is_null(column) ? std::nullopt : std::optional<bool>(boolean(column));
  }

  [[noreturn]] void corrupt(int column, std::string_view value, std::string_view expected) const {
    throw StoreError(StoreFailure::kCorrupt, what_ + ": column " + PQfname(result_, column) +
                                                 " holds '" + std::string(value) + "', not " +
                                                 std::string(expected));
  }

 private:
  const PGresult* result_;
  int row_;
  std::string what_;
};

constexpr const char* kJobColumns =
    "job_id, spec, policy_state, stage, min_cost, min_cost_batch_size, created_ms";
constexpr const char* kTrialColumns =
    "job_id, trial_number, batch_size, type, status, start_ms, end_ms, time_s, energy_j, metric, "
    "epochs, converged";

JobRecord job_from_row(const Row& row) {
  JobRecord job;
  const std::string job_id = row.text(0);
  job.spec = rows::spec_from_text(row.text(1), job_id);
  job.spec.job_id = job_id;
  job.policy_state = row.text(2);
  job.stage = row.text(3);
  job.min_cost = row.optional_real(4);
  job.min_cost_batch_size = row.integer<int>(5);
  job.created_ms = row.integer<std::int64_t>(6);
  return job;
}

TrialRecord trial_from_row(const Row& row) {
  TrialRecord trial;
  trial.job_id = row.text(0);
  trial.trial_number = row.integer<int>(1);
  trial.batch_size = row.integer<int>(2);
  trial.type = row.text(3);
  trial.status = row.text(4);
  trial.start_ms = row.integer<std::int64_t>(5);
  trial.end_ms = row.optional_integer<std::int64_t>(6);
  trial.time_s = row.optional_real(7);
  trial.energy_j = row.optional_real(8);
  trial.metric = row.optional_real(9);
  trial.epochs = row.optional_integer<int>(10);
  trial.converged = row.optional_boolean(11);
  return trial;
}

// Runs statements on one connection and turns failures into PgError.
class Session {
 public:
  Session(PGconn* connection, const std::string& description, const std::string& password)
      : connection_(connection), description_(description), password_(password) {}

  // One statement with text parameters.
  Result exec(const char* sql, const Params& params, const std::string& what) {
    const std::vector<const char*> values = params.pointers();
    Result result(
        PQexecParams(connection_, sql, params.size(), nullptr, values.data(), nullptr, nullptr, 0));
    check(result, what);
    return result;
  }
  // One or more statements without parameters (migrations, BEGIN, COMMIT).
  Result exec(const char* sql, const std::string& what) {
    Result result(PQexec(connection_, sql));
    check(result, what);
    return result;
  }

  PGconn* connection() const { return connection_; }
  const std::string& description() const { return description_; }

 private:
  void check(const Result& result, const std::string& what) {
    const ExecStatusType status =
        result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;  // null: out of memory
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      return;
    }
    const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state != nullptr ? state : "";
    std::string message = one_line(result ? PQresultErrorMessage(result.get()) : "");
    if (message.empty()) {
      message = one_line(PQerrorMessage(connection_));
    }
    message = scrub(message, password_);
    if (PQstatus(connection_) != CONNECTION_OK) {
      throw PgError(StoreFailure::kUnavailable,
                    "lost the connection to PostgreSQL at " + description_ + " while " + what +
                        ": " + message + "; check that the server is running",
                    sqlstate, true);
    }
    const StoreFailure failure = failure_for(sqlstate);
    std::string text = "PostgreSQL at " + description_ + " failed " + what + ": " + message;
    if (!sqlstate.empty()) {
      text += " (SQLSTATE " + sqlstate + ")";
    }
    if (failure == StoreFailure::kReadOnly) {
      text += "; the database refuses writes (a standby, or default_transaction_read_only)";
    }
    throw PgError(failure, text, sqlstate, false);
  }

  PGconn* connection_;
  const std::string& description_;
  const std::string& password_;
};

class PgTransaction final : public StoreTransaction {
 public:
  explicit PgTransaction(Session& session) : session_(session) {}

  // Whether a write statement ran (for the store's health).
  bool wrote() const { return wrote_; }

  std::optional<JobRecord> lock_job(const std::string& job_id) override {
    return select_job(job_id, true);
  }
  std::optional<JobRecord> get_job(const std::string& job_id) override {
    return select_job(job_id, false);
  }

  bool insert_job(const JobRecord& job) override {
    if (!job.spec.job_id || job.spec.job_id->empty()) {
      throw Error(ErrorKind::kInvalidArgument, "insert_job needs a job whose spec.job_id is set");
    }
    const std::string& job_id = *job.spec.job_id;
    const std::string what = "inserting job '" + job_id + "'";
    wrote_ = true;
    const Result inserted = session_.exec(
        "INSERT INTO bso_job (job_id, job_id_prefix, spec, policy_state, stage, min_cost, "
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
      array += (i == 0 ? "" : ",") + std::to_string(job.spec.batch_sizes[i]);
    }
    array += "}";
    session_.exec(
        "INSERT INTO bso_batch_size (job_id, batch_size) "
        "SELECT $1, unnest($2::integer[]) ON CONFLICT DO NOTHING",
        Params().text(job_id).text(array), "inserting the batch sizes of job '" + job_id + "'");
    return true;
  }

  void update_job(const JobRecord& job) override {
    wrote_ = true;
    const std::string job_id = job.spec.job_id.value_or("");
    session_.exec(
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
    const Result result = session_.exec("DELETE FROM bso_job WHERE job_id = $1",
                                        Params().text(job_id), "deleting job '" + job_id + "'");
    return std::string_view(PQcmdTuples(result.get())) == "1";
  }

  std::vector<std::string> list_job_ids() override {
    // COLLATE "C": byte order, like SQLite's, whatever the database's locale.
    const Result result = session_.exec("SELECT job_id FROM bso_job ORDER BY job_id COLLATE \"C\"",
                                        Params(), "listing jobs");
    std::vector<std::string> ids;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
      ids.emplace_back(PQgetvalue(result.get(), row, 0));
    }
    return ids;
  }

  std::optional<TrialRecord> get_trial(const std::string& job_id, int trial_number) override {
    const std::string what =
        "reading trial " + std::to_string(trial_number) + " of job '" + job_id + "'";
    const Result result = session_.exec((std::string("SELECT ") + kTrialColumns +
                                         " FROM bso_trial WHERE job_id = $1 AND trial_number = $2")
                                            .c_str(),
                                        Params().text(job_id).integer(trial_number), what);
    if (PQntuples(result.get()) == 0) {
      return std::nullopt;
    }
    return trial_from_row(Row(result.get(), 0, what));
  }

  void insert_trial(const TrialRecord& trial) override {
    wrote_ = true;
    session_.exec(
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
    wrote_ = true;
    session_.exec(
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

  std::vector<TrialRecord> list_trials(const std::string& job_id) override {
    const std::string what = "listing the trials of job '" + job_id + "'";
    const Result result = session_.exec((std::string("SELECT ") + kTrialColumns +
                                         " FROM bso_trial WHERE job_id = $1 ORDER BY trial_number")
                                            .c_str(),
                                        Params().text(job_id), what);
    std::vector<TrialRecord> trials;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
      trials.push_back(trial_from_row(Row(result.get(), row, what)));
    }
    return trials;
  }

 private:
  std::optional<JobRecord> select_job(const std::string& job_id, bool lock) {
    const std::string what = (lock ? "locking job '" : "reading job '") + job_id + "'";
    const std::string sql = std::string("SELECT ") + kJobColumns +
                            " FROM bso_job WHERE job_id = $1" + (lock ? " FOR UPDATE" : "");
    const Result result = session_.exec(sql.c_str(), Params().text(job_id), what);
    if (PQntuples(result.get()) == 0) {
      return std::nullopt;
    }
    return job_from_row(Row(result.get(), 0, what));
  }

  Session& session_;
  bool wrote_ = false;
};

class PostgresStore final : public Store {
 public:
  PostgresStore(const std::string& url, const StoreOptions& options)
      : url_(url), description_(redact(url)), password_(password_of(url)), options_(options) {
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
    check_url();
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
      if (storage_failure(error.sqlstate())) {
        remember_failure(error.what(), error.failure() == StoreFailure::kCorrupt);
      }
      throw;
    }
  }

  std::string describe() const override { return description_; }

  int schema_version() override {
    Lease lease(*this);
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
        Lease lease(*this);
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
            drop_idle();
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
      Lease lease(*this);
      Session session(lease.get(), description_, password_);
      try {
        return run_once(session, body);
      } catch (const PgError& error) {
        rollback_quietly(session);
        if (error.connection_lost()) {
          // Nothing was committed (a loss during COMMIT is not a PgError any more), so the body
          // may run once more. The idle connections most likely went with this one (a server
          // restart): close them all and start afresh.
          drop_idle();
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

  // A pooled connection, returned to the pool when healthy and idle, closed otherwise.
  class Lease {
   public:
    explicit Lease(PostgresStore& store) : store_(store), connection_(store.acquire()) {}
    ~Lease() { store_.release(std::move(connection_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    PGconn* get() const { return connection_.get(); }

   private:
    PostgresStore& store_;
    Connection connection_;
  };

  void check_url() const {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url_.c_str(), &error);
    if (options == nullptr) {
      const std::string message = error != nullptr ? one_line(error) : "out of memory";
      PQfreemem(error);
      throw Error(ErrorKind::kInvalidArgument,
                  "bad PostgreSQL URL " + description_ + ": " + scrub(message, password_) +
                      " (expected postgresql://user:password@host:port/dbname?param=value)");
    }
    PQconninfoFree(options);
  }

  Connection connect() const {
    // Defaults come before the URL (expand_dbname): what the URL says overrides them. They
    // would also override libpq's environment variables, so they yield to those.
    const std::string timeout = std::to_string(kDefaultConnectTimeoutS);
    std::vector<const char*> keywords;
    std::vector<const char*> values;
    const auto set_default = [&](const char* keyword, const char* value, const char* variable) {
      if (const char* set = std::getenv(variable); set == nullptr || *set == '\0') {
        keywords.push_back(keyword);
        values.push_back(value);
      }
    };
    set_default("application_name", "zeus-bso", "PGAPPNAME");
    set_default("connect_timeout", timeout.c_str(), "PGCONNECT_TIMEOUT");
    keywords.push_back("dbname");
    values.push_back(url_.c_str());
    // Job ids, specs and states are UTF-8 whatever the URL or the environment say.
    keywords.push_back("client_encoding");
    values.push_back("UTF8");
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    Connection connection(PQconnectdbParams(keywords.data(), values.data(), 1));
    if (!connection) {
      throw StoreError(StoreFailure::kUnavailable,
                       "cannot connect to PostgreSQL at " + description_ + ": out of memory");
    }
    if (PQstatus(connection.get()) != CONNECTION_OK) {
      throw StoreError(StoreFailure::kUnavailable,
                       "cannot connect to PostgreSQL at " + description_ + ": " +
                           scrub(one_line(PQerrorMessage(connection.get())), password_) +
                           "; check that the server is running and that the URL's host, port, "
                           "database, user and password are right");
    }
    // Notices ("relation zeus_schema already exists, skipping") go to the debug log, not stderr.
    PQsetNoticeProcessor(connection.get(), log_notice, nullptr);
    // lock_timeout bounds the wait for a row lock; extra_float_digits = 3 makes servers older
    // than 12 send doubles exactly too.
    const std::string setup = "SET lock_timeout = " + std::to_string(options_.busy_timeout_ms) +
                              "; SET extra_float_digits = 3";
    Session session(connection.get(), description_, password_);
    session.exec(setup.c_str(), "setting up the session");
    return connection;
  }

  Connection acquire() {
    std::unique_lock lock(pool_mutex_);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max(options_.busy_timeout_ms, 1000));
    while (idle_.empty() && open_ >= options_.pool_size) {
      if (pool_freed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_ >= options_.pool_size) {
        throw StoreError(StoreFailure::kUnavailable,
                         "all " + std::to_string(options_.pool_size) +
                             " connections to PostgreSQL at " + description_ + " stayed busy for " +
                             std::to_string(std::max(options_.busy_timeout_ms, 1000)) +
                             " ms; raise the pool size or lower the load");
      }
    }
    if (!idle_.empty()) {
      Connection connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
    ++open_;
    lock.unlock();
    try {
      return connect();
    } catch (...) {
      lock.lock();
      --open_;
      pool_freed_.notify_one();
      throw;
    }
  }

  void drop_idle() {
    std::vector<Connection> stale;
    {
      std::lock_guard lock(pool_mutex_);
      stale.swap(idle_);
      open_ -= static_cast<int>(stale.size());
    }
    pool_freed_.notify_all();
  }

  void release(Connection connection) {
    const bool reusable = connection && PQstatus(connection.get()) == CONNECTION_OK &&
                          PQtransactionStatus(connection.get()) == PQTRANS_IDLE;
    if (!reusable) {
      connection.reset();  // closed outside the lock would be nicer, but PQfinish is quick
    }
    std::lock_guard lock(pool_mutex_);
    if (reusable) {
      idle_.push_back(std::move(connection));
    } else {
      --open_;
    }
    pool_freed_.notify_one();
  }

  static void log_notice(void* /*unused*/, const char* message) {
    log().debug("PostgreSQL: {}", one_line(message));
  }

  // True when the transaction wrote.
  static bool run_once(Session& session, const std::function<void(StoreTransaction&)>& body) {
    session.exec("BEGIN ISOLATION LEVEL READ COMMITTED", "starting a transaction");
    PgTransaction transaction(session);
    body(transaction);
    if (PQtransactionStatus(session.connection()) == PQTRANS_INERROR) {
      throw StoreError(StoreFailure::kOther,
                       "PostgreSQL at " + session.description() +
                           ": a statement of the transaction failed and the error was caught "
                           "inside the transaction; nothing was committed");
    }
    try {
      session.exec("COMMIT", "committing");
    } catch (const PgError& error) {
      if (error.connection_lost()) {
        // The COMMIT may or may not have reached the server: never rerun the body.
        throw StoreError(
            StoreFailure::kUnavailable,
            std::string(error.what()) + " (the transaction may or may not have been committed)");
      }
      throw;
    }
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
    Lease lease(*this);
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

  std::mutex pool_mutex_;
  std::condition_variable pool_freed_;
  std::vector<Connection> idle_;
  int open_ = 0;  // idle plus leased

  std::mutex failure_mutex_;
  std::optional<rows::StorageFailure> failure_;  // under failure_mutex_
};

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& url, const StoreOptions& options) {
  return std::make_unique<PostgresStore>(url, options);
}

}  // namespace zeus::server
