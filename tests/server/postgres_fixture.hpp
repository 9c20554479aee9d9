// Test helper: a real, throw-away PostgreSQL server (initdb + pg_ctl from the postgresql
// package) on a free loopback port, with its data directory and unix socket in a temporary
// directory. Trust authentication, fsync off: for tests only.
//
// Running as root (CI, containers) the server runs as the `postgres` system user through
// `runuser`, since initdb refuses root. A watchdog process stops the server and removes the
// directory when this object is destroyed or when the test process dies, however it dies.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace zeus::test {

class PostgresServer {
 public:
  // Starts a server. Returns null and sets `why` when PostgreSQL is not installed (the caller
  // skips its tests with that reason); throws std::runtime_error when it is installed but does
  // not start (the test fails, with the server's log).
  static std::unique_ptr<PostgresServer> start_or_skip_reason(std::string& why);

  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // "postgresql://postgres@127.0.0.1:<port>/<db>".
  std::string url(const std::string& db) const;
  // CREATE DATABASE <name>; `name` is letters, digits and underscores.
  void create_database(const std::string& name);
  // Runs SQL (one or more statements) in database `db` as the superuser; throws
  // std::runtime_error with the server's message on failure.
  void execute(const std::string& db, const std::string& sql);
  // The first column of the first row of a query's result ("" when there is no row).
  std::string query_value(const std::string& db, const std::string& sql);

  int port() const { return port_; }
  const std::filesystem::path& directory() const { return directory_; }

 private:
  PostgresServer() = default;
  void start(const std::filesystem::path& bin_dir, bool as_postgres_user);
  // argv, prefixed with runuser when running as root; output to `log`. Returns the exit status.
  int run(std::vector<std::string> argv, const std::filesystem::path& log) const;
  void spawn_watchdog(const std::filesystem::path& bin_dir);

  std::filesystem::path bin_dir_;
  std::filesystem::path directory_;
  bool as_postgres_user_ = false;
  int port_ = 0;
  int watchdog_control_fd_ = -1;  // closing it makes the watchdog stop the server
  int watchdog_done_fd_ = -1;     // reaches EOF when the watchdog has finished
};

}  // namespace zeus::test
