// The monitors' JSON GET on the one HTTP client: its options, JSON bodies and wording.
#include "monitor/http_fetch.hpp"

#include <fmt/format.h>

#include <cmath>
#include "http/retry.hpp"
#include "zeus/common/error.hpp"

#include "zeus/common/units.hpp"

namespace zeus::monitor::web {

void check_fetch_options(const FetchOptions& options, const std::string& who) {
  if (options.max_attempts < 1 || !(options.connect_timeout_s > 0) ||
      !(options.read_timeout_s > 0) || !(options.backoff_initial_s >= 0) ||
      !(options.total_timeout_s > 0) || !std::isfinite(options.total_timeout_s)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: max_attempts must be >= 1, timeouts > 0 (the total one finite), "
                            "backoff >= 0",
                            who));
  }
}

http::ClientOptions client_options_of(const FetchOptions& options) {
  http::ClientOptions client_options;
  client_options.connect_timeout_s = options.connect_timeout_s;
  client_options.read_timeout_s = options.read_timeout_s;
  client_options.write_timeout_s = options.read_timeout_s;
  client_options.total_timeout_s = options.total_timeout_s;
  client_options.max_body_bytes = options.max_body_bytes;
  return client_options;
}

bool retry_window_passed(const Clock& clock, const std::optional<std::int64_t>& last_failure_ns,
                         double retry_after_failure_s) {
  return !last_failure_ns || clock.now_ns() - *last_failure_ns >=
                                 units::nanoseconds_from_seconds(retry_after_failure_s);
}

nlohmann::json get_json(const http::Client& client, const std::string& path_and_query,
                        const http::Fields& headers, const std::string& endpoint,
                        const FetchOptions& options, const std::function<void()>& on_attempt) {
  http::ClientRequest request;
  request.target = path_and_query;
  request.headers = headers;

  // The pauses double from backoff_initial_s; a Retry-After may lengthen one, never past the
  // longest pause the attempts would reach anyway.
  http::Backoff backoff;
  backoff.max_attempts = options.max_attempts;
  backoff.initial_delay_s = options.backoff_initial_s;
  backoff.multiplier = 2.0;
  backoff.max_delay_s = options.backoff_initial_s * std::ldexp(1.0, options.max_attempts);
  backoff.total_s = options.total_timeout_s;
  nlohmann::json parsed;
  int last_status = 0;
  const http::RetryResult result = http::with_retries(
      backoff, *options.clock,
      [&](int, double timeout_s) {
        if (on_attempt) {
          on_attempt();
        }
        request.timeout_s = timeout_s;
        http::Attempt attempt{client.send(request), false, ""};
        const http::Outcome& outcome = attempt.outcome;
        last_status = outcome.response ? outcome.response->status : 0;
        if (outcome.failure == http::Failure::kTooLarge) {
          // A runaway answer costs neither the memory nor the time of reading it all, twice.
          attempt.why =
              fmt::format("the {} response is over {} bytes", endpoint, options.max_body_bytes);
          return attempt;
        }
        attempt.retry = http::worth_retrying(outcome, /*idempotent=*/true);
        if (outcome.failure == http::Failure::kDeadline) {
          attempt.why =
              fmt::format("no complete answer within the {} s deadline", options.total_timeout_s);
          return attempt;
        }
        if (!outcome.response) {
          attempt.why = fmt::format("request failed ({})", outcome.detail);
          return attempt;
        }
        if (outcome.response->status != 200) {
          attempt.why =
              fmt::format("HTTP {} from the {} endpoint", outcome.response->status, endpoint);
          return attempt;
        }
        parsed = nlohmann::json::parse(outcome.response->body, nullptr, false);
        if (parsed.is_discarded()) {
          // A proxy's error page or a truncated body: the service is not answering properly.
          attempt.retry = true;
          attempt.why = fmt::format("the {} response is not valid JSON", endpoint);
        }
        return attempt;
      },
      nullptr);
  if (result.last.why.empty()) {
    return parsed;
  }
  if (result.out_of_time) {
    throw FetchFailure{fmt::format("{} (no time left for another attempt within the {} s deadline)",
                                   result.last.why, options.total_timeout_s),
                       last_status};
  }
  throw FetchFailure{result.last.why, last_status};
}

}  // namespace zeus::monitor::web
