#include "zeus/device/zeusd_stream.hpp"

#include <cxxabi.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "common/signals.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device {

const char* zeusd_stream_end_name(ZeusdStreamEnd end) {
  switch (end) {
    case ZeusdStreamEnd::kEnded:
      return "ended";
    case ZeusdStreamEnd::kRefused:
      return "refused";
    case ZeusdStreamEnd::kUnreachable:
      return "unreachable";
    case ZeusdStreamEnd::kLost:
      return "lost";
    case ZeusdStreamEnd::kIdle:
      return "idle";
    case ZeusdStreamEnd::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

void SseSplitter::feed(std::string_view bytes,
                       const std::function<void(std::string_view)>& on_event,
                       const std::function<void(std::size_t)>& on_oversized) {
  pending_.append(bytes);
  std::size_t start = 0;
  while (true) {
    const std::size_t separator = pending_.find("\n\n", start);
    if (separator == std::string::npos) {
      break;
    }
    const std::size_t length = separator - start;
    if (dropping_ || length > max_event_bytes_) {
      if (on_oversized) {
        on_oversized(dropped_ + length);
      }
      dropping_ = false;
      dropped_ = 0;
    } else if (on_event) {
      on_event(std::string_view(pending_).substr(start, length));
    }
    start = separator + 2;
  }
  pending_.erase(0, start);
  if (!dropping_ && pending_.size() > max_event_bytes_) {
    dropping_ = true;
    dropped_ = 0;
  }
  if (dropping_) {
    // Only a trailing newline is kept: it may be the first half of the blank line that ends
    // the oversized event.
    const bool newline = !pending_.empty() && pending_.back() == '\n';
    dropped_ += pending_.size() - (newline ? 1 : 0);
    pending_.clear();
    if (newline) {
      pending_.push_back('\n');
    }
  }
}

namespace {

std::chrono::microseconds microseconds_of(double seconds) {
  return std::chrono::microseconds(
      static_cast<std::int64_t>(units::microseconds_from_seconds(std::max(seconds, 0.001))));
}

}  // namespace

struct ZeusdEventStream::Impl {
  std::unique_ptr<httplib::Client> client;
};

ZeusdEventStream::ZeusdEventStream(ZeusdConfig config, ZeusdStreamOptions options)
    : config_(std::move(config)), options_(options), impl_(std::make_unique<Impl>()) {
  if (config_.socket_path) {
    impl_->client = std::make_unique<httplib::Client>(*config_.socket_path, 80);
    impl_->client->set_address_family(AF_UNIX);
  } else {
    impl_->client = std::make_unique<httplib::Client>(config_.host, config_.port);
  }
  impl_->client->set_keep_alive(false);
  impl_->client->set_connection_timeout(microseconds_of(options_.connect_timeout_s));
  impl_->client->set_write_timeout(microseconds_of(options_.connect_timeout_s));
  // A read that waits this long for a byte fails: that is how silence ends a run.
  impl_->client->set_read_timeout(microseconds_of(options_.idle_timeout_s));
  if (config_.token) {
    impl_->client->set_bearer_token_auth(*config_.token);
  }
  // Runs in run()'s thread right after the socket is made and before it connects, with the
  // client's socket lock held: a cancel() that came before httplib could see this socket makes
  // the connect fail at once, and one that comes later finds the request in flight (stop()).
  impl_->client->set_socket_options([this](socket_t sock) {
    if (cancelled_.load()) {
      ::shutdown(sock, SHUT_RDWR);
    }
  });
}

ZeusdEventStream::~ZeusdEventStream() = default;

void ZeusdEventStream::cancel() {
  cancelled_.store(true);
  impl_->client->stop();
}

ZeusdStreamOutcome ZeusdEventStream::run(const std::string& path_and_query,
                                         const std::function<void(std::string_view)>& on_event,
                                         const std::function<void(std::size_t)>& on_oversized) {
  ZeusdStreamOutcome outcome;
  if (cancelled_.load()) {
    outcome.end = ZeusdStreamEnd::kCancelled;
    return outcome;
  }
  const std::shared_ptr<Clock> clock = steady_clock();
  std::int64_t last_byte_ns = clock->now_ns();
  SseSplitter splitter(options_.max_event_bytes);
  std::exception_ptr callback_error;
  int status = 0;

  const SigpipeGuard no_sigpipe;  // cancel() may shut the socket down while the request is sent
  httplib::Result result = impl_->client->Get(
      path_and_query,
      [&](const httplib::Response& response) {
        status = response.status;
        last_byte_ns = clock->now_ns();
        return !cancelled_.load();
      },
      [&](const char* data, std::size_t length) {
        last_byte_ns = clock->now_ns();
        if (cancelled_.load()) {
          return false;
        }
        if (status != 200) {
          const std::size_t room =
              kMaxRefusalBytes - std::min(kMaxRefusalBytes, outcome.body.size());
          outcome.body.append(data, std::min(room, length));
          return true;
        }
        try {
          splitter.feed(std::string_view(data, length), on_event, on_oversized);
        } catch (abi::__forced_unwind&) {
          throw;  // a thread being torn down (pthread_exit) must keep unwinding
        } catch (...) {
          callback_error = std::current_exception();
          return false;
        }
        return true;
      });
  if (callback_error) {
    std::rethrow_exception(callback_error);
  }
  outcome.status = status;
  if (cancelled_.load()) {
    outcome.end = ZeusdStreamEnd::kCancelled;
    return outcome;
  }
  if (result) {
    outcome.end = status == 200 ? ZeusdStreamEnd::kEnded : ZeusdStreamEnd::kRefused;
    return outcome;
  }
  const httplib::Error error = result.error();
  outcome.error = httplib::to_string(error);
  if (error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout) {
    outcome.end = ZeusdStreamEnd::kUnreachable;
    return outcome;
  }
  // A read that failed after waiting the whole read timeout: silence, not a broken link (a
  // little slack for the poll's own rounding).
  const double silent_s = units::seconds_from_nanoseconds(clock->now_ns() - last_byte_ns);
  if (error == httplib::Error::Read && silent_s >= options_.idle_timeout_s * 0.9) {
    outcome.end = ZeusdStreamEnd::kIdle;
    outcome.error = "nothing received for " + std::to_string(silent_s) + " s";
    return outcome;
  }
  outcome.end = ZeusdStreamEnd::kLost;
  return outcome;
}

}  // namespace zeus::device
