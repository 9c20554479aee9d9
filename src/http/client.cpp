// The one HTTP client, on cpp-httplib: connections, timeouts, the whole exchange's deadline,
// SIGPIPE, bounded bodies, streams and cancellation.
#include "http/client.hpp"

#include <cxxabi.h>
#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/signals.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::http {
namespace {

std::chrono::microseconds microseconds_of(double seconds) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(std::max(seconds, 0.001)));
}

Failure failure_of(httplib::Error error) {
  switch (error) {
    case httplib::Error::Success:
      return Failure::kNone;
    case httplib::Error::Connection:
      return Failure::kConnect;
    case httplib::Error::ConnectionTimeout:
      return Failure::kConnectTimeout;
    case httplib::Error::Read:
      return Failure::kRead;
    case httplib::Error::Write:
      return Failure::kWrite;
    case httplib::Error::Canceled:
      return Failure::kCancelled;
    case httplib::Error::SSLConnection:
      return Failure::kTls;
    case httplib::Error::SSLServerVerification:
    case httplib::Error::SSLLoadingCerts:
      return Failure::kTlsVerify;
    default:
      return Failure::kOther;
  }
}

}  // namespace

std::string ClientResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (text::ascii_iequals(key, name)) {
      return value;
    }
  }
  return "";
}

std::string query_string(const Fields& parameters) {
  httplib::Params params;  // ordered by name
  for (const auto& [name, value] : parameters) {
    params.emplace(name, value);
  }
  return httplib::detail::params_to_query_str(params);
}

std::string describe(const Outcome& outcome, const ClientOptions& options) {
  switch (outcome.failure) {
    case Failure::kNone:
      return "answered";
    case Failure::kConnect:
      return "cannot connect (connection refused or host unreachable)";
    case Failure::kConnectTimeout:
      return fmt::format("no connection within {} s", options.connect_timeout_s);
    case Failure::kRead:
      return fmt::format("no complete answer (the connection was closed, or nothing came for {} s)",
                         options.read_timeout_s);
    case Failure::kWrite:
      return fmt::format(
          "the request could not be sent (the connection was closed, or the write waited {} s)",
          options.write_timeout_s);
    case Failure::kTls:
      return "the TLS connection failed (" + outcome.detail + ")";
    case Failure::kTlsVerify:
      return "the server's certificate was not accepted (" + outcome.detail + ")";
    case Failure::kTooLarge:
      return fmt::format("the answer is over {} bytes", options.max_body_bytes);
    case Failure::kDeadline:
      return fmt::format(
          "no complete answer within the {} s deadline (the service is too slow, or trickles)",
          outcome.deadline_s);
    case Failure::kCancelled:
      return "cancelled";
    case Failure::kOther:
      break;
  }
  return "the request failed (" + outcome.detail + ")";
}

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Stops the exchanges that pass their deadline: cpp-httplib's timeouts are per read, so a server
// that trickles a byte a second would hold a call forever. One thread for the process, started
// with the first deadline, asleep until the earliest one; never destroyed (it may be needed until
// the process exits).
class DeadlineWatch {
 public:
  static DeadlineWatch& instance() {
    static auto* const watch = new DeadlineWatch();  // NOLINT: lives as long as the process
    return *watch;
  }

  // `on_expiry` runs on the watch's thread once `when` passes, unless disarmed first, and again
  // every kRepeat while it returns true (a connection stopped before it was made).
  std::uint64_t arm(SteadyTime when, std::function<bool()> on_expiry) {
    const std::lock_guard lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    const std::uint64_t id = ++last_id_;
    armed_.emplace(id, Armed{when, std::move(on_expiry)});
    wake_.notify_all();
    return id;
  }

  // After this, the expiry of `id` is not running and never will.
  void disarm(std::uint64_t id) {
    std::unique_lock lock(mutex_);
    armed_.erase(id);
    if (firing_ == id) {
      refire_ = false;  // a firing expiry that asks to run again must not be put back
      fired_.wait(lock, [&] { return firing_ != id; });
    }
  }

 private:
  static constexpr std::chrono::milliseconds kRepeat{20};

  struct Armed {
    SteadyTime when;
    std::function<bool()> on_expiry;
  };

  DeadlineWatch() = default;

