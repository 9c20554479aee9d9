// The HTTP host: Boost.Asio connections on a few I/O threads, requests handled on a worker
// pool, every phase of a connection under a deadline (docs/security.md).
#include "http/host.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zlib.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/log.hpp"
#include "request_reader.hpp"
#include "text.hpp"

namespace zeus::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

void default_error_body(int status, const std::string& message, Response& response) {
  response.status = status;
  response.content_type = "application/json";
  std::string escaped;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      escaped += '\\';
      escaped += c;
    } else if (u < 0x20 || u >= 0x7f) {
      // Host messages are ASCII; anything else is replaced rather than risk invalid JSON.
      escaped += '?';
    } else {
      escaped += c;
    }
  }
  response.body = "{\"detail\":\"" + escaped + "\"}";
}

// Whether an Accept-Encoding value accepts gzip (RFC 9110 12.5.3: "gzip" or "*", q > 0).
bool accepts_gzip(std::string_view value) {
  bool star = false;
  bool gzip = false;
  bool gzip_listed = false;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find(',', start);
    if (end == std::string_view::npos)
      end = value.size();
    std::string_view item = value.substr(start, end - start);
    start = end + 1;
    const std::size_t semicolon = item.find(';');
    const std::string_view coding = detail::trim_blanks(item.substr(0, semicolon));
    bool positive = true;
    if (semicolon != std::string_view::npos) {
      const std::string_view parameter = detail::trim_blanks(item.substr(semicolon + 1));
      if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
          parameter[1] == '=') {
        const std::string_view q = parameter.substr(2);
        positive = !q.empty() && q.find_first_not_of("0.") != std::string_view::npos;
      }
    }
    if (iequals(coding, "gzip") || iequals(coding, "x-gzip")) {
      gzip_listed = true;
      gzip = positive;
    } else if (coding == "*") {
      star = positive;
    }
  }
  return gzip_listed ? gzip : star;
}

bool compressible(std::string_view content_type) {
  return content_type.rfind("text/", 0) == 0 || content_type.rfind("application/json", 0) == 0 ||
         content_type.rfind("application/javascript", 0) == 0;
}

std::optional<std::string> gzip(const std::string& input) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return std::nullopt;
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(input.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  const std::size_t written = stream.total_out;
  deflateEnd(&stream);
  if (rc != Z_STREAM_END)
    return std::nullopt;
  out.resize(written);
  return out;
}

std::string peer_key(const Peer& peer) {
  if (peer.credentials)
    return "uid:" + std::to_string(peer.credentials->uid);
  return peer.address;
}

std::string peer_text(const Peer& peer) {
  if (peer.credentials) {
    return "unix pid=" + std::to_string(peer.credentials->pid) +
           " uid=" + std::to_string(peer.credentials->uid);
  }
  if (peer.port == 0)
    return peer.address;
  return peer.address + ":" + std::to_string(peer.port);
}

Peer peer_of(const net::ip::tcp::socket::endpoint_type& remote) {
  Peer peer;
  peer.address = remote.address().to_string();
  peer.port = remote.port();
  return peer;
}

template <typename Socket>
Peer describe_peer(Socket& socket) {
  if constexpr (std::is_same_v<typename Socket::protocol_type, net::ip::tcp>) {
    error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    if (ec)
      return Peer{"unknown", 0, std::nullopt};
    socket.set_option(net::ip::tcp::no_delay(true), ec);
    return peer_of(remote);
  } else {
    Peer peer;
    peer.address = "unix";
    ucred cred{};
    socklen_t length = sizeof(cred);
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 &&
        length == sizeof(cred) && cred.pid > 0) {
      peer.credentials = PeerCredentials{cred.pid, cred.uid, cred.gid};
    }
    return peer;
  }
}

