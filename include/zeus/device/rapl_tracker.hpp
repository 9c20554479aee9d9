// The RAPL wraparound tracker: one background thread per process that reads every RAPL zone
// being measured often enough that no wraparound of its counter goes unseen (docs/rapl.md,
// "Counter wraparound"). It runs only while something holds a handle from
// Cpu::track_wraparound() (ZeusMonitor with CPU packages, zeusd serving CPUs): the first handle
// starts the thread, the last one stops it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "zeus/common/clock.hpp"

namespace zeus::device {

class RaplZone;  // src/device/rapl_zone.hpp

struct RaplTrackerOptions {
  // Times the reads and the periods; the steady clock when null. With a ManualClock, call wake()
  // after advancing it so that the thread sees the new time.
  std::shared_ptr<const Clock> clock;
  // Start the thread while zones are tracked. Tests turn it off and call sweep().
  bool start_thread = true;
};

// Create with std::make_shared (handles keep the tracker alive).
class RaplTracker : public std::enable_shared_from_this<RaplTracker> {
 public:
  explicit RaplTracker(RaplTrackerOptions options = {});
  ~RaplTracker();
  RaplTracker(const RaplTracker&) = delete;
  RaplTracker& operator=(const RaplTracker&) = delete;

  // The process's tracker, on the steady clock: the one discover_rapl_cpus() uses by default.
  static std::shared_ptr<RaplTracker> process();

  const std::shared_ptr<const Clock>& clock() const { return clock_; }

  // Tracks `zones` while the returned handle lives: each zone that was not tracked yet is read at
  // once (so that a gap is measured from now), and the thread starts if it was not running. A
  // zone tracked by several handles is read once per sweep.
  std::shared_ptr<void> track(const std::vector<std::shared_ptr<RaplZone>>& zones);

  // One sweep now, on the caller's thread: every tracked zone is read (what the thread does every
  // period()).
  void sweep();
  // Makes the thread look at the clock again (after a ManualClock was advanced).
  void wake();

  bool running() const;               // the thread is alive
  std::size_t tracked_zones() const;  // distinct zones tracked now
  std::int64_t period_ns() const;     // the shortest read period of the tracked zones; 0 if none
  std::uint64_t sweeps() const;       // sweeps made since construction (thread and sweep())

 private:
  struct Tracked {
    std::shared_ptr<RaplZone> zone;
    std::size_t holders = 0;
  };
  class Handle;

  void release(const std::vector<std::shared_ptr<RaplZone>>& zones);
  void run();
  void sweep_zones(std::vector<std::shared_ptr<RaplZone>>& batch);  // mutex_ not held
  void update_period_locked();

  const std::shared_ptr<const Clock> clock_;
  const bool start_thread_;

  mutable std::mutex mutex_;  // guards everything below but thread_
  std::condition_variable wake_cv_;
  std::vector<Tracked> tracked_;
  std::size_t handles_ = 0;
  std::int64_t period_ns_ = 0;
  std::uint64_t sweeps_ = 0;
  std::int64_t last_sweep_ns_ = 0;  // on clock_: the last sweep, or the start of the thread
  bool running_ = false;
  bool stopping_ = false;
  bool woken_ = false;

  std::mutex lifecycle_mutex_;  // serializes starting and stopping the thread; guards thread_
  std::thread thread_;
};

}  // namespace zeus::device
