// libpq plumbing of the PostgreSQL store (see postgres_connection.hpp).
#include "server/postgres_connection.hpp"

#include <algorithm>
#include <chrono>

#include "common/log.hpp"

namespace zeus::server::pg {
namespace {

constexpr int kDefaultConnectTimeoutS = 5;

void log_notice(void* /*unused*/, const char* message) {
  log().debug("PostgreSQL: {}", one_line(message));
}

}  // namespace

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

namespace {

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

}  // namespace

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

// ---- The pool ----

ConnectionPool::ConnectionPool(std::string url, std::string description, std::string password,
                               const StoreOptions& options)
    : url_(std::move(url)),
      description_(std::move(description)),
      password_(std::move(password)),
      options_(options) {
  check_url();
}

void ConnectionPool::check_url() const {
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

Connection ConnectionPool::connect() const {
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

Connection ConnectionPool::acquire() {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::max(options_.busy_timeout_ms, 1000));
  while (idle_.empty() && open_ >= options_.pool_size) {
    if (freed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
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
    freed_.notify_one();
    throw;
  }
}

void ConnectionPool::drop_idle() {
  std::vector<Connection> stale;
  {
    std::lock_guard lock(mutex_);
    stale.swap(idle_);
    open_ -= static_cast<int>(stale.size());
  }
  freed_.notify_all();
}

void ConnectionPool::release(Connection connection) {
  const bool reusable = connection && PQstatus(connection.get()) == CONNECTION_OK &&
                        PQtransactionStatus(connection.get()) == PQTRANS_IDLE;
  if (!reusable) {
    connection.reset();  // closed outside the lock would be nicer, but PQfinish is quick
  }
  std::lock_guard lock(mutex_);
  if (reusable) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
  freed_.notify_one();
}

}  // namespace zeus::server::pg