  [[noreturn]] void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (armed_.empty()) {
        wake_.wait(lock);
        continue;
      }
      auto earliest = std::min_element(
          armed_.begin(), armed_.end(),
          [](const auto& a, const auto& b) { return a.second.when < b.second.when; });
      // A copy: wait_until reads its argument again after waking, when disarm() may have erased
      // the entry in the meantime.
      const SteadyTime when = earliest->second.when;
      if (std::chrono::steady_clock::now() < when) {
        wake_.wait_until(lock, when);
        continue;
      }
      // Run outside the lock: stopping a connection may wait for its connect to time out.
      std::function<bool()> on_expiry = std::move(earliest->second.on_expiry);
      const std::uint64_t id = earliest->first;
      firing_ = id;
      refire_ = true;
      armed_.erase(earliest);
      lock.unlock();
      const bool again = on_expiry();
      lock.lock();
      if (again && refire_) {
        armed_.emplace(id, Armed{std::chrono::steady_clock::now() + kRepeat, std::move(on_expiry)});
      }
      firing_ = 0;
      fired_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable fired_;
  std::map<std::uint64_t, Armed> armed_;
  std::uint64_t last_id_ = 0;
  std::uint64_t firing_ = 0;  // the id whose expiry runs now (0: none)
  bool refire_ = false;       // whether it may be put back (disarm says no)
  bool started_ = false;
};

}  // namespace

struct Client::State {
  std::atomic<bool> cancelled{false};
  std::mutex mutex;                          // guards in_flight
  std::set<httplib::ClientImpl*> in_flight;  // stopped by cancel()
  std::mutex keep_alive_mutex;               // serialises calls on the kept connection
  std::unique_ptr<httplib::ClientImpl> kept;
};

Client::Client(Url url, ClientOptions options)
    : url_(std::move(url)), options_(std::move(options)), state_(std::make_unique<State>()) {
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (url_.scheme == "https" && !options_.unix_socket_path) {
    throw Error(ErrorKind::kNotSupported,
                url_.base() + ": this build's cpp-httplib has no TLS support; use http");
  }
#endif
}

Client::~Client() = default;

namespace {

// A cpp-httplib client set up as `options` say, for one exchange or the kept connection.
std::unique_ptr<httplib::ClientImpl> make_connection(const Url& url, const ClientOptions& options,
                                                     const std::atomic<bool>& cancelled) {
  std::unique_ptr<httplib::ClientImpl> client;
  if (options.unix_socket_path) {
    client = std::make_unique<httplib::ClientImpl>(*options.unix_socket_path, 80);
    client->set_address_family(AF_UNIX);
  } else if (url.scheme == "https") {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    auto tls = std::make_unique<httplib::SSLClient>(url.host, url.port);
    if (!options.ca_cert_path.empty()) {
      tls->set_ca_cert_path(options.ca_cert_path);
    }
    tls->enable_server_certificate_verification(true);
    client = std::move(tls);
#endif
  } else {
    client = std::make_unique<httplib::ClientImpl>(url.host, url.port);
  }
  // The timeouts are set per exchange (Client::stream), capped by its deadline.
  client->set_keep_alive(options.keep_alive);
  client->set_tcp_nodelay(options.tcp_nodelay);
  if (options.bearer_token) {
    client->set_bearer_token_auth(*options.bearer_token);
  }
  // Runs right after the socket is made and before it connects, under the client's socket lock:
  // a cancel() that came before cpp-httplib could see this socket makes the connect fail at
  // once; one that comes later finds the exchange in flight and stops it.
  client->set_socket_options([&cancelled](socket_t sock) {
    if (cancelled.load()) {
      ::shutdown(sock, SHUT_RDWR);
    }
  });
  return client;
}

httplib::Request to_httplib(const Url& url, const ClientRequest& request) {
  httplib::Request out;
  out.method = request.method;
  out.path = url.prefix + request.target;
  for (const auto& [name, value] : request.headers) {
    out.headers.emplace(name, value);
  }
  if (!request.content_type.empty()) {
    out.headers.emplace("Content-Type", request.content_type);
  }
  out.body = request.body;
  return out;
}

// The status and headers of an answer; its body is collected by the caller.
ClientResponse head_of(const httplib::Response& response) {
  ClientResponse out;
  out.status = response.status;
  out.headers.assign(response.headers.begin(), response.headers.end());
  return out;
}

}  // namespace

