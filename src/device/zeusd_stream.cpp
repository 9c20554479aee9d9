#include "zeus/device/zeusd_stream.hpp"

#include <algorithm>
#include <utility>

#include "device/zeusd_endpoint.hpp"
#include "http/sse.hpp"
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

struct ZeusdEventStream::Impl {
  std::unique_ptr<http::Client> client;
};

ZeusdEventStream::ZeusdEventStream(ZeusdConfig config, ZeusdStreamOptions options)
    : config_(std::move(config)), options_(options), impl_(std::make_unique<Impl>()) {
  http::ClientOptions client_options;
  client_options.connect_timeout_s = options_.connect_timeout_s;
  client_options.write_timeout_s = options_.connect_timeout_s;
  // A read that waits this long for a byte fails: that is how silence ends a run.
  client_options.read_timeout_s = options_.idle_timeout_s;
  client_options.bearer_token = config_.token;
  impl_->client =
      std::make_unique<http::Client>(zeusd_url(config_, client_options), client_options);
}

ZeusdEventStream::~ZeusdEventStream() = default;

void ZeusdEventStream::cancel() {
  cancelled_.store(true);
  impl_->client->cancel();
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
  http::SseSplitter splitter(options_.max_event_bytes);
  int status = 0;
  http::ClientRequest request;
  request.target = path_and_query;
  const http::Outcome answer = impl_->client->stream(
      request,
      [&](const http::ClientResponse& head) {
        status = head.status;
        last_byte_ns = clock->now_ns();
        return true;
      },
      [&](std::string_view bytes) {
        last_byte_ns = clock->now_ns();
        if (status != 200) {
          const std::size_t room =
              kMaxRefusalBytes - std::min(kMaxRefusalBytes, outcome.body.size());
          outcome.body.append(bytes.substr(0, room));
          return true;
        }
        splitter.feed(bytes, on_event, on_oversized);
        return true;
      });
  outcome.status = status;
  if (cancelled_.load() || answer.failure == http::Failure::kCancelled) {
    outcome.end = ZeusdStreamEnd::kCancelled;
    return outcome;
  }
  if (answer.response) {
    outcome.end = status == 200 ? ZeusdStreamEnd::kEnded : ZeusdStreamEnd::kRefused;
    return outcome;
  }
  outcome.error = answer.detail;
  if (answer.failure == http::Failure::kConnect ||
      answer.failure == http::Failure::kConnectTimeout) {
    outcome.end = ZeusdStreamEnd::kUnreachable;
    return outcome;
  }
  // A read that failed after waiting the whole read timeout: silence, not a broken link (a
  // little slack for the poll's own rounding).
  const double silent_s = units::seconds_from_nanoseconds(clock->now_ns() - last_byte_ns);
  if (answer.failure == http::Failure::kRead && silent_s >= options_.idle_timeout_s * 0.9) {
    outcome.end = ZeusdStreamEnd::kIdle;
    outcome.error = "nothing received for " + std::to_string(silent_s) + " s";
    return outcome;
  }
  outcome.end = ZeusdStreamEnd::kLost;
  return outcome;
}

}  // namespace zeus::device
