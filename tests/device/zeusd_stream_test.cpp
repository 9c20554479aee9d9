// The client side of zeusd's SSE power streams and the status-keeping request (what the Python
// ZeusdClient and PowerStreamingClient are built on): an in-process daemon on a Unix socket, and
// hostile peers (a socket that accepts connections and never answers).
#include "zeus/device/zeusd_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "device/zeusd_connection.hpp"
#include "support/expect_error.hpp"
#include "support/loopback_peers.hpp"
#include "support/running_daemon.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {
namespace {

using daemon::DaemonConfig;
using daemon::Running;
using Events = std::vector<std::string>;

// A Unix socket that is listened on and never accepted: connecting succeeds (the backlog),
// nothing is ever answered.
class SilentSocket {
 public:
  ZeusdConfig config() const {
    ZeusdConfig config;
    config.socket_path = path_;
    return config;
  }

 private:
  zeus::testing::TempDir dir_;
  std::string path_ = (dir_.path() / "silent.sock").string();
  zeus::testing::SilentListener listener_{path_};
};

ZeusdConfig config_of(Running& daemon) {
  ZeusdConfig config;
  config.socket_path = daemon.daemon().config().socket_path.string();
  return config;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(ZeusdEventStream, ReadsTheGpuStreamUntilCancelled) {
  Running daemon(DaemonConfig{});
  ZeusdEventStream stream(config_of(daemon));
  Events events;
  const ZeusdStreamOutcome outcome =
      stream.run("/gpu/stream_power?gpu_ids=0,1", [&](std::string_view event) {
        events.emplace_back(event);
        if (events.size() == 2) {
          stream.cancel();
        }
      });
  EXPECT_EQ(outcome.end, ZeusdStreamEnd::kCancelled);
  EXPECT_EQ(outcome.status, 200);
  ASSERT_GE(events.size(), 2U);
  // The current value of each GPU right after subscribing.
  EXPECT_EQ(events[0].rfind("data: {", 0), 0U) << events[0];
  EXPECT_NE(events[0].find("\"gpu_id\":0"), std::string::npos) << events[0];
  EXPECT_NE(events[1].find("\"gpu_id\":1"), std::string::npos) << events[1];
  // Later runs return at once.
  EXPECT_EQ(stream.run("/gpu/stream_power", nullptr).end, ZeusdStreamEnd::kCancelled);
}

TEST(ZeusdEventStream, ARefusalKeepsStatusAndBody) {
  Running daemon(DaemonConfig{});
  ZeusdEventStream stream(config_of(daemon));
  const ZeusdStreamOutcome outcome = stream.run("/gpu/stream_power?gpu_ids=7", nullptr);
  EXPECT_EQ(outcome.end, ZeusdStreamEnd::kRefused);
  EXPECT_EQ(outcome.status, 400);
  EXPECT_NE(outcome.body.find("Unknown GPU indices"), std::string::npos) << outcome.body;
  EXPECT_STREQ(zeusd_stream_end_name(outcome.end), "refused");
}

TEST(ZeusdEventStream, ACallbackExceptionEndsTheRunAndIsRethrown) {
  Running daemon(DaemonConfig{});
  ZeusdEventStream stream(config_of(daemon));
  EXPECT_THROW(stream.run("/gpu/stream_power",
                          [](std::string_view) { throw std::runtime_error("from the callback"); }),
               std::runtime_error);
}

TEST(ZeusdEventStream, NoDaemonIsUnreachable) {
  zeus::testing::TempDir dir;
  ZeusdConfig config;
  config.socket_path = (dir.path() / "absent.sock").string();
  ZeusdEventStream stream(config);
  const ZeusdStreamOutcome outcome = stream.run("/gpu/stream_power", nullptr);
  EXPECT_EQ(outcome.end, ZeusdStreamEnd::kUnreachable);
  EXPECT_FALSE(outcome.error.empty());
}

TEST(ZeusdEventStream, APeerThatNeverAnswersIdlesOut) {
  SilentSocket silent;
  ZeusdStreamOptions options;
  options.idle_timeout_s = 0.3;
  ZeusdEventStream stream(silent.config(), options);
  const auto start = std::chrono::steady_clock::now();
  const ZeusdStreamOutcome outcome = stream.run("/gpu/stream_power", nullptr);
  EXPECT_EQ(outcome.end, ZeusdStreamEnd::kIdle) << outcome.error;
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(ZeusdEventStream, CancelEndsABlockedRunPromptly) {
  SilentSocket silent;
  ZeusdEventStream stream(silent.config());  // 60 s of silence before it would idle out
  ZeusdStreamOutcome outcome;
  std::thread reader([&] { outcome = stream.run("/gpu/stream_power", nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  stream.cancel();
  reader.join();
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_EQ(outcome.end, ZeusdStreamEnd::kCancelled);
}

TEST(ZeusdEventStream, CancelRacingTheConnectNeverHangs) {
  // A cancel() that shuts the socket down while cpp-httplib writes the request raises SIGPIPE in
  // the writing thread (cpp-httplib 0.11 sends without MSG_NOSIGNAL); the stream holds it off
  // (SigpipeGuard), so SIGPIPE keeps its default, deadly disposition here.
  SilentSocket silent;
  for (int delay_us : {0, 10, 100, 1000}) {
    ZeusdEventStream stream(silent.config());
    ZeusdStreamOutcome outcome;
    std::thread reader([&] { outcome = stream.run("/gpu/stream_power", nullptr); });
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    const auto start = std::chrono::steady_clock::now();
    stream.cancel();
    reader.join();
    EXPECT_LT(seconds_since(start), 2.0) << delay_us;
    EXPECT_EQ(outcome.end, ZeusdStreamEnd::kCancelled) << delay_us;
  }
}

TEST(ZeusdConnectionRequest, ReturnsEveryStatusWithItsBody) {
  Running daemon(DaemonConfig{});
  ZeusdConnection connection(config_of(daemon));
  const ZeusdReply time = connection.request("GET", "/time");
  EXPECT_EQ(time.status, 200);
  EXPECT_NE(time.body.find("timestamp_ms"), std::string::npos);
  const ZeusdReply refused =
      connection.request("POST", "/gpu/set_power_limit?gpu_ids=9&power_limit_mw=1&block=true");
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("GPU index 9 does not exist"), std::string::npos) << refused.body;
  EXPECT_EQ(zeus::testing::error_of([&] { connection.request("PUT", "/time"); }).kind(),
            ErrorKind::kInvalidArgument);
}

TEST(ZeusdConnectionRequest, APeerThatNeverAnswersTimesOut) {
  SilentSocket silent;
  ZeusdConfig config = silent.config();
  config.timeout_s = 0.3;
  ZeusdConnection connection(config);
  const auto start = std::chrono::steady_clock::now();
  const Error error = zeus::testing::error_of([&] { connection.request("GET", "/discover"); });
  EXPECT_EQ(error.kind(), ErrorKind::kIo);
  EXPECT_LT(seconds_since(start), 5.0);
}

}  // namespace
}  // namespace zeus::device
