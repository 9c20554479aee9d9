// A Server-Sent Events stream from zeusd (GET /gpu/stream_power, /cpu/stream_power), for the
// Python PowerStreamingClient (docs/zeusd.md, "Clients").
//
// One ZeusdEventStream owns its own HTTP connection (a stream holds it for as long as it
// lasts, so it cannot share ZeusdConnection's). run() blocks while the daemon sends and hands
// every complete event (the text before a blank line) to a callback; cancel(), from any
// thread, makes a running or later run() return at once, so that a reader thread can always be
// stopped, even while the daemon is silent or never answered.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "zeus/device/zeusd_config.hpp"

namespace zeus::device {

// How a run() ended.
enum class ZeusdStreamEnd {
  kEnded,        // HTTP 200 and the daemon ended the stream
  kRefused,      // an answer other than 200 (status and body in the outcome)
  kUnreachable,  // no connection (refused, no socket, connect timeout)
  kLost,         // the connection broke after it was made
  kIdle,         // nothing arrived for idle_timeout_s (a silent peer, or one that never answers)
  kCancelled,    // cancel() was called
};

// "ended", "refused", "unreachable", "lost", "idle", "cancelled".
const char* zeusd_stream_end_name(ZeusdStreamEnd end);

struct ZeusdStreamOutcome {
  ZeusdStreamEnd end = ZeusdStreamEnd::kEnded;
  int status = 0;     // the HTTP status, when there was an answer
  std::string body;   // the body of a refusal (at most kMaxRefusalBytes)
  std::string error;  // what went wrong, for a log line
};

struct ZeusdStreamOptions {
  // A connection attempt that takes longer fails (kUnreachable).
  double connect_timeout_s = 5.0;
  // Silence for this long ends the run with kIdle. The daemon's GPU stream sends only changes,
  // so silence can be legitimate; a reconnect then just gets the current values again.
  double idle_timeout_s = 60.0;
  // An event (or an unterminated line) longer than this is dropped up to the next blank line
  // and reported through on_oversized, instead of growing the buffer without bound.
  std::size_t max_event_bytes = 1 << 20;
};

class ZeusdEventStream {
 public:
  static constexpr std::size_t kMaxRefusalBytes = 64 * 1024;

  ZeusdEventStream(ZeusdConfig config, ZeusdStreamOptions options = {});
  ~ZeusdEventStream();
  ZeusdEventStream(const ZeusdEventStream&) = delete;
  ZeusdEventStream& operator=(const ZeusdEventStream&) = delete;

  // GET `path_and_query` and read it until it ends, breaks, idles or is cancelled. on_event
  // gets each event's text (without the blank line); an exception it throws ends the run and
  // is rethrown here. Not for concurrent use: one run() at a time.
  ZeusdStreamOutcome run(const std::string& path_and_query,
                         const std::function<void(std::string_view)>& on_event,
                         const std::function<void(std::size_t)>& on_oversized = nullptr);

  // Thread-safe and idempotent: ends the current run() and makes every later one return
  // kCancelled without connecting.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  struct Impl;
  ZeusdConfig config_;
  ZeusdStreamOptions options_;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::device
