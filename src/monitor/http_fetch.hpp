// The monitors' GET of a JSON document from a web service (carbon intensity, electricity
// prices), on the one HTTP client and its retry loop (http/client.hpp, http/retry.hpp): the
// options the providers expose, a JSON body (one that does not parse is retried: a proxy's error
// page), and failures worded without the URL or the query (a caller's query may hold a secret).
// A failing service makes a fetch throw after a known, short time (total_timeout_s, however
// slowly it answers); it never blocks a measurement for long, and cancel() on the client ends a
// fetch at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "http/client.hpp"
#include "zeus/common/clock.hpp"

namespace zeus::monitor::web {

struct FetchOptions {
  double connect_timeout_s = 2.0;
  double read_timeout_s = 5.0;
  int max_attempts = 3;            // 5xx, 429, timeouts, refused connections and bad JSON retry
  double backoff_initial_s = 0.5;  // then doubled per attempt
  // The whole fetch: every attempt (each however slowly it answers) and the pauses between them.
  double total_timeout_s = 15.0;
  std::size_t max_body_bytes = 0;  // 0: no limit; a larger body fails without a retry
  std::shared_ptr<Clock> clock;    // sleeps between attempts; must not be null
};

// The options of the one client a provider keeps for its service (its cancel() ends a fetch).
http::ClientOptions client_options_of(const FetchOptions& options);

// Throws Error(kInvalidArgument) "<who>: max_attempts must be >= 1, timeouts > 0, ..." for bad
// options.
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

// GET <client's base><path_and_query> with `headers`, retried per `options` within its
// total_timeout_s; the body of a 200 answer parsed as JSON. `client` is made with
// client_options_of(options). `endpoint` names the request in messages; `on_attempt` is called
// before every attempt (request counters). Throws FetchFailure.
nlohmann::json get_json(const http::Client& client, const std::string& path_and_query,
                        const http::Fields& headers, const std::string& endpoint,
                        const FetchOptions& options, const std::function<void()>& on_attempt);

}  // namespace zeus::monitor::web
