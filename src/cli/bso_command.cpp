// `zeus bso serve`: the batch-size-optimizer server (docs/bso-server.md).
#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli/commands.hpp"
#include "common/log.hpp"
#include "common/output_file.hpp"
#include "common/signals.hpp"
#include "server/http_server.hpp"
#include "server/service.hpp"
#include "server/store.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_search.hpp"

namespace zeus::cli {
namespace {

struct ServeOptions {
  std::string db;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string token_file;
  std::string port_file;
  int threads = 64;
  long long max_body_bytes = 1 << 20;
  bool skip_integrity_check = false;
  std::string policy = "zeus";
  long long max_jobs = 20000;
  int max_registrations_per_minute = 600;
};

constexpr long long kMaxBodyBytesLimit = 1LL << 30;  // 1 GiB
constexpr std::size_t kMaxTokenFileBytes = 4096;     // the first line is read, no more

std::string read_token(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw Error(ErrorKind::kInvalidArgument, "--token-file " + path +
                                                 ": cannot read it: " + std::strerror(errno) +
                                                 " (does it exist, and may this user read it?)");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const char* kind = S_ISDIR(info.st_mode)                            ? "a directory"
                       : S_ISFIFO(info.st_mode)                         ? "a FIFO"
                       : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode) ? "a device"
                       : S_ISSOCK(info.st_mode)                         ? "a socket"
                                                                        : "not a regular file";
    ::close(fd);
    throw Error(ErrorKind::kInvalidArgument,
                "--token-file " + path + " is " + kind +
                    "; give a regular file whose first line is the token (e.g. `openssl rand "
                    "-hex 32 > token && chmod 600 token`)");
  }
  std::string head(kMaxTokenFileBytes, '\0');
  std::size_t size = 0;
  while (size < head.size()) {
    const ssize_t got = ::read(fd, head.data() + size, head.size() - size);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      throw Error(ErrorKind::kInvalidArgument,
                  "--token-file " + path + ": cannot read it: " + std::strerror(error));
    }
    if (got == 0) {
      break;
    }
    size += static_cast<std::size_t>(got);
  }
  ::close(fd);
  head.resize(size);
  const std::size_t newline = head.find('\n');
  if (newline == std::string::npos && size == kMaxTokenFileBytes) {
    throw Error(ErrorKind::kInvalidArgument,
                "--token-file " + path + ": its first line is longer than " +
                    std::to_string(kMaxTokenFileBytes) +
                    " bytes; put the token (16 to a few hundred characters) on the first line");
  }
  std::string token = head.substr(0, newline);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) {
    token.pop_back();
  }
  if (token.size() < 16) {
    throw Error(ErrorKind::kInvalidArgument,
                "--token-file " + path +
                    ": the token on its first line must be at least 16 "
                    "characters (e.g. `openssl rand -hex 32 > " +
                    path + "`)");
  }
  return token;
}

int serve(const ServeOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    throw Error(ErrorKind::kInvalidArgument, "--port must be between 0 and 65535");
  }
  if (options.threads < 1 || options.threads > 4096) {
    throw Error(ErrorKind::kInvalidArgument, "--threads must be between 1 and 4096");
  }
  if (options.max_body_bytes < 1 || options.max_body_bytes > kMaxBodyBytesLimit) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--max-body-bytes must be between 1 and {} (1 GiB), not {}; the "
                            "largest request of the protocol is a few KiB",
                            kMaxBodyBytesLimit, options.max_body_bytes));
  }
  // Checked before the database is opened: a typo must not create an empty database file.
  try {
    optimizer::check_batch_size_policy_name(options.policy);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, std::string("--policy: ") + error.what());
  }
  if (options.max_jobs < 0 || options.max_registrations_per_minute < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "--max-jobs and --max-registrations-per-minute must be 0 (no limit) or more");
  }
  // Large answers (a job's state, listings) are built by whichever worker thread serves them:
  // with glibc's default of up to 8 arenas per core, what they free stays spread over many
  // arenas and the server's memory only grows. Two arenas keep it near its working set
  // (docs/security.md). MALLOC_ARENA_MAX in the environment still wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) {
    mallopt(M_ARENA_MAX, 2);
  }
  server::HttpServerOptions http;
  http.max_registrations_per_minute = options.max_registrations_per_minute;
  http.host = options.host;
  http.port = options.port;
  http.threads = options.threads;
  http.max_body_bytes = static_cast<std::size_t>(options.max_body_bytes);
  if (!options.token_file.empty()) {
    http.token = read_token(options.token_file);
  }

  // SIGTERM and SIGINT are taken by one thread (blocked everywhere else, so the server's
  // threads inherit the mask): it stops the server, which finishes requests in flight.
  block_stop_signals();

  server::StoreOptions store_options;
  store_options.pool_size = std::min(options.threads, 16);
  store_options.check_integrity = !options.skip_integrity_check;
  const std::unique_ptr<server::Store> store = server::open_store(options.db, store_options);
  server::BsoService service(*store, nullptr, options.policy);
  service.set_max_jobs(options.max_jobs);
  server::HttpServer http_server(service, http);
  const int port = http_server.bind();
  if (!options.port_file.empty()) {
    write_port_file(options.port_file, port);
  }
  std::cout << fmt::format(
                   "zeus bso: serving on http://{}:{} (database {}, schema v{}, default policy {})",
                   options.host, port, store->describe(), store->schema_version(), options.policy)
            << std::endl;

  // stop() before serve() has started listening would be lost: it is repeated (every 20 ms)
  // until serve() returns.
  serve_until_signal([&http_server] { http_server.serve(); },
                     [&http_server] { http_server.stop(); },
                     ServeUntilSignalOptions{.repeat_stop_every_s = 0.02});
  std::cout << fmt::format("zeus bso: stopped after {} requests", http_server.requests())
            << std::endl;
  return kExitOk;
}

}  // namespace

