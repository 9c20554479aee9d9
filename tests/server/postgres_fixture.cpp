#include "server/postgres_fixture.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace zeus::test {
namespace {

namespace fs = std::filesystem;

// The newest /usr/lib/postgresql/<major>/bin with initdb and pg_ctl, or ZEUS_POSTGRES_BIN_DIR.
fs::path find_bin_dir(std::string& why) {
  if (const char* dir = std::getenv("ZEUS_POSTGRES_BIN_DIR"); dir != nullptr && *dir != '\0') {
    if (fs::exists(fs::path(dir) / "initdb") && fs::exists(fs::path(dir) / "pg_ctl")) {
      return dir;
    }
    why = std::string("ZEUS_POSTGRES_BIN_DIR=") + dir + " has no initdb and pg_ctl";
    return {};
  }
  fs::path best;
  int best_major = -1;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator("/usr/lib/postgresql", error)) {
    const fs::path bin = entry.path() / "bin";
    const int major = std::atoi(entry.path().filename().c_str());
    if (major > best_major && fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      best = bin;
      best_major = major;
    }
  }
  if (best.empty()) {
    why =
        "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb): install the "
        "postgresql package (scripts/setup.sh does) or set ZEUS_POSTGRES_BIN_DIR";
  }
  return best;
}

// runuser (util-linux) by its path, in case PATH lacks the sbin directories.
std::string runuser_path() {
  for (const char* path : {"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"}) {
    if (::access(path, X_OK) == 0) {
      return path;
    }
  }
  return "runuser";
}

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw std::system_error(errno, std::generic_category(), "socket");
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int saved = errno;
    ::close(fd);
    throw std::system_error(saved, std::generic_category(), "binding a loopback port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string tail(const fs::path& path, std::size_t max_chars = 3000) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return all.size() > max_chars ? "..." + all.substr(all.size() - max_chars) : all;
}

// Single-quoted for sh; the paths used here never hold a quote (mkdtemp, /usr/lib).
std::string quoted(const std::string& text) {
  if (text.find('\'') != std::string::npos) {
    throw std::invalid_argument("path with a quote: " + text);
  }
  return "'" + text + "'";
}

pid_t spawn(const std::vector<std::string>& argv, const fs::path& cwd, int stdin_fd,
            const fs::path& log, bool new_process_group) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (new_process_group) {
    // Away from the terminal's Ctrl-C: the watchdog must outlive the test to clean up.
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw std::system_error(error, std::generic_category(), "starting " + argv[0]);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "waitpid");
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::unique_ptr<PostgresServer> PostgresServer::start_or_skip_reason(std::string& why) {
  why.clear();
  const fs::path bin_dir = find_bin_dir(why);
  if (bin_dir.empty()) {
    return nullptr;
  }
  const bool as_postgres_user = ::geteuid() == 0;
  if (as_postgres_user && ::getpwnam("postgres") == nullptr) {
    why =
        "running as root, and there is no 'postgres' user to run PostgreSQL as (initdb refuses "
        "root): install the postgresql package, which creates it";
    return nullptr;
  }
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->start(bin_dir, as_postgres_user);
  return server;
}

