// SSE events out of a byte stream.
#include "http/sse.hpp"

namespace zeus::http {

void SseSplitter::feed(std::string_view bytes,
                       const std::function<void(std::string_view)>& on_event,
                       const std::function<void(std::size_t)>& on_oversized) {
  pending_.append(bytes);
  std::size_t start = 0;
  while (true) {
    const std::size_t separator = pending_.find("\n\n", start);
    if (separator == std::string::npos) {
      break;
    }
    const std::size_t length = separator - start;
    if (dropping_ || length > max_event_bytes_) {
      if (on_oversized) {
        on_oversized(dropped_ + length);
      }
      dropping_ = false;
      dropped_ = 0;
    } else if (on_event) {
      on_event(std::string_view(pending_).substr(start, length));
    }
    start = separator + 2;
  }
  pending_.erase(0, start);
  if (!dropping_ && pending_.size() > max_event_bytes_) {
    dropping_ = true;
    dropped_ = 0;
  }
  if (dropping_) {
    // Only a trailing newline is kept: it may be the first half of the blank line that ends
    // the oversized event.
    const bool newline = !pending_.empty() && pending_.back() == '\n';
    dropped_ += pending_.size() - (newline ? 1 : 0);
    pending_.clear();
    if (newline) {
      pending_.push_back('\n');
    }
  }
}

}  // namespace zeus::http