void write_port_file(const std::string& path, int port) {
  // Put in place whole (a script polling for it never reads half a number), or written through a
  // FIFO a script waits on (docs/cli.md, "Input and output files").
  OutputFileOptions options;
  options.what = "--port-file";
  write_output_file(path, std::to_string(port) + "\n", std::move(options));
}

void add_bso(CLI::App& app, Action& action) {
  CLI::App* bso = app.add_subcommand("bso", "The batch-size optimizer (server)");
  bso->require_subcommand(1);
  auto options = std::make_shared<ServeOptions>();
  const char* env_db = std::getenv("ZEUS_BSO_DATABASE_URL");
  options->db = env_db != nullptr && *env_db != '\0' ? env_db : "sqlite:///zeus-bso.db";
  CLI::App* serve_command = bso->add_subcommand(
      "serve",
      "Serve the batch-size optimizer over HTTP (wire-compatible with the reference's "
      "client)");
  serve_command
      ->add_option("--db", options->db,
                   "Database URL: sqlite:///relative.db, sqlite:////absolute.db or "
                   "postgresql://user:password@host:port/db (default: $ZEUS_BSO_DATABASE_URL, "
                   "else sqlite:///zeus-bso.db)")
      ->capture_default_str();
  serve_command->add_option("--host", options->host, "Address to listen on")->capture_default_str();
  serve_command->add_option("--port", options->port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  serve_command->add_option("--token-file", options->token_file,
                            "File whose first line is a bearer token every request must carry");
  serve_command->add_option("--port-file", options->port_file,
                            "Write the port listened on to this file once serving");
  serve_command
      ->add_option("--threads", options->threads,
                   "Requests handled at once (idle and slow connections hold none)")
      ->capture_default_str();
  serve_command
      ->add_option("--max-body-bytes", options->max_body_bytes,
                   "Larger request bodies are refused with 413 (1 to 1073741824)")
      ->capture_default_str();
  serve_command
      ->add_option("--policy", options->policy,
                   "Batch-size policy of jobs whose spec names none: zeus (the paper's, "
                   "wire-compatible with the reference) or low-regret")
      ->capture_default_str();
  serve_command
      ->add_option("--max-jobs", options->max_jobs,
                   "Jobs the database may hold; registering another is refused with 429 until "
                   "jobs are deleted (0: no limit)")
      ->capture_default_str();
  serve_command
      ->add_option("--max-registrations-per-minute", options->max_registrations_per_minute,
                   "POST /jobs per client address a minute (in bursts of as many); more get "
                   "429 (0: no limit)")
      ->capture_default_str();
  serve_command->add_flag(
      "--skip-integrity-check", options->skip_integrity_check,
      "SQLite: serve the file without the PRAGMA quick_check run at start (which refuses a "
      "corrupt file)");
  serve_command->callback([options, &action] { action = [options] { return serve(*options); }; });
}

}  // namespace zeus::cli
