// The one retry loop of zeus's HTTP clients: which outcomes retry, the backoff between
// attempts (on the injected Clock, so tests take no wall time) and the server's Retry-After.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "http/client.hpp"
#include "zeus/common/clock.hpp"

namespace zeus::http {

// Attempt k (k >= 1) is followed by a pause of min(max_delay_s, initial_delay_s *
// multiplier^(k-1)), or the server's Retry-After (capped the same way) when that is longer.
struct Backoff {
  int max_attempts = 3;  // >= 1; 1 means no retry
  double initial_delay_s = 0.5;
  double max_delay_s = 8.0;
  double multiplier = 2.0;  // >= 1
  // All the attempts and pauses together, on the Clock: no attempt starts and no pause is taken
  // that would end past it, and each attempt gets what is left as its deadline. 0: none.
  double total_s = 0.0;
};

// Which answers are worth another attempt. A failure to connect, a timeout or a closed
// connection always is (not TLS refusals, a body over the limit, a cancellation, or an exchange
// that passed its whole deadline: a service that slow would cost the same again). Of the
// statuses, those that say "try later" are (429, 502, 503, 504); for an idempotent request
// every 5xx is, since asking again cannot do anything twice. A request that changes state on
// the server (the BSO routes) is not idempotent: its 500 is the server's answer.
bool worth_retrying(const Outcome& outcome, bool idempotent);

// Seconds from a Retry-After header in seconds (the HTTP-date form is ignored).
std::optional<double> retry_after_s(const ClientResponse& response);

// What one attempt came to, for the loop: done (return it), or retry with `why`.
struct Attempt {
  Outcome outcome;
  bool retry = false;  // another attempt is worth making (when any are left)
  std::string why;     // for the log and the final error
};

struct RetryResult {
  Attempt last;
  int attempts = 0;
  // Stopped by backoff.total_s: with attempts left, or by a last attempt that the request
  // deadline cut short.
  bool out_of_time = false;
};

// Calls `attempt` until it is not to be retried, `backoff.max_attempts` are spent or
// `backoff.total_s` would pass, sleeping on `clock` in between; `on_retry(attempt_so_far,
// pause_s, why)` is called before each pause. `attempt` gets its number and its deadline, what is
// left of total_s (0 when there is none), for ClientRequest::timeout_s.
RetryResult with_retries(const Backoff& backoff, const Clock& clock,
                         const std::function<Attempt(int attempt, double timeout_s)>& attempt,
                         const std::function<void(int, double, const std::string&)>& on_retry);

}  // namespace zeus::http