// Raise the soft descriptor limit so that the connection cap, not EMFILE, is what bounds us.
void raise_descriptor_limit(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return;
  const rlim_t target = std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(wanted));
  if (limit.rlim_cur < target) {
    limit.rlim_cur = target;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

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
  Clock::time_point last_refusal_logged{};  // under mutex, with refusals_unlogged
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
    if (!options.error_body)
      options.error_body = default_error_body;
  }

  // Whether to log this refused connection: the count of those not logged since the last line
  // logged, or nullopt to stay quiet (less than a second since it).
  std::optional<std::uint64_t> refusals_to_log() {
    std::lock_guard lock(mutex);
    const auto now = Clock::now();
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
    if (it != per_peer.end() && --it->second == 0)
      per_peer.erase(it);
  }
  void stop_sessions(bool forced) {
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard lock(mutex);
      for (auto& [raw, weak] : sessions) {
        if (auto session = weak.lock())
          live.push_back(std::move(session));
      }
    }
    for (auto& session : live)
      session->post_stop(forced);
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
      if (!ec)
        self->check_drained();
    });
  }

  template <typename Acceptor>
  void accept_on(Acceptor& acceptor);
  template <typename Socket>
  void refuse_connection(Socket socket, const std::string& reason);
};

// ---- One connection ------------------------------------------------------------------------

