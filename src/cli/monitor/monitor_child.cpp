// `zeus monitor -- CMD`: the command's process while it runs (monitor_command.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/arguments.hpp"
#include "cli/monitor/monitor_command.hpp"
#include "zeus/common/units.hpp"

namespace zeus::cli::monitor_command {
namespace {

bool is_stop_signal(int signal) {
  return signal == SIGINT || signal == SIGTERM;
}

}  // namespace

const std::vector<int>& forwarded_signals() {
  static const std::vector<int> signals = {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return signals;
}

ChildExit supervise(ChildProcess& child, SignalWatch& watch, const Clock& clock,
                    std::int64_t start_ns, double kill_after_s, RunOutcome& outcome) {
  std::optional<std::int64_t> kill_at_ns;  // set while the grace period runs
  int grace_signal = SIGTERM;              // the stop signal that started it
  const std::string grace = format_duration(kill_after_s);
  const auto start_grace_period = [&](int signal) {
    if (!kill_at_ns) {
      grace_signal = signal;
      const std::int64_t now_ns = clock.now_ns();
      const std::int64_t grace_ns = units::nanoseconds_from_seconds(kill_after_s);
      kill_at_ns = grace_ns > INT64_MAX - now_ns ? INT64_MAX : now_ns + grace_ns;
    }
  };
  const auto send_kill = [&](std::string reason) {
    if (outcome.kill_reason.empty()) {
      child.send_signal(SIGKILL);
      outcome.kill_reason = std::move(reason);
    }
  };
  while (true) {
    if (const auto exited = child.try_wait()) {
      return *exited;
    }
    std::optional<double> timeout_s;
    const auto wake_within = [&timeout_s](double seconds) {
      timeout_s = std::min(timeout_s.value_or(seconds), seconds);
    };
    if (outcome.limit_s && !outcome.limit_reached) {
      const double remaining_s =
          *outcome.limit_s - units::seconds_from_nanoseconds(clock.now_ns() - start_ns);
      if (remaining_s <= 0.0) {
        child.send_signal(SIGTERM);
        outcome.limit_reached = true;
        start_grace_period(SIGTERM);
      } else {
        wake_within(remaining_s);
      }
    }
    if (kill_at_ns && outcome.kill_reason.empty()) {
      const double remaining_s = units::seconds_from_nanoseconds(*kill_at_ns - clock.now_ns());
      if (remaining_s <= 0.0) {
        send_kill(kill_after_s > 0.0
                      ? fmt::format("sent SIGKILL after the {} grace period", grace)
                      : fmt::format("sent SIGKILL right after {}", signal_name(grace_signal)));
        continue;
      }
      wake_within(remaining_s);
    }
    // Woken by SIGCHLD, a signal zeus received (forwarded by the handler) or a deadline.
    const std::optional<int> signal = watch.next_signal(timeout_s);
    // A stop signal that was ignored before zeus is ignored by the command too: it asks nothing.
    if (signal && is_stop_signal(*signal) && !forwarding::was_ignored(*signal)) {
      if (kill_at_ns) {
        send_kill(fmt::format("sent SIGKILL on {} during the {} grace period", signal_name(*signal),
                              grace));
      } else {
        start_grace_period(*signal);
      }
    }
  }
}

}  // namespace zeus::cli::monitor_command
