// The retry loop and its rules.
#include "http/retry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "zeus/common/units.hpp"

namespace zeus::http {

bool worth_retrying(const Outcome& outcome, bool idempotent) {
  if (!outcome.response) {
    switch (outcome.failure) {
      case Failure::kConnect:
      case Failure::kConnectTimeout:
      case Failure::kRead:
      case Failure::kWrite:
      case Failure::kOther:
        return true;
      default:
        return false;
    }
  }
  const int status = outcome.response->status;
  if (status == 429 || status == 502 || status == 503 || status == 504) {
    return true;
  }
  return idempotent && status >= 500 && status < 600;
}

std::optional<double> retry_after_s(const ClientResponse& response) {
  const std::string value = response.header("Retry-After");
  if (value.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double seconds = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(seconds >= 0.0) || !std::isfinite(seconds)) {
    return std::nullopt;
  }
  return seconds;
}

RetryResult with_retries(const Backoff& backoff, const Clock& clock,
                         const std::function<Attempt(int attempt, double timeout_s)>& attempt,
                         const std::function<void(int, double, const std::string&)>& on_retry) {
  RetryResult result;
  double delay_s = backoff.initial_delay_s;
  const std::int64_t start_ns = clock.now_ns();
  const auto left_s = [&] {
    return backoff.total_s - units::seconds_from_nanoseconds(clock.now_ns() - start_ns);
  };
  // Below this an attempt could not even connect: not worth starting.
  constexpr double kShortestAttemptS = 0.01;
  for (int number = 1;; ++number) {
    const double handed_s = backoff.total_s > 0.0 ? std::max(left_s(), 0.001) : 0.0;
    result.last = attempt(number, handed_s);
    result.attempts = number;
    if (!result.last.retry || number >= backoff.max_attempts) {
      // An attempt cut short by the request deadline ended the request: its exchange ran out of
      // the time it was handed (what was left), or no time is left. Say so.
      const Outcome& outcome = result.last.outcome;
      const bool ran_out_of_handed_time =
          outcome.failure == Failure::kDeadline && outcome.deadline_s >= handed_s * (1.0 - 1e-9);
      result.out_of_time = backoff.total_s > 0.0 && !outcome.response &&
                           (ran_out_of_handed_time || left_s() < kShortestAttemptS);
      return result;
    }
    std::optional<double> server_delay_s;
    if (result.last.outcome.response) {
      server_delay_s = retry_after_s(*result.last.outcome.response);
    }
    const double pause_s =
        std::min(backoff.max_delay_s, std::max(delay_s, server_delay_s.value_or(0.0)));
    if (backoff.total_s > 0.0 && left_s() - pause_s < kShortestAttemptS) {
      result.out_of_time = true;
      return result;
    }
    if (on_retry) {
      on_retry(number, pause_s, result.last.why);
    }
    clock.sleep_for_s(pause_s);
    delay_s = std::min(backoff.max_delay_s, delay_s * backoff.multiplier);
  }
}

}  // namespace zeus::http