Outcome Client::stream(const ClientRequest& request,
                       const std::function<bool(const ClientResponse&)>& on_head,
                       const std::function<bool(std::string_view)>& on_data) const {
  State& state = *state_;
  Outcome outcome;
  if (state.cancelled.load()) {
    outcome.failure = Failure::kCancelled;
    outcome.detail = "cancelled";
    return outcome;
  }
  std::unique_ptr<httplib::ClientImpl> own;
  std::unique_lock<std::mutex> kept_lock;
  httplib::ClientImpl* connection = nullptr;
  if (options_.keep_alive) {
    kept_lock = std::unique_lock(state.keep_alive_mutex);
    if (!state.kept) {
      state.kept = make_connection(url_, options_, state.cancelled);
    }
    connection = state.kept.get();
  } else {
    own = make_connection(url_, options_, state.cancelled);
    connection = own.get();
  }
  // The deadline: the client's, or the request's when shorter. The connect and read timeouts
  // never outlast it; the watch stops whatever is still running when it passes.
  double deadline_s = options_.total_timeout_s;
  if (request.timeout_s > 0.0 && (deadline_s <= 0.0 || request.timeout_s < deadline_s)) {
    deadline_s = request.timeout_s;
  }
  const auto capped = [&](double timeout_s) {
    return microseconds_of(deadline_s > 0.0 ? std::min(timeout_s, deadline_s) : timeout_s);
  };
  connection->set_connection_timeout(capped(options_.connect_timeout_s));
  connection->set_read_timeout(capped(options_.read_timeout_s));
  connection->set_write_timeout(capped(options_.write_timeout_s));
  std::atomic<bool> expired{false};
  std::atomic<bool> over{false};
  std::uint64_t deadline_id = 0;
  if (deadline_s > 0.0) {
    const auto when = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(deadline_s));
    deadline_id = DeadlineWatch::instance().arm(when, [&expired, &over, connection] {
      expired.store(true);
      connection->stop();
      return !over.load();  // until send() returns: a connection made after the stop is stopped
    });
  }
  {
    const std::lock_guard lock(state.mutex);
    state.in_flight.insert(connection);
  }
  httplib::Request wire = to_httplib(url_, request);
  std::exception_ptr callback_error;
  const auto guarded = [&](const auto& call) {
    try {
      return call();
    } catch (abi::__forced_unwind&) {
      throw;  // a thread being torn down (pthread_exit) must keep unwinding
    } catch (...) {
      callback_error = std::current_exception();
      return false;
    }
  };
  wire.response_handler = [&](const httplib::Response& response) {
    if (state.cancelled.load() || expired.load()) {
      return false;
    }
    if (!on_head) {
      return true;
    }
    return guarded([&] { return on_head(head_of(response)); });
  };
  wire.content_receiver = [&](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
    return !state.cancelled.load() && !expired.load() &&
           guarded([&] { return on_data(std::string_view(data, length)); });
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  bool answered = false;
  {
    const SigpipeGuard no_sigpipe;  // a peer that closes mid-request, or cancel() mid-write
    answered = connection->send(wire, response, error);
  }
  over.store(true);
  if (deadline_id != 0) {
    DeadlineWatch::instance().disarm(deadline_id);
  }
  {
    const std::lock_guard lock(state.mutex);
    state.in_flight.erase(connection);
  }
  if (callback_error) {
    std::rethrow_exception(callback_error);
  }
  if (state.cancelled.load()) {
    outcome.failure = Failure::kCancelled;
    outcome.detail = "cancelled";
    return outcome;
  }
  if (expired.load()) {
    outcome.failure = Failure::kDeadline;
    outcome.detail = fmt::format("not over within {} s", deadline_s);
    outcome.deadline_s = deadline_s;
    return outcome;
  }
  if (!answered) {
    outcome.failure = failure_of(error);
    outcome.detail = httplib::to_string(error);
    return outcome;
  }
  outcome.response = head_of(response);
  return outcome;
}

Outcome Client::send(const ClientRequest& request) const {
  std::string body;
  bool too_large = false;
  const auto over_limit = [&](std::size_t bytes) {
    return options_.max_body_bytes != 0 && bytes > options_.max_body_bytes;
  };
  Outcome outcome = stream(
      request,
      [&](const ClientResponse& head) {
        // An announced length over the limit fails before a byte is read.
        const std::string length = head.header("Content-Length");
        char* end = nullptr;
        const unsigned long long announced = std::strtoull(length.c_str(), &end, 10);
        too_large = !length.empty() && *end == '\0' && over_limit(announced);
        return !too_large;
      },
      [&](std::string_view bytes) {
        if (over_limit(body.size() + bytes.size())) {
          too_large = true;
          return false;
        }
        body.append(bytes);
        return true;
      });
  if (too_large) {
    Outcome failed;
    failed.failure = Failure::kTooLarge;
    failed.detail = fmt::format("over {} bytes", options_.max_body_bytes);
    return failed;
  }
  if (outcome.response) {
    outcome.response->body = std::move(body);
  }
  return outcome;
}

void Client::cancel() const {
  const std::lock_guard lock(state_->mutex);
  state_->cancelled.store(true);
  for (httplib::ClientImpl* connection : state_->in_flight) {
    connection->stop();
  }
}

bool Client::cancelled() const {
  return state_->cancelled.load();
}

}  // namespace zeus::http
