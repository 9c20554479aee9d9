// The monitors' shared HTTP GET: timeouts, retries with backoff, a bounded body, JSON.
#include "monitor/http_fetch.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>

#include "common/signals.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::monitor::http {
namespace {

std::chrono::microseconds to_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(seconds));
}

// A failure worth retrying (network, timeout, 5xx, 429, bad JSON) or not (4xx, a huge body).
struct AttemptError {
  bool retry = false;
  std::string message;
  int http_status = 0;
};

nlohmann::json attempt_get(const BaseUrl& base, const std::string& path_and_query,
                           const Headers& headers, const std::string& endpoint,
                           const FetchOptions& options) {
  httplib::Client client(base.scheme_host_port);
  client.set_connection_timeout(to_duration(options.connect_timeout_s));
  client.set_read_timeout(to_duration(options.read_timeout_s));
  client.set_write_timeout(to_duration(options.read_timeout_s));
  client.set_keep_alive(false);
  httplib::Headers request_headers;
  for (const auto& [name, value] : headers) {
    request_headers.emplace(name, value);
  }
  // Stops reading as soon as the announced or received length passes the limit, so that a
  // runaway answer costs neither the memory nor the time of reading it all.
  bool too_large = false;
  const auto progress = [&](std::uint64_t received, std::uint64_t total) {
    if (options.max_body_bytes != 0 &&
        (received > options.max_body_bytes || total > options.max_body_bytes)) {
      too_large = true;
      return false;
    }
    return true;
  };
  const SigpipeGuard no_sigpipe;  // a service that closes mid-request is this attempt's error
  const httplib::Result result = client.Get(path_and_query, request_headers, progress);
  if (too_large) {
    throw AttemptError{
        false, fmt::format("the {} response is over {} bytes", endpoint, options.max_body_bytes),
        0};
  }
  if (!result) {
    throw AttemptError{true, fmt::format("request failed ({})", httplib::to_string(result.error())),
                       0};
  }
  const int status = result->status;
  if (status != 200) {
    const bool retry = status >= 500 || status == 429;
    throw AttemptError{retry, fmt::format("HTTP {} from the {} endpoint", status, endpoint),
                       status};
  }
  try {
    return nlohmann::json::parse(result->body);
  } catch (const nlohmann::json::exception&) {
    // A proxy's error page or a truncated body: the service is not answering properly.
    throw AttemptError{true, fmt::format("the {} response is not valid JSON", endpoint), status};
  }
}

}  // namespace

BaseUrl split_base_url(const std::string& url, const std::string& who) {
  const std::size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: base URL '{}' must start with http:// or https://", who, url));
  }
  const std::size_t path_start = url.find('/', scheme_end + 3);
  BaseUrl base;
  base.scheme_host_port = url.substr(0, path_start);
  base.path_prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!base.path_prefix.empty() && base.path_prefix.back() == '/') {
    base.path_prefix.pop_back();
  }
  return base;
}

void check_fetch_options(const FetchOptions& options, const std::string& who) {
  if (options.max_attempts < 1 || !(options.connect_timeout_s > 0) ||
      !(options.read_timeout_s > 0) || !(options.backoff_initial_s >= 0)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: max_attempts must be >= 1, timeouts > 0, backoff >= 0", who));
  }
}

bool retry_window_passed(const Clock& clock, const std::optional<std::int64_t>& last_failure_ns,
                         double retry_after_failure_s) {
  return !last_failure_ns || clock.now_ns() - *last_failure_ns >=
                                 units::nanoseconds_from_seconds(retry_after_failure_s);
}

nlohmann::json get_json(const BaseUrl& base, const std::string& path_and_query,
                        const Headers& headers, const std::string& endpoint,
                        const FetchOptions& options, const std::function<void()>& on_attempt) {
  AttemptError last;
  double backoff_s = options.backoff_initial_s;
  for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
    AttemptError failure;
    try {
      if (on_attempt) {
        on_attempt();
      }
      return attempt_get(base, path_and_query, headers, endpoint, options);
    } catch (const AttemptError& error) {
      failure = error;
    }
    last = failure;
    if (!failure.retry) {
      break;
    }
    if (attempt < options.max_attempts) {
      options.clock->sleep_for_s(backoff_s);
      backoff_s *= 2.0;
    }
  }
  throw FetchFailure{last.message, last.http_status};
}

}  // namespace zeus::monitor::http