template <typename Socket>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Socket>> {
 public:
  Session(std::shared_ptr<Host::Impl> host, Socket socket, Peer peer)
      : host_(std::move(host)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        ticker_(socket_.get_executor()),
        peer_(std::move(peer)),
        key_(peer_key(peer_)) {
    // The buffer holds a head at most (a body goes to the parser's own string).
    buffer_.max_size(host_->options.limits.max_header_bytes + 64 * 1024);
  }
  ~Session() override { host_->remove(this, key_); }

  void start() {
    net::dispatch(socket_.get_executor(),
                  [self = this->shared_from_this()] { self->wait_for_request(); });
  }

  void post_stop(bool forced) override {
    net::post(socket_.get_executor(),
              [self = this->shared_from_this(), forced] { self->on_stop(forced); });
  }

 private:
  enum class State { kIdle, kHead, kBody, kHandling, kWriting, kStreaming, kLingering, kClosed };
  const HostLimits& limits() const { return host_->options.limits; }

  // ---- Deadlines ----
  void arm(std::chrono::milliseconds timeout) {
    const std::uint64_t generation = ++generation_;
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = this->shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->generation_)
        return;
      self->on_deadline();
    });
  }
  void disarm() {
    ++generation_;
    deadline_.cancel();
  }
  void on_deadline() {
    ++host_->timeouts;
    timed_out_ = true;
    switch (state_) {
      case State::kHead:
      case State::kBody:
        // The read completes with operation_aborted and answers 408.
        cancel_socket();
        break;
      default:
        close();
    }
  }
  void cancel_socket() {
    error_code ignored;
    socket_.cancel(ignored);
  }

  // ---- Reading ----
  void wait_for_request() {
    if (state_ == State::kClosed)
      return;
    if (host_->stopping->load() || served_ >= limits().max_requests_per_connection) {
      close();
      return;
    }
    error_code available_error;
    if (buffer_.size() > 0 || socket_.available(available_error) > 0) {
      // A pipelined request, or the next one, is already here: no need to wait for it.
      read_head();
      return;
    }
    state_ = State::kIdle;
    arm(limits().idle_timeout);
    socket_.async_wait(Socket::wait_read, [self = this->shared_from_this()](error_code ec) {
      if (self->state_ != State::kIdle)
        return;
      self->disarm();
      if (ec) {
        self->close();
        return;
      }
      self->read_head();
    });
  }

  void read_head() {
    state_ = State::kHead;
    timed_out_ = false;
    parser_.emplace();
    detail::configure(*parser_, limits());
    arm(limits().header_timeout);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_head(ec); });
  }

  // Whatever ends a read but success: the deadline (408), the client gone (closed), a parse
  // error (its refusal). True when the read is over and answered.
  bool read_failed(error_code ec, State phase, const char* part,
                   std::chrono::milliseconds timeout) {
    disarm();
    if (state_ != phase)
      return true;
    if (timed_out_) {
      refuse(408, std::string("the request ") + part + " did not arrive within " +
                      std::to_string(timeout.count()) + " ms");
      return true;
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof) {
      close();
      return true;
    }
    if (ec) {
      const detail::Refusal refusal = detail::refusal_for(ec, limits());
      refuse(refusal.status, refusal.message);
      return true;
    }
    return false;
  }

  void on_head(error_code ec) {
    if (read_failed(ec, State::kHead, "head", limits().header_timeout))
      return;
    request_ = Request{};
    if (auto refusal = detail::check_head(parser_->get(), limits(), request_)) {
      refuse(refusal->status, refusal->message);
      return;
    }
    request_.peer = peer_;
    started_ = Clock::now();
    if (host_->options.head_filter) {
      Response early;
      bool handled = false;
      try {
        handled = host_->options.head_filter(request_, early);
      } catch (const std::exception& e) {
        log().error("{}: head filter: {}", host_->options.name, e.what());
        refuse(500, "internal error");
        return;
      }
      if (handled) {
        // The body (if any) is not read: the connection closes after the answer.
        if (!parser_->is_done()) {
          early.close = true;
          linger_ = true;
        }
        response_ = std::move(early);
        keep_alive_ = parser_->get().keep_alive();
        ++host_->requests;
        write_response();
        return;
      }
    }
    if (parser_->is_done()) {
      dispatch();
      return;
    }
    state_ = State::kBody;
    if (detail::expects_continue(parser_->get())) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      arm(limits().write_timeout);
      net::async_write(socket_, net::buffer(kContinue),
                       [self = this->shared_from_this()](error_code write_ec, std::size_t) {
                         self->disarm();
                         if (write_ec) {
                           self->close();
                           return;
                         }
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    state_ = State::kBody;
    timed_out_ = false;
    arm(limits().body_timeout);
    bhttp::async_read(
        socket_, buffer_, *parser_,
        [self = this->shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_body(error_code ec) {
    if (read_failed(ec, State::kBody, "body", limits().body_timeout))
      return;
    request_.body = std::move(parser_->get().body());
    dispatch();
  }

  // ---- Handling ----
  void dispatch() {
    state_ = State::kHandling;
    keep_alive_ = parser_->get().keep_alive();
    parser_.reset();
    net::post(host_->workers, [self = this->shared_from_this()] {
      Response response;
      try {
        self->host_->handler(self->request_, response);
      } catch (const std::exception& e) {
        log().error("{}: {} {}: {}", self->host_->options.name, self->request_.method,
                    self->request_.path, e.what());
        response = Response{};
        self->host_->options.error_body(500, "internal error", response);
      } catch (...) {
        response = Response{};
        self->host_->options.error_body(500, "internal error", response);
      }
      net::post(self->socket_.get_executor(), [self, response = std::move(response)]() mutable {
        if (self->state_ == State::kClosed)
          return;
        self->response_ = std::move(response);
        ++self->host_->requests;
        self->write_response();
      });
    });
  }

  // Answers a request the host refuses itself; the connection closes after it.
  void refuse(int status, const std::string& message) {
    ++host_->rejected;
    Response response;
    host_->options.error_body(status, message, response);
    response.close = true;
    response_ = std::move(response);
    keep_alive_ = false;
    linger_ = true;  // the client may still be sending what we did not read
    if (request_.method.empty()) {
      request_.method = "-";
      request_.target = "-";
    }
    log().debug("{}: {} refused: {} {}", host_->options.name, peer_text(peer_), status, message);
    write_response();
  }

  // ---- Writing ----
  void write_response() {
    if (response_.stream) {
      start_stream();
      return;
    }
    state_ = State::kWriting;
    ++served_;
    const bool keep = keep_alive_ && !response_.close && !host_->stopping->load() &&
                      served_ < limits().max_requests_per_connection;
    auto message = std::make_shared<bhttp::response<bhttp::string_body>>();
    message->version(11);
    message->result(static_cast<unsigned>(response_.status));
    message->reason(reason_phrase(response_.status));
    message->set(bhttp::field::content_type, response_.content_type);
    for (const auto& [name, value] : response_.headers)
      message->insert(name, value);
    if (response_.body.size() >= limits().compress_min_bytes &&
        compressible(response_.content_type)) {
      message->set(bhttp::field::vary, "Accept-Encoding");
      const auto accept = request_.header("accept-encoding");
      if (accept && accepts_gzip(*accept)) {
        if (auto compressed = gzip(response_.body)) {
          response_.body = std::move(*compressed);
          message->set(bhttp::field::content_encoding, "gzip");
        }
      }
    }
    message->keep_alive(keep);
    if (request_.method == "HEAD") {
      // The headers a GET would get, without the body.
      message->content_length(response_.body.size());
    } else {
      message->body() = std::move(response_.body);
      message->prepare_payload();
    }
    log_request(response_.status);
    arm(limits().write_timeout);
    bhttp::async_write(
        socket_, *message,
        [self = this->shared_from_this(), message, keep](error_code ec, std::size_t) {
          self->disarm();
          if (ec) {
            self->close();
            return;
          }
          if (keep) {
            self->wait_for_request();
          } else if (self->linger_) {
            self->linger();
          } else {
            // The whole request was read: nothing to drain.
            self->close();
          }
        });
  }

  void log_request(int status) {
    if (!log().should_log(spdlog::level::debug))
      return;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    log().debug("{}: {} {} {} {} {:.2f} ms", host_->options.name, peer_text(peer_), request_.method,
                request_.target, status, ms);
  }

  // After the last response: stop sending, read and drop what the client still sends for a
  // moment (so that an unread body does not turn our answer into a reset), then close.
  void linger() {
    state_ = State::kLingering;
    error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(1000));
    drain();
  }
  void drain() {
    scratch_.resize(16 * 1024);
    socket_.async_read_some(net::buffer(scratch_),
                            [self = this->shared_from_this()](error_code ec, std::size_t n) {
                              if (self->state_ != State::kLingering)
                                return;
                              self->drained_ += n;
                              if (ec || self->drained_ > 4 * 1024 * 1024) {
                                self->close();
                                return;
                              }
                              self->drain();
                            });
  }

  // ---- Streams (server-sent events) ----
  void start_stream() {
    state_ = State::kStreaming;
    ++served_;
    stream_ = response_.stream;
    stream_header_.emplace();
    stream_header_->version(11);
    stream_header_->result(static_cast<unsigned>(response_.status));
    stream_header_->reason(reason_phrase(response_.status));
    stream_header_->set(bhttp::field::content_type, response_.content_type);
    for (const auto& [name, value] : response_.headers)
      stream_header_->insert(name, value);
    stream_header_->keep_alive(false);
    stream_header_->chunked(true);
    stream_serializer_.emplace(*stream_header_);
    log_request(response_.status);
    arm(limits().write_timeout);
    stream_busy_ = true;
    bhttp::async_write_header(socket_, *stream_serializer_,
                              [self = this->shared_from_this()](error_code ec, std::size_t) {
                                self->stream_busy_ = false;
                                self->disarm();
                                if (ec) {
                                  self->close();
                                  return;
                                }
                                self->watch_for_close();
                                self->tick();
                              });
  }
  // A streaming client sends nothing more; a read that ends means it went away.
  void watch_for_close() {
    watch_.resize(512);
    socket_.async_read_some(net::buffer(watch_),
                            [self = this->shared_from_this()](error_code ec, std::size_t) {
                              if (self->state_ != State::kStreaming)
                                return;
                              if (ec) {
                                self->close();
                                return;
                              }
                              self->watch_for_close();
                            });
  }
  void tick() {
    if (state_ != State::kStreaming)
      return;
    if (host_->stopping->load()) {
      finish_stream();
      return;
    }
    net::post(host_->workers, [self = this->shared_from_this()] {
      std::string out;
      bool more = false;
      try {
        more = self->stream_->next(out);
      } catch (const std::exception& e) {
        log().warn("{}: stream {}: {}", self->host_->options.name, self->request_.path, e.what());
        more = false;
      }
      net::post(self->socket_.get_executor(), [self, out = std::move(out), more]() mutable {
        self->after_tick(std::move(out), more);
      });
    });
  }
  void after_tick(std::string out, bool more) {
    if (state_ != State::kStreaming)
      return;
    auto next_step = [self = this->shared_from_this(), more] {
      if (self->state_ != State::kStreaming)
        return;
      if (!more || self->host_->stopping->load()) {
        self->finish_stream();
        return;
      }
      self->ticker_.expires_after(self->stream_->period);
      self->ticker_.async_wait([self](error_code ec) {
        if (ec) {
          if (self->state_ == State::kStreaming && self->host_->stopping->load())
            self->finish_stream();
          return;
        }
        self->tick();
      });
    };
    if (out.empty()) {
      next_step();
      return;
    }
    chunk_data_ = std::move(out);
    chunk_.emplace(bhttp::make_chunk(net::const_buffer(chunk_data_.data(), chunk_data_.size())));
    arm(limits().write_timeout);
    stream_busy_ = true;
    net::async_write(socket_, *chunk_,
                     [self = this->shared_from_this(), next_step](error_code ec, std::size_t) {
                       self->stream_busy_ = false;
                       self->disarm();
                       if (ec) {
                         self->close();
                         return;
                       }
                       next_step();
                     });
  }
  void finish_stream() {
    if (state_ != State::kStreaming)
      return;
    state_ = State::kWriting;
    ticker_.cancel();
    last_chunk_.emplace(bhttp::make_chunk_last());
    arm(std::chrono::milliseconds(1000));
    net::async_write(socket_, *last_chunk_,
                     [self = this->shared_from_this()](error_code, std::size_t) {
                       self->disarm();
                       self->close();
                     });
  }

  // ---- Stopping and closing ----
  void on_stop(bool forced) {
    if (forced) {
      close();
      return;
    }
    switch (state_) {
      case State::kIdle:
      case State::kHead:
      case State::kLingering:
        close();
        break;
      case State::kStreaming:
        // A write under way ends by looking at `stopping` and finishing the stream itself.
        if (!stream_busy_) {
          ticker_.cancel();
          finish_stream();
        }
        break;
      default:
        // Handling, writing or reading a body: finish; the response closes the connection.
        break;
    }
  }

  void close() {
    if (state_ == State::kClosed)
      return;
    state_ = State::kClosed;
    disarm();
    ticker_.cancel();
    error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  std::shared_ptr<Host::Impl> host_;
  Socket socket_;
  net::steady_timer deadline_;
  net::steady_timer ticker_;
  std::uint64_t generation_ = 0;
  Peer peer_;
  std::string key_;
  State state_ = State::kIdle;
  bool timed_out_ = false;
  bool stream_busy_ = false;  // a header or chunk write is under way
  bool linger_ = false;       // drain what the client still sends before closing
  bool keep_alive_ = true;
  std::size_t served_ = 0;
  std::size_t drained_ = 0;
  beast::flat_buffer buffer_;
  std::optional<detail::RequestParser> parser_;
  Request request_;
  Response response_;
  Clock::time_point started_ = Clock::now();
  std::string scratch_;
  std::string watch_;
  // Streams.
  std::shared_ptr<StreamSource> stream_;
  std::optional<bhttp::response<bhttp::empty_body>> stream_header_;
  std::optional<bhttp::response_serializer<bhttp::empty_body>> stream_serializer_;
  std::string chunk_data_;
  std::optional<bhttp::chunk_body<net::const_buffer>> chunk_;
  std::optional<bhttp::chunk_last<bhttp::chunk_crlf>> last_chunk_;
};

// ---- Accepting ----------------------------------------------------------------------------

template <typename Socket>
void Host::Impl::refuse_connection(Socket socket, const std::string& reason) {
  ++refused;
  Response response;
  options.error_body(503, reason, response);
  auto text = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + response.content_type +
      "\r\nContent-Length: " + std::to_string(response.body.size()) +
      "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + response.body);
  auto shared = std::make_shared<Socket>(std::move(socket));
  auto timer = std::make_shared<net::steady_timer>(shared->get_executor());
  timer->expires_after(std::chrono::seconds(1));
  timer->async_wait([shared](error_code ec) {
    if (!ec) {
      error_code ignored;
      shared->close(ignored);
    }
  });
  net::async_write(*shared, net::buffer(*text), [shared, text, timer](error_code, std::size_t) {
    error_code ignored;
    shared->shutdown(Socket::shutdown_both, ignored);
    shared->close(ignored);
    timer->cancel();
  });
}

template <typename Acceptor>
void Host::Impl::accept_on(Acceptor& acceptor) {
  using Strand = net::strand<net::io_context::executor_type>;
  using SocketType =
      typename Acceptor::protocol_type::socket::template rebind_executor<Strand>::other;
  acceptor.async_accept(net::make_strand(io), [self = shared_from_this(), &acceptor](
                                                  error_code ec, SocketType socket) {
    if (self->stopping->load() || ec == net::error::operation_aborted)
      return;
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or a transient failure: back off briefly.
      log().warn("{}: accept: {}", self->options.name, ec.message());
      auto timer = std::make_shared<net::steady_timer>(self->io);
      timer->expires_after(std::chrono::milliseconds(50));
      timer->async_wait([self, timer, &acceptor](error_code) {
        if (!self->stopping->load())
          self->accept_on(acceptor);
      });
      return;
    }
    ++self->accepted;
    Peer peer = describe_peer(socket);
    const std::string key = peer_key(peer);
    if (auto reason = self->admit(key)) {
      // At most one line a second: a flood of connections must not flood the log too.
      if (const auto unlogged = self->refusals_to_log()) {
        log().warn(
            "{}: refused a connection from {}: {}{}", self->options.name, peer_text(peer), *reason,
            *unlogged > 0 ? fmt::format(" ({} more refused since the last such line)", *unlogged)
                          : std::string());
      }
      self->refuse_connection(std::move(socket), *reason);
    } else {
      auto session = std::make_shared<Session<SocketType>>(self, std::move(socket), peer);
      self->add(session.get(), session, key);
      session->start();
    }
    self->accept_on(acceptor);
  });
}

// ---- Host ----------------------------------------------------------------------------------

Host::Host(HostOptions options, Handler handler)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler))) {}

