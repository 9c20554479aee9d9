// Polling for a condition that another thread or process makes true, with a bound: the one
// helper for "eventually" in the tests.
#pragma once

#include <chrono>
#include <thread>

namespace zeus::testing {

// Polls `condition` every `every` until it holds or `timeout` passes; then checks it once more.
// True when it held.
template <typename Condition>
bool wait_until(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(every);
  }
  return condition();
}

}  // namespace zeus::testing
