// Server-sent events: splitting a byte stream into events, each bounded in size. The reading
// side of zeusd's power streams (the client half of src/http).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace zeus::http {

// Splits a byte stream into SSE events at blank lines ("\n\n"). An event longer than
// max_event_bytes is dropped, up to its blank line, and reported through on_oversized, instead
// of growing the buffer without bound.
class SseSplitter {
 public:
  explicit SseSplitter(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}
  // Feeds `bytes`; calls on_event for each complete event, on_oversized(bytes dropped) once per
  // event that was too long.
  void feed(std::string_view bytes, const std::function<void(std::string_view)>& on_event,
            const std::function<void(std::size_t)>& on_oversized);

 private:
  std::size_t max_event_bytes_;
  std::string pending_;      // the unfinished event (while dropping: at most a trailing '\n')
  bool dropping_ = false;    // inside an oversized event, up to its blank line
  std::size_t dropped_ = 0;  // bytes dropped of that event so far
};

}  // namespace zeus::http
