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
  // The host picked this connection to make room at the cap: on its strand, it closes if it is
  // still evictable, or else tells the host (Impl::eviction_refused) and stays.
  virtual void post_evict() = 0;

  // When the connection last became evictable (steady-clock ticks): it has not sent a whole
  // request head yet, waits for its next request, or lingers after its last answer. kBusy
  // while it reads a body, handles a request, writes or streams. Set on the session's strand;
  // read by the host, under its mutex, when it picks a connection to evict.
  static constexpr std::int64_t kBusy = -1;
  void mark_busy() { evictable_since_.store(kBusy, std::memory_order_relaxed); }
  void mark_evictable() {
    if (evictable_since_.load(std::memory_order_relaxed) == kBusy) {
      evictable_since_.store(now_ticks(), std::memory_order_relaxed);
    }
  }
  std::int64_t evictable_since() const { return evictable_since_.load(std::memory_order_relaxed); }

 private:
  static std::int64_t now_ticks() { return SteadyTime::now().time_since_epoch().count(); }
  std::atomic<std::int64_t> evictable_since_{now_ticks()};
};

// Once a second at most: the count of events not logged since the last line, or nullopt to
// stay quiet (a flood of connections must not flood the log too).
struct LogThrottle {
  SteadyTime::time_point last{};
  std::uint64_t unlogged = 0;
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

  // Connections open from one peer, and of those the ones picked for eviction (still open).
  struct PeerCount {
    std::size_t open = 0;
    std::size_t evicting = 0;
  };
  using PeerEntry = std::pair<const std::string, PeerCount>;  // a node of per_peer (stable)
  struct Entry {
    std::weak_ptr<SessionBase> session;
    PeerEntry* peer = nullptr;
    bool evicting = false;  // picked as a victim; closes on its strand (or refuses)
  };
  // What admit() decided: a refusal (503), or room, made by evicting `victims` (post_evict()
  // them once the mutex is released) of `victim_peer`.
  struct Admission {
    std::optional<std::string> refusal;
    std::vector<std::shared_ptr<SessionBase>> victims;
    std::string victim_peer;
  };

  std::mutex mutex;  // guards everything below up to the atomics
  std::unordered_map<SessionBase*, Entry> sessions;
  std::unordered_map<std::string, PeerCount> per_peer;
  std::size_t evicting = 0;  // entries with `evicting` set: they do not count against the cap
  LogThrottle refusal_log;
  LogThrottle eviction_log;

  std::shared_ptr<std::atomic<bool>> stopping = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> serving{false};
  std::atomic<bool> served{false};
  std::thread background;

  std::atomic<std::uint64_t> accepted{0}, refused{0}, evicted{0}, requests{0}, rejected{0},
      timeouts{0};

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

  std::optional<std::uint64_t> due(LogThrottle& throttle) {
    std::lock_guard lock(mutex);
    const auto now = SteadyTime::now();
    if (now - throttle.last < std::chrono::seconds(1)) {
      ++throttle.unlogged;
      return std::nullopt;
    }
    throttle.last = now;
    return std::exchange(throttle.unlogged, 0);
  }

  // Admits a connection from `key`, evicting idle connections when the host is at its cap, or
  // says why not. The peer's own cap is hard; connections pending eviction do not count.
  Admission admit(const std::string& key) {
    std::lock_guard lock(mutex);
    Admission admission;
    const auto found = per_peer.find(key);
    const std::size_t mine =
        found == per_peer.end() ? 0 : found->second.open - found->second.evicting;
    if (mine >= options.limits.max_connections_per_peer) {
      admission.refusal = "this client has " + std::to_string(mine) +
                          " connections open, the limit for one peer; close some or retry later";
      return admission;
    }
    // A loop: when victims turned busy before closing, the next newcomer evicts the overshoot.
    while (sessions.size() - evicting >= options.limits.max_connections) {
      if (!evict_one(admission)) {
        admission.refusal = "the server has " + std::to_string(sessions.size() - evicting) +
                            " connections open, its limit, and none idle; retry later";
        return admission;
      }
    }
    return admission;
  }

  // Under the mutex: picks the oldest-idle evictable connection of the peer with the most
  // connections (one pass over the table) and marks it. False when none is evictable.
  bool evict_one(Admission& admission) {
    Entry* victim = nullptr;
    std::size_t victim_share = 0;
    std::int64_t victim_since = 0;
    for (auto& [raw, entry] : sessions) {
      const std::int64_t since = raw->evictable_since();
      if (entry.evicting || since == SessionBase::kBusy) {
        continue;
      }
      const std::size_t share = entry.peer->second.open - entry.peer->second.evicting;
      if (victim == nullptr || share > victim_share ||
          (share == victim_share && since < victim_since)) {
        victim = &entry;
        victim_share = share;
        victim_since = since;
      }
    }
    if (victim == nullptr) {
      return false;
    }
    victim->evicting = true;
    ++victim->peer->second.evicting;
    ++evicting;
    admission.victim_peer = victim->peer->first;
    // A session whose last owner is gone is closing already: marked, it frees its slot soon.
    if (auto session = victim->session.lock()) {
      admission.victims.push_back(std::move(session));
    }
    return true;
  }

  // A victim that turned busy before its strand could close it: it counts again (the host may
  // be one over its cap until the next admission or close).
  void eviction_refused(SessionBase* session) {
    std::lock_guard lock(mutex);
    const auto it = sessions.find(session);
    if (it != sessions.end() && it->second.evicting) {
      it->second.evicting = false;
      --it->second.peer->second.evicting;
      --evicting;
    }
  }

  void add(SessionBase* session, const std::shared_ptr<SessionBase>& shared,
           const std::string& key) {
    std::lock_guard lock(mutex);
    PeerEntry& peer = *per_peer.try_emplace(key).first;
    ++peer.second.open;
    sessions.emplace(session, Entry{shared, &peer, false});
  }
  void remove(SessionBase* session) {
    std::lock_guard lock(mutex);
    const auto it = sessions.find(session);
    if (it == sessions.end()) {
      return;
    }
    PeerEntry& peer = *it->second.peer;
    if (it->second.evicting) {
      --peer.second.evicting;
      --evicting;
    }
    sessions.erase(it);
    if (--peer.second.open == 0) {
      per_peer.erase(per_peer.find(peer.first));
    }
  }
  void stop_sessions(bool forced) {
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard lock(mutex);
      for (auto& [raw, entry] : sessions) {
        if (auto session = entry.session.lock()) {
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
