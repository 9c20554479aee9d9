// The wall-clock (Unix) start times of open measurement windows, for monitors that price or
// weigh a window by when it ran (CarbonEmissionMonitor, EnergyCostMonitor). Thread-safe.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "zeus/common/clock.hpp"

namespace zeus::monitor {

class WallWindowTimes {
 public:
  // `wall_clock` gives Unix seconds; system_clock() when null.
  explicit WallWindowTimes(std::shared_ptr<Clock> wall_clock)
      : wall_clock_(wall_clock ? std::move(wall_clock) : system_clock()) {}

  void begin(const std::string& name) {
    const double now_unix_s = wall_clock_->now_s();
    const std::lock_guard lock(mutex_);
    starts_unix_s_[name] = now_unix_s;
  }

  // [start, now] of window `name`, which is forgotten; a window never begun here is taken to
  // have started now (zero length).
  std::pair<double, double> end(const std::string& name) {
    const double end_unix_s = wall_clock_->now_s();
    const std::lock_guard lock(mutex_);
    const auto node = starts_unix_s_.extract(name);
    return {node ? std::min(node.mapped(), end_unix_s) : end_unix_s, end_unix_s};
  }

 private:
  std::shared_ptr<Clock> wall_clock_;
  std::mutex mutex_;
  std::unordered_map<std::string, double> starts_unix_s_;
};

}  // namespace zeus::monitor
