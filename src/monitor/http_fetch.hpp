// The monitors' GET of a JSON document from a web service (carbon intensity, electricity
// prices), on the one HTTP client and its retry loop (http/client.hpp, http/retry.hpp): the
// options the providers expose, a JSON body (one that does not parse is retried: a proxy's error
// page), and failures worded without the URL or the query (a caller's query may hold a secret).
// A failing service makes a fetch throw after a known, short time; it never blocks a
// measurement for long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "http/client.hpp"
#include "http/url.hpp"
#include "zeus/common/clock.hpp"

namespace zeus::monitor::web {

struct FetchOptions {
  double connect_timeout_s = 2.0;
  double read_timeout_s = 5.0;
  int max_attempts = 3;            // 5xx, 429, timeouts, refused connections and bad JSON retry
  double backoff_initial_s = 0.5;  // then doubled per attempt
  std::size_t max_body_bytes = 0;  // 0: no limit; a larger body fails without a retry
  std::shared_ptr<Clock> clock;    // sleeps between attempts; must not be null
};

// Throws Error(kInvalidArgument) "<who>: max_attempts must be >= 1, ..." for bad options.
void check_fetch_options(const FetchOptions& options, const std::string& who);

// Whether a client may ask its service again: nothing has failed yet, or the last failure (at
// `last_failure_ns` on `clock`) is at least `retry_after_failure_s` old. Keeps a dead service
// from costing every window a full round of timed-out attempts.
bool retry_window_passed(const Clock& clock, const std::optional<std::int64_t>& last_failure_ns,
                         double retry_after_failure_s);

// Why a fetch failed, after the retries: "request failed (...)", "HTTP 500 from the X endpoint",
// "the X response is not valid JSON" or "the X response is over N bytes".
struct FetchFailure {
  std::string message;
  int http_status = 0;  // the last answer's status; 0 when there was none
};

// GET <base><path_and_query> with `headers`, retried per `options`; the body of a 200 answer
// parsed as JSON. `endpoint` names the request in messages; `on_attempt` is called before every
// attempt (request counters). Throws FetchFailure.
nlohmann::json get_json(const http::Url& base, const std::string& path_and_query,
                        const http::Fields& headers, const std::string& endpoint,
                        const FetchOptions& options, const std::function<void()>& on_attempt);

}  // namespace zeus::monitor::web
