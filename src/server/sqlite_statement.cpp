// SQLite errors, statements and their execution for the SQLite store.
#include "server/sqlite_statement.hpp"

namespace zeus::server::sqlite {
namespace {

// What to do about a failure of the storage.
std::string advice_for(int code) {
  switch (code & 0xff) {
    case SQLITE_FULL:
      return " (the file system that holds it is full: free some space)";
    case SQLITE_IOERR:
      return " (the operating system failed a read or write of the file: check the disk, the "
             "kernel log and the free space)";
    case SQLITE_READONLY:
      return " (the file refuses writes: check that this user may write it and its directory, "
             "that the file system is not mounted read-only, and that the file was not replaced "
             "or deleted while the server ran)";
    case SQLITE_CANTOPEN:
      return " (check that the file and its directory exist and that this user may write them)";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return " (the file is damaged or is not an SQLite database: restore it from a backup, or "
             "recover what is readable with `sqlite3 FILE .recover`)";
    default:
      return "";
  }
}

}  // namespace

StoreFailure failure_for(int code) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return StoreFailure::kConflict;
    case SQLITE_READONLY:
      return StoreFailure::kReadOnly;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
      return StoreFailure::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return StoreFailure::kCorrupt;
    default:
      return StoreFailure::kOther;
  }
}

std::string file_of(sqlite3* db) {
  const char* file = sqlite3_db_filename(db, "main");
  return file == nullptr || *file == '\0' ? std::string(":memory:") : std::string(file);
}

SqliteError sqlite_error(sqlite3* db, int code, const std::string& what) {
  return SqliteError(code, "SQLite database \"" + file_of(db) + "\": " + what + advice_for(code));
}

sqlite3_stmt* prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size() + 1),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    throw sqlite_error(db, rc, std::string("cannot prepare a statement: ") + sqlite3_errmsg(db));
  }
  return stmt;
}

void exec(sqlite3* db, const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    const std::string text = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    throw sqlite_error(db, rc, text);
  }
}

}  // namespace zeus::server::sqlite
