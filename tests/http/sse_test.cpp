// SSE events out of a byte stream: split at blank lines across chunks, oversized events dropped.
#include "http/sse.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zeus::http {
namespace {

using Events = std::vector<std::string>;

Events split(const std::vector<std::string>& chunks, std::size_t max_bytes,
             std::vector<std::size_t>* oversized = nullptr) {
  SseSplitter splitter(max_bytes);
  Events events;
  for (const std::string& chunk : chunks) {
    splitter.feed(
        chunk, [&](std::string_view event) { events.emplace_back(event); },
        [&](std::size_t bytes) {
          if (oversized != nullptr) {
            oversized->push_back(bytes);
          }
        });
  }
  return events;
}

TEST(SseSplitter, SplitsAtBlankLinesAcrossChunks) {
  EXPECT_EQ(split({"data: 1\n\ndata: 2\n\n"}, 100), (Events{"data: 1", "data: 2"}));
  EXPECT_EQ(split({"data: 1\n", "\ndat", "a: 2\n\nda"}, 100), (Events{"data: 1", "data: 2"}));
  EXPECT_EQ(split({"data: 1"}, 100), Events{});  // unfinished: nothing yet
}

TEST(SseSplitter, DropsAnOversizedEventAndKeepsTheNext) {
  std::vector<std::size_t> oversized;
  const std::string huge(50, 'x');
  // Complete in one chunk, and unterminated over several chunks with the blank line split.
  EXPECT_EQ(split({"data: " + huge + "\n\ndata: ok\n\n"}, 20, &oversized), Events{"data: ok"});
  EXPECT_EQ(oversized, (std::vector<std::size_t>{56}));
  oversized.clear();
  EXPECT_EQ(split({"data: ", huge, huge, "\n", "\ndata: after\n\n"}, 20, &oversized),
            Events{"data: after"});
  ASSERT_EQ(oversized.size(), 1U);
  EXPECT_GE(oversized[0], 100U);
}

}  // namespace
}  // namespace zeus::http
