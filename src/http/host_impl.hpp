// The host's shared state (Host::Impl): the I/O context, the worker pool, the acceptors, the
// table of live sessions with the per-peer counts the connection caps check, and the host's
// counters. Internal to the http layer; sessions (session.hpp) hold a shared_ptr to it.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/encoding.hpp"
#include "http/host.hpp"

namespace zeus::http {

namespace net = boost::asio;
using boost::system::error_code;
using SteadyTime = std::chrono::steady_clock;

// ---- The host's shared state ----------------------------------------------------------------

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Called on the session's strand when the host stops (graceful) or when the grace has run
  // out (forced).
  virtual void post_stop(bool forced) = 0;
};

struct Host::Impl : std::enable_shared_from_this<Host::Impl> {
  HostOptions options;
  Handler handler;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> work;
  net::thread_pool workers;
  std::optional<net::ip::tcp::acceptor> tcp_acceptor;
  std::optional<net::local::stream_protocol::acceptor> unix_acceptor;
  net::strand<net::io_context::executor_type> control;  // the host's own timers
  net::steady_timer grace_timer;
  net::steady_timer drain_timer;

  std::mutex mutex;  // guards sessions and per_peer
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;
  std::unordered_map<std::string, std::size_t> per_peer;
  SteadyTime::time_point last_refusal_logged{};  // under mutex, with refusals_unlogged
  std::uint64_t refusals_unlogged = 0;

  std::shared_ptr<std::atomic<bool>> stopping = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> serving{false};
  std::atomic<bool> served{false};
  std::thread background;

  std::atomic<std::uint64_t> accepted{0}, refused{0}, requests{0}, rejected{0}, timeouts{0};

  Impl(HostOptions opts, Handler h)
      : options(std::move(opts)),
        handler(std::move(h)),
        work(net::make_work_guard(io)),
        workers(static_cast<std::size_t>(std::max(1, options.worker_threads))),
        control(net::make_strand(io)),
        grace_timer(control),
        drain_timer(control) {
    if (!options.error_body) {
      options.error_body = detail::default_error_body;
    }
  }

  // Whether to log this refused connection: the count of those not logged since the last line
  // logged, or nullopt to stay quiet (less than a second since it).
  std::optional<std::uint64_t> refusals_to_log() {
    std::lock_guard lock(mutex);
    const auto now = SteadyTime::now();
    if (now - last_refusal_logged < std::chrono::seconds(1)) {
      ++refusals_unlogged;
      return std::nullopt;
    }
    last_refusal_logged = now;
    return std::exchange(refusals_unlogged, 0);
  }

  // Admits a connection from `key`, or says why not.
  std::optional<std::string> admit(const std::string& key) {
    std::lock_guard lock(mutex);
    if (sessions.size() >= options.limits.max_connections) {
      return "the server has " + std::to_string(sessions.size()) +
             " connections open, its limit; retry later";
    }
    if (per_peer[key] >= options.limits.max_connections_per_peer) {
      return "this client has " + std::to_string(per_peer[key]) +
             " connections open, the limit for one peer; close some or retry later";
    }
    return std::nullopt;
  }
  void add(SessionBase* session, const std::shared_ptr<SessionBase>& shared,
           const std::string& key) {
    std::lock_guard lock(mutex);
    sessions.emplace(session, shared);
    ++per_peer[key];
  }
  void remove(SessionBase* session, const std::string& key) {
    std::lock_guard lock(mutex);
    sessions.erase(session);
    auto it = per_peer.find(key);
    if (it != per_peer.end() && --it->second == 0) {
      per_peer.erase(it);
    }
  }
  void stop_sessions(bool forced) {
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard lock(mutex);
      for (auto& [raw, weak] : sessions) {
        if (auto session = weak.lock()) {
          live.push_back(std::move(session));
        }
      }
    }
    for (auto& session : live) {
      session->post_stop(forced);
    }
  }

  // After stop(): once every session has closed, only the grace timer keeps run() going;
  // cancel it then. Runs on `control`.
  void check_drained() {
    bool empty = false;
    {
      std::lock_guard lock(mutex);
      empty = sessions.empty();
    }
    if (empty) {
      grace_timer.cancel();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(10));
    drain_timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) {
        self->check_drained();
      }
    });
  }

  template <typename Acceptor>
  void accept_on(Acceptor& acceptor);
  template <typename Socket>
  void refuse_connection(Socket socket, const std::string& reason);
};

}  // namespace zeus::http
