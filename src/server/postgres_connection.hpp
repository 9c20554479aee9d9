// libpq plumbing of the PostgreSQL store: owned results and connections, messages on one line
// with the password scrubbed, errors classified by SQLSTATE, text parameters, typed columns, a
// session that turns failures into PgError, and the connection pool. Internal to the server.
#pragma once

#include <libpq-fe.h>

#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/store.hpp"

namespace zeus::server::pg {

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnectionDeleter {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};
using Connection = std::unique_ptr<PGconn, ConnectionDeleter>;

// libpq messages end with a newline and may span lines ("\n\tIs the server running ..."): one
// line, blanks collapsed.
std::string one_line(std::string_view text);
// The URL (URI or keyword/value form) with its password replaced by "***", for messages.
std::string redact(const std::string& url);
// The URL's password ("" when none).
std::string password_of(const std::string& url);
// `text` with every occurrence of `password` replaced by "***".
std::string scrub(std::string text, const std::string& password);

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

// The store's failure class of a SQLSTATE.
StoreFailure failure_for(std::string_view sqlstate);

// The server's storage failed (rather than a lock, a connection or a statement): what health()
// remembers until a write succeeds. 25006 read-only, 53100 disk full, 58030 I/O error, XX001 and
// XX002 corruption.
bool storage_failure(std::string_view sqlstate);

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

  // Statements sent together in pipeline mode: one round trip for all of them. Their results in
  // order; the first that failed is thrown as exec would throw it (the later ones did not run).
  struct Statement {
    std::string sql;
    Params params;
    std::string what;
  };
  std::vector<Result> pipeline(const std::vector<Statement>& statements) {
    if (PQenterPipelineMode(connection_) != 1) {
      std::vector<Result> results;
      for (const Statement& statement : statements) {
        results.push_back(exec(statement.sql.c_str(), statement.params, statement.what));
      }
      return results;
    }
    bool sent = true;
    for (const Statement& statement : statements) {
      const std::vector<const char*> values = statement.params.pointers();
      sent = sent && PQsendQueryParams(connection_, statement.sql.c_str(), statement.params.size(),
                                       nullptr, values.data(), nullptr, nullptr, 0) == 1;
    }
    sent = sent && PQpipelineSync(connection_) == 1;
    std::vector<Result> results;
    while (sent && results.size() < statements.size()) {
      Result result(PQgetResult(connection_));
      if (!result) {
        break;  // the connection failed
      }
      // Each statement's results end with a null.
      while (PGresult* extra = PQgetResult(connection_)) {
        PQclear(extra);
      }
      results.push_back(std::move(result));
    }
    if (sent && results.size() == statements.size()) {
      Result sync(PQgetResult(connection_));  // PGRES_PIPELINE_SYNC
    }
    // Fails only with results unread (a broken connection): the pool then closes it.
    PQexitPipelineMode(connection_);
    const Result missing;
    for (std::size_t i = 0; i < statements.size(); ++i) {
      check(i < results.size() ? results[i] : missing, statements[i].what);
    }
    return results;
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

// The store's connections: at most pool_size open, idle ones reused, each set up on connect
// (application name, connect timeout, UTF-8, lock_timeout, exact doubles).
class ConnectionPool {
 public:
  // Throws Error(kInvalidArgument) when `url` does not parse.
  ConnectionPool(std::string url, std::string description, std::string password,
                 const StoreOptions& options);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // An idle connection or a new one; waits up to max(busy_timeout_ms, 1 s) for one to be free,
  // then throws StoreError(kUnavailable).
  Connection acquire();
  // Back to the pool when healthy and idle; closed otherwise.
  void release(Connection connection);
  // Closes every idle connection (after a connection was lost: a server restart took them all).
  void drop_idle();

 private:
  void check_url() const;
  Connection connect() const;

  std::string url_;
  std::string description_;
  std::string password_;
  StoreOptions options_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<Connection> idle_;
  int open_ = 0;  // idle plus leased
};

// A pooled connection, returned to the pool when this goes out of scope.
class Lease {
 public:
  explicit Lease(ConnectionPool& pool) : pool_(pool), connection_(pool.acquire()) {}
  ~Lease() { pool_.release(std::move(connection_)); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  PGconn* get() const { return connection_.get(); }

 private:
  ConnectionPool& pool_;
  Connection connection_;
};

}  // namespace zeus::server::pg