Host::~Host() {
  stop();
  join();
  if (!impl_->served.exchange(true)) {
    // Never served: run what stop() queued (it closes the acceptors) so nothing is left behind.
    impl_->io.run();
    impl_->workers.join();
  }
}

int Host::bind_tcp(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    throw BindError("port " + std::to_string(port) + " is out of range 0-65535", EINVAL);
  }
  raise_descriptor_limit(impl_->options.limits.max_connections + 256);
  error_code ec;
  net::ip::address address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    net::ip::tcp::resolver resolver(impl_->io);
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      throw BindError("cannot listen on " + host + ":" + std::to_string(port) +
                          ": no such address (give an IP address or a resolvable name)",
                      EADDRNOTAVAIL);
    }
    address = results.begin()->endpoint().address();
  }
  const net::ip::tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& acceptor = impl_->tcp_acceptor.emplace(impl_->io);
  auto fail = [&](const char* what) {
    const int number = ec.value();
    impl_->tcp_acceptor.reset();
    throw BindError("cannot listen on " + host + ":" + std::to_string(port) + ": " + what + ": " +
                        std::strerror(number),
                    number);
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec)
    fail("socket");
  // SO_REUSEADDR only (restart over TIME_WAIT); never SO_REUSEPORT, which would let a second
  // server share the port silently.
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec)
    fail("bind");
  acceptor.listen(impl_->options.listen_backlog, ec);
  if (ec)
    fail("listen");
  return acceptor.local_endpoint().port();
}