void PostgresServer::start(const fs::path& bin_dir, bool as_postgres_user) {
  bin_dir_ = bin_dir;
  as_postgres_user_ = as_postgres_user;
  // As root, /tmp rather than $TMPDIR: the postgres user must be able to reach the directory.
  const fs::path parent = as_postgres_user_ ? fs::path("/tmp") : fs::temp_directory_path();
  std::string pattern = (parent / "zeus-pg-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  directory_ = pattern;
  if (as_postgres_user_) {
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr || ::chown(directory_.c_str(), user->pw_uid, user->pw_gid) != 0) {
      const int saved = errno;
      fs::remove_all(directory_);
      throw std::system_error(saved, std::generic_category(),
                              "giving " + directory_.string() + " to the postgres user");
    }
  }
  spawn_watchdog(bin_dir);

  const fs::path data = directory_ / "data";
  const fs::path initdb_log = directory_ / "initdb.log";
  const auto started = std::chrono::steady_clock::now();
  if (run({(bin_dir / "initdb").string(), "-D", data.string(), "-A", "trust", "-U", "postgres",
           "-E", "UTF8", "--locale=C", "--no-sync"},
          initdb_log) != 0) {
    throw std::runtime_error("initdb failed; its output:\n" + tail(initdb_log));
  }

  const fs::path server_log = directory_ / "server.log";
  const fs::path pg_ctl_log = directory_ / "pg_ctl.log";
  for (int attempt = 0;; ++attempt) {
    port_ = free_port();
    const std::string options = "-p " + std::to_string(port_) + " -k " + directory_.string() +
                                " -c listen_addresses=127.0.0.1 -c fsync=off"
                                " -c synchronous_commit=off -c full_page_writes=off"
                                " -c shared_buffers=16MB -c max_connections=100"
                                " -c deadlock_timeout=100ms";
    if (run({(bin_dir / "pg_ctl").string(), "-D", data.string(), "-l", server_log.string(), "-w",
             "-t", "30", "-o", options, "start"},
            pg_ctl_log) == 0) {
      break;
    }
    // Another process may have taken the port between free_port() and the server's bind.
    if (attempt == 2) {
      throw std::runtime_error("PostgreSQL did not start; pg_ctl said:\n" + tail(pg_ctl_log) +
                               "\nthe server log:\n" + tail(server_log));
    }
  }

  // pg_ctl -w waited for the postmaster; also wait until it accepts TCP connections.
  const std::string ping_url = url("postgres") + "?connect_timeout=2";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (PQping(ping_url.c_str()) != PQPING_OK) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("PostgreSQL on port " + std::to_string(port_) +
                               " did not accept connections within 15 s; the server log:\n" +
                               tail(server_log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
  if (elapsed_ms > 10'000) {
    std::fprintf(stderr, "note: PostgreSQL took %lld ms to start\n",
                 static_cast<long long>(elapsed_ms));
  }
}

void PostgresServer::spawn_watchdog(const fs::path& bin_dir) {
  // The watchdog waits for EOF on a pipe whose only write end this process holds (close-on-exec,
  // so no child inherits it): EOF comes from the destructor or from this process's death. It
  // then stops the server and removes the directory. It runs in the background of a shell that
  // exits at once, so it is nobody's child and a killer of this process tree misses it. It holds
  // the write end of a second pipe, which reaches EOF when it is done: the destructor waits so.
  int control[2];
  int done[2];
  if (::pipe2(control, O_CLOEXEC) != 0 || ::pipe2(done, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  // Only the watchdog inherits these two ends; this process closes them right after.
  ::fcntl(control[0], F_SETFD, 0);
  ::fcntl(done[1], F_SETFD, 0);
  std::string stop = quoted((bin_dir / "pg_ctl").string()) + " -D " +
                     quoted((directory_ / "data").string()) + " -m immediate -w -t 30 stop";
  if (as_postgres_user_) {
    stop = quoted(runuser_path()) + " -u postgres -- " + stop;
  }
  const std::string script = "(cat <&" + std::to_string(control[0]) + " >/dev/null; " + stop +
                             " >/dev/null 2>&1; rm -rf -- " + quoted(directory_.string()) + ") &";
  const pid_t shell =
      spawn({"/bin/sh", "-c", script}, "/", -1, "/dev/null", /*new_process_group=*/true);
  ::close(control[0]);
  ::close(done[1]);
  wait_for(shell);
  watchdog_control_fd_ = control[1];
  watchdog_done_fd_ = done[0];
}

PostgresServer::~PostgresServer() {
  if (watchdog_control_fd_ >= 0) {
    ::close(watchdog_control_fd_);
  }
  if (watchdog_done_fd_ >= 0) {
    char buffer[64];
    while (true) {
      const ssize_t n = ::read(watchdog_done_fd_, buffer, sizeof buffer);
      if (n == 0 || (n < 0 && errno != EINTR)) {
        break;
      }
    }
    ::close(watchdog_done_fd_);
  }
}

int PostgresServer::run(std::vector<std::string> argv, const fs::path& log) const {
  if (as_postgres_user_) {
    argv.insert(argv.begin(), {runuser_path(), "-u", "postgres", "--"});
  }
  return wait_for(spawn(argv, directory_, -1, log, /*new_process_group=*/false));
}

std::string PostgresServer::url(const std::string& db) const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + db;
}

void PostgresServer::create_database(const std::string& name) {
  const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  if (!valid) {
    throw std::invalid_argument("database names here are [a-z0-9_]+, not '" + name + "'");
  }
  execute("postgres", "CREATE DATABASE " + name);
}

void PostgresServer::execute(const std::string& db, const std::string& sql) {
  query_value(db, sql);
}

std::string PostgresServer::query_value(const std::string& db, const std::string& sql) {
  PGconn* connection = PQconnectdb(url(db).c_str());
  if (PQstatus(connection) != CONNECTION_OK) {
    const std::string message = PQerrorMessage(connection);
    PQfinish(connection);
    throw std::runtime_error("cannot connect to " + url(db) + ": " + message);
  }
  PGresult* result = PQexec(connection, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  const std::string message = PQresultErrorMessage(result);
  const std::string value =
      status == PGRES_TUPLES_OK && PQntuples(result) > 0 ? PQgetvalue(result, 0, 0) : "";
  PQclear(result);
  PQfinish(connection);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error("'" + sql + "' failed: " + message);
  }
  return value;
}

}  // namespace zeus::test
