// SQLite plumbing of the SQLite store: errors that name the file and say what to do, prepared
// statements (cached for the connection's life) and their columns. Internal to the server.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "server/store.hpp"

namespace zeus::server::sqlite {

// The store's failure class of an SQLite result code.
StoreFailure failure_for(int code);

// A failure SQLite reported, with its result code (what the store's health remembers).
class SqliteError : public StoreError {
 public:
  SqliteError(int code, const std::string& message)
      : StoreError(failure_for(code), message), code_(code) {}
  int code() const noexcept { return code_; }
  // The storage itself failed (rather than a lock, a constraint or a statement).
  bool storage_failure() const noexcept {
    switch (code_ & 0xff) {
      case SQLITE_FULL:
      case SQLITE_IOERR:
      case SQLITE_READONLY:
      case SQLITE_CANTOPEN:
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return true;
      default:
        return false;
    }
  }
  bool corruption() const noexcept {
    return (code_ & 0xff) == SQLITE_CORRUPT || (code_ & 0xff) == SQLITE_NOTADB;
  }

 private:
  int code_;
};

// The file's absolute path, as SQLite opened it (":memory:" for none).
std::string file_of(sqlite3* db);

// Every message names the file: one server may serve several, and the operator needs it.
SqliteError sqlite_error(sqlite3* db, int code, const std::string& what);

// Throws SqliteError when the statement does not compile.
sqlite3_stmt* prepare(sqlite3* db, const std::string& sql);

// Runs statements without results; throws SqliteError.
void exec(sqlite3* db, const std::string& sql);

// Prepared statements kept for the connection's life: parsing SQL costs more than running
// these small statements. Used under the store's mutex only.
class StatementCache {
 public:
  StatementCache() = default;
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache() { clear(); }
  sqlite3_stmt* get(sqlite3* db, const std::string& sql) {
    auto found = statements_.find(sql);
    if (found == statements_.end()) {
      found = statements_.emplace(sql, prepare(db, sql)).first;
    }
    return found->second;
  }
  void clear() {
    for (auto& [sql, stmt] : statements_) {
      sqlite3_finalize(stmt);
    }
    statements_.clear();
  }

 private:
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

class Statement {
 public:
  // A one-off statement.
  Statement(sqlite3* db, const std::string& sql) : db_(db), stmt_(prepare(db, sql)), owned_(true) {}
  // A cached one, reset for reuse when this goes out of scope.
  Statement(sqlite3* db, StatementCache& cache, const std::string& sql)
      : db_(db), stmt_(cache.get(db, sql)), owned_(false) {}
  ~Statement() {
    if (owned_) {
      sqlite3_finalize(stmt_);
    } else {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, const std::string& value) {
    check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind(int index, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value) {
    check(sqlite3_bind_double(stmt_, index, value));
    return *this;
  }
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    if (!value) {
      check(sqlite3_bind_null(stmt_, index));
      return *this;
    }
    if constexpr (std::is_same_v<T, bool>) {
      return bind(index, *value ? 1 : 0);
    } else {
      return bind(index, *value);
    }
  }

  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // true while there is a row.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) {
      return true;
    }
    if (rc == SQLITE_DONE) {
      return false;
    }
    throw sqlite_error(db_, rc, sqlite3_errmsg(db_));
  }

  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::string text(int column) const {
    const auto* data = sqlite3_column_text(stmt_, column);
    return data == nullptr
               ? std::string()
               : std::string(reinterpret_cast<const char*>(data),
                             static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
  }
  std::int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }
  std::optional<double> optional_real(int column) const {
    return is_null(column) ? std::nullopt : std::optional<double>(real(column));
  }
  std::optional<std::int64_t> optional_int64(int column) const {
    return is_null(column) ? std::nullopt : std::optional<std::int64_t>(int64(column));
  }
  // The row reader rows::job_from_row and rows::trial_from_row expect.
  template <typename T>
  T integer(int column) const {
    return static_cast<T>(int64(column));
  }
  template <typename T>
  std::optional<T> optional_integer(int column) const {
    return is_null(column) ? std::nullopt : std::optional<T>(integer<T>(column));
  }
  std::optional<bool> optional_boolean(int column) const {
    return is_null(column) ? std::nullopt : std::optional<bool>(int64(column) != 0);
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) {
      throw sqlite_error(db_, rc, sqlite3_errmsg(db_));
    }
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool owned_ = true;
};

}  // namespace zeus::server::sqlite