void Host::bind_unix(const std::filesystem::path& path) {
  raise_descriptor_limit(impl_->options.limits.max_connections + 256);
  error_code ec;
  auto& acceptor = impl_->unix_acceptor.emplace(impl_->io);
  auto fail = [&](const char* what) {
    const int number = ec.value();
    impl_->unix_acceptor.reset();
    throw BindError("cannot listen on the Unix socket " + path.string() + ": " + what + ": " +
                        std::strerror(number),
                    number);
  };
  acceptor.open(net::local::stream_protocol(), ec);
  if (ec)
    fail("socket");
  acceptor.bind(net::local::stream_protocol::endpoint(path.string()), ec);
  if (ec)
    fail("bind");
  acceptor.listen(impl_->options.listen_backlog, ec);
  if (ec)
    fail("listen");
}

void Host::serve() {
  Impl& impl = *impl_;
  if (impl.served.exchange(true))
    return;
  if (!impl.stopping->load()) {
    if (impl.tcp_acceptor)
      impl.accept_on(*impl.tcp_acceptor);
    if (impl.unix_acceptor)
      impl.accept_on(*impl.unix_acceptor);
  }
  impl.serving = true;
  std::vector<std::thread> extra;
  for (int i = 1; i < impl.options.io_threads; ++i)
    extra.emplace_back([&impl] { impl.io.run(); });
  impl.io.run();
  for (auto& thread : extra)
    thread.join();
  impl.serving = false;
  // Handlers still running finish (their replies are dropped).
  impl.workers.join();
}

