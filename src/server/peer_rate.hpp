// A per-peer rate limit: a token bucket per key (a peer's address) that holds up to `per_minute`
// tokens and refills at `per_minute` a minute. The table of buckets is bounded: past
// kMaxPeers, buckets that have refilled (peers idle for a minute) are dropped, and when every
// bucket is in use the new peer shares one overflow bucket.
#pragma once

#include <algorithm>
#include <chrono>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zeus::server {

class PeerRate {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxPeers = 4096;

  // 0: no limit.
  explicit PeerRate(int per_minute) : per_minute_(per_minute) {}

  // Takes one token from `key`'s bucket; false when it is empty.
  bool take(const std::string& key, Clock::time_point now = Clock::now()) {
    if (per_minute_ <= 0) {
      return true;
    }
    std::lock_guard lock(mutex_);
    auto found = buckets_.find(key);
    if (found == buckets_.end()) {
      if (buckets_.size() >= kMaxPeers) {
        drop_full(now);
      }
      const bool room = buckets_.size() < kMaxPeers;
      found = buckets_.emplace(room ? key : std::string(), Bucket{capacity(), now}).first;
    }
    Bucket& bucket = found->second;
    refill(bucket, now);
    if (bucket.tokens < 1.0) {
      return false;
    }
    bucket.tokens -= 1.0;
    return true;
  }

  int per_minute() const { return per_minute_; }

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point updated;
  };
  double capacity() const { return static_cast<double>(per_minute_); }
  void refill(Bucket& bucket, Clock::time_point now) const {
    const double minutes = std::chrono::duration<double>(now - bucket.updated).count() / 60.0;
    bucket.tokens = std::min(capacity(), bucket.tokens + minutes * capacity());
    bucket.updated = now;
  }
  void drop_full(Clock::time_point now) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second, now);
      it = it->second.tokens >= capacity() ? buckets_.erase(it) : std::next(it);
    }
  }

  int per_minute_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace zeus::server
