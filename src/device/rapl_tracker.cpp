// The RAPL wraparound tracker (see include/zeus/device/rapl_tracker.hpp and docs/rapl.md).
#include "zeus/device/rapl_tracker.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/log.hpp"
#include "device/rapl_zone.hpp"

namespace zeus::device {

// Released when the last copy of a track() result goes.
class RaplTracker::Handle {
 public:
  Handle(std::shared_ptr<RaplTracker> tracker, std::vector<std::shared_ptr<RaplZone>> zones)
      : tracker_(std::move(tracker)), zones_(std::move(zones)) {}
  ~Handle() { tracker_->release(zones_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

 private:
  const std::shared_ptr<RaplTracker> tracker_;
  const std::vector<std::shared_ptr<RaplZone>> zones_;
};

RaplTracker::RaplTracker(RaplTrackerOptions options)
    : clock_(options.clock ? std::move(options.clock) : steady_clock()),
      start_thread_(options.start_thread) {}

RaplTracker::~RaplTracker() {
  // Handles keep the tracker alive, so the thread has normally stopped already.
  const std::lock_guard<std::mutex> lifecycle(lifecycle_mutex_);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::shared_ptr<RaplTracker> RaplTracker::process() {
  static const std::shared_ptr<RaplTracker> tracker = std::make_shared<RaplTracker>();
  return tracker;
}

std::shared_ptr<void> RaplTracker::track(const std::vector<std::shared_ptr<RaplZone>>& zones) {
  std::shared_ptr<RaplTracker> self = shared_from_this();  // throws unless made by make_shared
  const std::lock_guard<std::mutex> lifecycle(lifecycle_mutex_);
  std::vector<std::shared_ptr<RaplZone>> fresh;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const std::shared_ptr<RaplZone>& zone : zones) {
      const bool tracked = std::any_of(tracked_.begin(), tracked_.end(),
                                       [&](const Tracked& entry) { return entry.zone == zone; });
      if (!tracked && std::find(fresh.begin(), fresh.end(), zone) == fresh.end()) {
        fresh.push_back(zone);
      }
    }
  }
  // Before the thread can see them: the untracked time before this read is nobody's gap.
  for (const std::shared_ptr<RaplZone>& zone : fresh) {
    zone->read_in_background(/*starting=*/true);
  }
  bool start = false;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const std::shared_ptr<RaplZone>& zone : zones) {
      const auto found = std::find_if(tracked_.begin(), tracked_.end(),
                                      [&](const Tracked& entry) { return entry.zone == zone; });
      if (found != tracked_.end()) {
        ++found->holders;
      } else {
        tracked_.push_back(Tracked{zone, 1});
      }
    }
    ++handles_;
    update_period_locked();
    start = start_thread_ && !running_;
    if (start) {
      running_ = true;
      stopping_ = false;
      // The new zones were just read: the first sweep is one period after this, however late
      // the thread itself starts.
      last_sweep_ns_ = clock_->now_ns();
    } else {
      woken_ = true;  // the period may be shorter now
    }
  }
  if (start) {
    log().debug("RAPL tracker: started, reading {} zone(s) every {} ms", tracked_zones(),
                period_ns() / 1'000'000);
    thread_ = std::thread([this] { run(); });
  } else {
    wake_cv_.notify_all();
  }
  return std::make_shared<Handle>(std::move(self), zones);
}

void RaplTracker::release(const std::vector<std::shared_ptr<RaplZone>>& zones) {
  const std::lock_guard<std::mutex> lifecycle(lifecycle_mutex_);
  bool stop = false;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const std::shared_ptr<RaplZone>& zone : zones) {
      const auto found = std::find_if(tracked_.begin(), tracked_.end(),
                                      [&](const Tracked& entry) { return entry.zone == zone; });
      if (found != tracked_.end() && --found->holders == 0) {
        tracked_.erase(found);
      }
    }
    --handles_;
    update_period_locked();
    if (handles_ == 0 && running_) {
      stopping_ = true;
      stop = true;
    }
  }
  if (!stop) {
    return;
  }
  wake_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  stopping_ = false;
  log().debug("RAPL tracker: stopped");
}

void RaplTracker::update_period_locked() {
  period_ns_ = 0;
  for (const Tracked& entry : tracked_) {
    const std::int64_t zone_period_ns = entry.zone->read_period_ns();
    period_ns_ = period_ns_ == 0 ? zone_period_ns : std::min(period_ns_, zone_period_ns);
  }
}

void RaplTracker::sweep_zones(std::vector<std::shared_ptr<RaplZone>>& batch) {
  for (const std::shared_ptr<RaplZone>& zone : batch) {
    zone->read_in_background(/*starting=*/false);
  }
  batch.clear();  // a zone released meanwhile is not kept alive by the thread
}

void RaplTracker::sweep() {
  std::vector<std::shared_ptr<RaplZone>> batch;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const Tracked& entry : tracked_) {
      batch.push_back(entry.zone);
    }
  }
  const std::int64_t now_ns = clock_->now_ns();
  sweep_zones(batch);
  const std::lock_guard<std::mutex> lock(mutex_);
  ++sweeps_;
  last_sweep_ns_ = now_ns;
}

void RaplTracker::wake() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  wake_cv_.notify_all();
}

void RaplTracker::run() {
  std::vector<std::shared_ptr<RaplZone>> batch;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const std::int64_t now_ns = clock_->now_ns();
    if (period_ns_ > 0 && now_ns - last_sweep_ns_ >= period_ns_) {
      for (const Tracked& entry : tracked_) {
        batch.push_back(entry.zone);
      }
      lock.unlock();  // no lock of the tracker's is held across the sysfs reads
      sweep_zones(batch);
      lock.lock();
      ++sweeps_;
      last_sweep_ns_ = now_ns;  // the cadence does not stretch by the sweep's own time
      continue;
    }
    const auto predicate = [this] { return stopping_ || woken_; };
    if (period_ns_ > 0) {
      wake_cv_.wait_for(lock, std::chrono::nanoseconds(last_sweep_ns_ + period_ns_ - now_ns),
                        predicate);
    } else {
      wake_cv_.wait(lock, predicate);
    }
    woken_ = false;
  }
}

bool RaplTracker::running() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

std::size_t RaplTracker::tracked_zones() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return tracked_.size();
}

std::int64_t RaplTracker::period_ns() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return period_ns_;
}

std::uint64_t RaplTracker::sweeps() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return sweeps_;
}

}  // namespace zeus::device