void Host::start() {
  if (impl_->background.joinable() || impl_->served)
    return;
  impl_->background = std::thread([this] { serve(); });
  // Return once connections are accepted.
  for (int i = 0; i < 5000 && !impl_->serving && !impl_->served.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void Host::join() {
  if (impl_->background.joinable() && impl_->background.get_id() != std::this_thread::get_id())
    impl_->background.join();
}

void Host::stop() {
  std::shared_ptr<Impl> impl = impl_;
  if (impl->stopping->exchange(true))
    return;
  net::post(impl->control, [impl] {
    error_code ignored;
    if (impl->tcp_acceptor)
      impl->tcp_acceptor->close(ignored);
    if (impl->unix_acceptor)
      impl->unix_acceptor->close(ignored);
    impl->stop_sessions(false);
    impl->grace_timer.expires_after(impl->options.limits.shutdown_grace);
    impl->grace_timer.async_wait([impl](error_code ec) {
      if (ec)
        return;
      log().warn("{}: requests still in flight after {} ms; closing their connections",
                 impl->options.name, impl->options.limits.shutdown_grace.count());
      impl->stop_sessions(true);
    });
    impl->work.reset();
    impl->check_drained();
  });
}

bool Host::running() const {
  return impl_->serving && !impl_->stopping->load();
}

HostStats Host::stats() const {
  HostStats stats;
  stats.connections_accepted = impl_->accepted;
  stats.connections_refused = impl_->refused;
  stats.requests = impl_->requests;
  stats.rejected_requests = impl_->rejected;
  stats.timeouts = impl_->timeouts;
  std::lock_guard lock(impl_->mutex);
  stats.open_connections = impl_->sessions.size();
  return stats;
}

}  // namespace zeus::http
