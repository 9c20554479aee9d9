// One connection of the HTTP host, over TCP or a Unix socket: reads a head and a body under
// their deadlines, hands the request to a worker, writes the response (gzip when it pays), keeps
// the connection alive within its limits, streams server-sent events, and closes on stop.
// Internal to the http layer; instantiated in host.cpp.
#pragma once

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>

#include "common/log.hpp"
#include "http/encoding.hpp"
#include "http/host_impl.hpp"
#include "http/peer.hpp"
#include "http/request_reader.hpp"

namespace zeus::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

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
        key_(detail::peer_key(peer_)) {
    // The buffer holds a head at most (a body goes to the parser's own string).
    buffer_.max_size(host_->options.limits.max_header_bytes + 64 * 1024);
  }
  ~Session() override { host_->remove(this); }

  void start() {
    net::dispatch(socket_.get_executor(),
                  [self = this->shared_from_this()] { self->wait_for_request(); });
  }

  void post_stop(bool forced) override {
    net::post(socket_.get_executor(),
              [self = this->shared_from_this(), forced] { self->on_stop(forced); });
  }
  void post_evict() override {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] { self->on_evict(); });
  }

 private:
  enum class State { kIdle, kHead, kBody, kHandling, kWriting, kStreaming, kLingering, kClosed };
  const HostLimits& limits() const { return host_->options.limits; }

  // ---- Deadlines ----
  void arm(std::chrono::milliseconds timeout) {
    const std::uint64_t generation = ++generation_;
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = this->shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->generation_) {
        return;
      }
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
    if (state_ == State::kClosed) {
      return;
    }
    if (host_->stopping->load() || served_ >= limits().max_requests_per_connection) {
      close();
      return;
    }
    mark_evictable();
    error_code available_error;
    if (buffer_.size() > 0 || socket_.available(available_error) > 0) {
      // A pipelined request, or the next one, is already here: no need to wait for it.
      read_head();
      return;
    }
    state_ = State::kIdle;
    arm(limits().idle_timeout);
    socket_.async_wait(Socket::wait_read, [self = this->shared_from_this()](error_code ec) {
      if (self->state_ != State::kIdle) {
        return;
      }
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
    if (state_ != phase) {
      return true;
    }
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
    if (read_failed(ec, State::kHead, "head", limits().header_timeout)) {
      return;
    }
    mark_busy();
    request_ = Request{};
    if (auto refusal = detail::check_head(parser_->get(), limits(), request_)) {
      refuse(refusal->status, refusal->message);
      return;
    }
    request_.peer = peer_;
    started_ = SteadyTime::now();
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
    if (read_failed(ec, State::kBody, "body", limits().body_timeout)) {
      return;
    }
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
        if (self->state_ == State::kClosed) {
          return;
        }
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
    log().debug("{}: {} refused: {} {}", host_->options.name, detail::peer_text(peer_), status,
                message);
    write_response();
  }

  // ---- Writing ----
  void write_response() {
    mark_busy();
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
    for (const auto& [name, value] : response_.headers) {
      message->insert(name, value);
    }
    if (response_.body.size() >= limits().compress_min_bytes &&
        detail::compressible(response_.content_type)) {
      message->set(bhttp::field::vary, "Accept-Encoding");
      const auto accept = request_.header("accept-encoding");
      if (accept && detail::accepts_gzip(*accept)) {
        if (auto compressed = detail::gzip(response_.body)) {
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
    if (!log().should_log(spdlog::level::debug)) {
      return;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(SteadyTime::now() - started_).count();
    log().debug("{}: {} {} {} {} {:.2f} ms", host_->options.name, detail::peer_text(peer_),
                request_.method, request_.target, status, ms);
  }

  // After the last response: stop sending, read and drop what the client still sends for a
  // moment (so that an unread body does not turn our answer into a reset), then close.
  void linger() {
    state_ = State::kLingering;
    mark_evictable();
    error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(1000));
    drain();
  }
  void drain() {
    scratch_.resize(16 * 1024);
    socket_.async_read_some(net::buffer(scratch_),
                            [self = this->shared_from_this()](error_code ec, std::size_t n) {
                              if (self->state_ != State::kLingering) {
                                return;
                              }
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
    for (const auto& [name, value] : response_.headers) {
      stream_header_->insert(name, value);
    }
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
                              if (self->state_ != State::kStreaming) {
                                return;
                              }
                              if (ec) {
                                self->close();
                                return;
                              }
                              self->watch_for_close();
                            });
  }
  void tick() {
    if (state_ != State::kStreaming) {
      return;
    }
    if (host_->stopping->load()) {
      finish_stream();
      return;
    }
    if (stream_->non_blocking) {
      std::string out;
      const bool more = next_chunk(out);
      after_tick(std::move(out), more);
      return;
    }
    net::post(host_->workers, [self = this->shared_from_this()] {
      std::string out;
      const bool more = self->next_chunk(out);
      net::post(self->socket_.get_executor(), [self, out = std::move(out), more]() mutable {
        self->after_tick(std::move(out), more);
      });
    });
  }
  // The stream's next piece; false (the stream ends) when it says so or throws.
  bool next_chunk(std::string& out) {
    try {
      return stream_->next(out);
    } catch (const std::exception& e) {
      log().warn("{}: stream {}: {}", host_->options.name, request_.path, e.what());
      return false;
    }
  }
  void after_tick(std::string out, bool more) {
    if (state_ != State::kStreaming) {
      return;
    }
    auto next_step = [self = this->shared_from_this(), more] {
      if (self->state_ != State::kStreaming) {
        return;
      }
      if (!more || self->host_->stopping->load()) {
        self->finish_stream();
        return;
      }
      self->ticker_.expires_after(self->stream_->period);
      self->ticker_.async_wait([self](error_code ec) {
        if (ec) {
          if (self->state_ == State::kStreaming && self->host_->stopping->load()) {
            self->finish_stream();
          }
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
    if (state_ != State::kStreaming) {
      return;
    }
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

  // Picked to make room at the cap: still idle, half-way through a head or lingering, it
  // closes; busy since, it stays and counts again.
  void on_evict() {
    if (state_ == State::kIdle || state_ == State::kHead || state_ == State::kLingering) {
      ++host_->evicted;
      close();
    } else if (state_ != State::kClosed) {
      host_->eviction_refused(this);
    }
  }

  void close() {
    if (state_ == State::kClosed) {
      return;
    }
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
  SteadyTime::time_point started_ = SteadyTime::now();
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

}  // namespace zeus::http
