// The Pushgateway client against local servers that answer 200, 400 and 500, that never answer,
// that close mid-response, and against a closed port; grouping-key paths; URL validation; and the
// counter and gauge pushers on simulated GPUs (thread start/stop, failures counted, not thrown).
#include "zeus/metrics/pushgateway.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <thread>

#include "support/expect_error.hpp"
#include "support/local_http_server.hpp"
#include "support/loopback_peers.hpp"
#include "support/wait_until.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::metrics {
namespace {

using zeus::testing::expect_error;
using zeus::testing::wait_until;
using Seconds = std::chrono::duration<double>;

// A cpp-httplib server on a loopback port that records what it was sent.
class RecordingGateway {
 public:
  explicit RecordingGateway(int status = 200, std::string answer = "") {
    const auto handler = [this, status, answer](const httplib::Request& req,
                                                httplib::Response& res) {
      {
        const std::lock_guard lock(mutex_);
        method_ = req.method;
        path_ = req.path;
        body_ = req.body;
        content_type_ = req.get_header_value("Content-Type");
        ++requests_;
      }
      res.status = status;
      res.set_content(answer, "text/plain");
    };
    http_.server().Put(".*", handler);
    http_.server().Post(".*", handler);
    http_.server().Delete(".*", handler);
    http_.start();
  }
  ~RecordingGateway() { http_.stop(); }
  std::string url() const { return http_.url(); }
  int requests() const {
    const std::lock_guard lock(mutex_);
    return requests_;
  }
  std::string method() const {
    const std::lock_guard lock(mutex_);
    return method_;
  }
  std::string path() const {
    const std::lock_guard lock(mutex_);
    return path_;
  }
  std::string body() const {
    const std::lock_guard lock(mutex_);
    return body_;
  }
  std::string content_type() const {
    const std::lock_guard lock(mutex_);
    return content_type_;
  }

 private:
  zeus::testing::LocalHttpServer http_;
  mutable std::mutex mutex_;
  std::string method_, path_, body_, content_type_;
  int requests_ = 0;
};

// A peer that accepts and reads each request, then never answers (until it goes).
zeus::testing::RawHttpPeer::Respond never_answer() {
  return [](const std::string&) { return std::nullopt; };
}

// A peer that answers with a head promising 100 bytes, sends 3, and closes.
zeus::testing::RawHttpPeer::Respond cut_short() {
  return [](const std::string&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
  };
}

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

PushgatewayClient client_for(const std::string& url, const std::string& job = "train",
                             double timeout_s = 10.0) {
  PushgatewayOptions options;
  options.url = url;
  options.job = job;
  options.connect_timeout_s = 1.0;
  options.timeout_s = timeout_s;
  return PushgatewayClient(options);
}

TEST(PushgatewayPath, EscapesJobAndLabelValuesAsTheGatewayWants) {
  EXPECT_EQ(pushgateway_group_path("train", {}), "/metrics/job/train");
  EXPECT_EQ(pushgateway_group_path("a/b", {}), "/metrics/job@base64/YS9i");
  EXPECT_EQ(pushgateway_group_path("j", {{"instance", ""}}), "/metrics/job/j/instance@base64/=");
  EXPECT_EQ(pushgateway_group_path("j", {{"rank", "x y\"%"}}), "/metrics/job/j/rank/x%20y%22%25");
  EXPECT_EQ(pushgateway_group_path("caf\xc3\xa9", {}), "/metrics/job/caf%C3%A9");
  // Padding: 1, 2 and 3 trailing bytes.
  EXPECT_EQ(pushgateway_group_path("/", {}), "/metrics/job@base64/Lw==");
  EXPECT_EQ(pushgateway_group_path("//", {}), "/metrics/job@base64/Ly8=");
  EXPECT_EQ(pushgateway_group_path("///", {}), "/metrics/job@base64/Ly8v");
}

TEST(PushgatewayClient, RejectsMalformedUrlsJobsAndTimeouts) {
  for (const char* url :
       {"", "   ", "ftp://host:9091", "http://", "http://:9091", "http://h:0", "http://h:99999",
        "http://h:abc", "http://h:9091/x?y=1", "http://a b:1", "http://user@h:9091"}) {
    expect_error([&] { client_for(url); }, ErrorKind::kInvalidArgument, {"Pushgateway URL"});
  }
  expect_error([] { client_for("http://h:9091", ""); }, ErrorKind::kInvalidArgument,
               {"job name is empty"});
  for (const double timeout : {0.0, -1.0, std::nan("")}) {
    expect_error([&] { client_for("http://h:9091", "j", timeout); }, ErrorKind::kInvalidArgument,
                 {"timeout"});
  }
  PushgatewayOptions options;
  options.url = "h:9091";
  options.job = "j";
  options.grouping = {{"job", "x"}};
  expect_error([&] { PushgatewayClient{options}; }, ErrorKind::kInvalidArgument, {"'job'"});
  options.grouping = {{"9x", "x"}};
  expect_error([&] { PushgatewayClient{options}; }, ErrorKind::kInvalidArgument, {"'9x'"});
  options.grouping = {{"a", "x"}, {"a", "y"}};
  expect_error([&] { PushgatewayClient{options}; }, ErrorKind::kInvalidArgument, {"twice"});
  // No scheme means http; a path prefix and trailing slashes are kept / dropped.
  EXPECT_EQ(client_for("gateway:9091").group_url(), "http://gateway:9091/metrics/job/train");
  EXPECT_EQ(client_for("HTTP://[::1]:9091/pg//", "a/b").group_url(),
            "http://[::1]:9091/pg/metrics/job@base64/YS9i");
}

TEST(PushgatewayClient, PutsPostsAndDeletesTheBodyAtTheGroupPath) {
  RecordingGateway gateway;
  PushgatewayOptions options;
  options.url = gateway.url() + "/";
  options.job = "a/b";
  options.grouping = {{"instance", "node 1"}};
  const PushgatewayClient client(options);
  client.push("x 1\n");
  EXPECT_EQ(gateway.method(), "PUT");
  EXPECT_EQ(gateway.path(), "/metrics/job@base64/YS9i/instance/node 1");  // decoded by the server
  EXPECT_EQ(gateway.body(), "x 1\n");
  EXPECT_EQ(gateway.content_type(), "text/plain; version=0.0.4; charset=utf-8");
  client.push_add("y 2\n");
  EXPECT_EQ(gateway.method(), "POST");
  client.remove();
  EXPECT_EQ(gateway.method(), "DELETE");
  EXPECT_EQ(gateway.requests(), 3);
}

TEST(PushgatewayClient, A400Or500NamesTheUrlTheStatusAndTheAnswer) {
  for (const int status : {400, 500}) {
    RecordingGateway gateway(status, "pushed metrics are invalid or inconsistent\n");
    const PushgatewayClient client = client_for(gateway.url());
    expect_error([&] { client.push("x 1\n"); }, ErrorKind::kUnavailable,
                 {gateway.url() + "/metrics/job/train", "HTTP " + std::to_string(status),
                  "pushed metrics are invalid or inconsistent"});
  }
}

TEST(PushgatewayClient, AClosedPortIsAClearErrorNotAHang) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port());
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { client_for(url).push("x 1\n"); }, ErrorKind::kUnavailable,
               {url, "cannot connect"});
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(PushgatewayClient, AGatewayThatNeverAnswersTimesOut) {
  zeus::testing::RawHttpPeer peer(never_answer());
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { client_for(peer.url(), "train", 0.3).push("x 1\n"); }, ErrorKind::kUnavailable,
               {peer.url(), "no complete answer", "read 0.3 s"});
  const double elapsed_s = Seconds(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(elapsed_s, 0.25);
  EXPECT_LT(elapsed_s, 5.0);
}

TEST(PushgatewayClient, AResponseCutShortIsAnError) {
  zeus::testing::RawHttpPeer peer(cut_short());
  expect_error([&] { client_for(peer.url()).push("x 1\n"); }, ErrorKind::kUnavailable,
               {peer.url(), "no complete answer"});
}

TEST(PushgatewayClient, CancelEndsAPushInFlightAndRefusesLaterOnes) {
  zeus::testing::RawHttpPeer peer(never_answer());
  const PushgatewayClient client = client_for(peer.url(), "train", 30.0);
  std::atomic<bool> failed{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread pusher([&] {
    try {
      client.push("x 1\n");
    } catch (const Error&) {
      failed = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  client.cancel();
  pusher.join();
  EXPECT_TRUE(failed);
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 10.0);
  expect_error([&] { client.push("x 1\n"); }, ErrorKind::kUnavailable, {"shutting down"});
}

std::atomic<int> g_sigpipes{0};

TEST(PushgatewayClient, ACancelMidBodyIsTheCallsErrorNotASigpipe) {
  // cpp-httplib 0.11 sends without MSG_NOSIGNAL: a write on the socket cancel() shut down raises
  // SIGPIPE, which would end a training job. The handler here counts what would have killed it.
  struct sigaction counting {};
  counting.sa_handler = [](int) { g_sigpipes.fetch_add(1); };
  sigemptyset(&counting.sa_mask);
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, &counting, &before), 0);
  g_sigpipes.store(0);
  // The peer reads the head, starts an answer and reads nothing more: 32 MiB fill every buffer
  // and the write blocks. The bytes of answer waiting keep cpp-httplib's liveness check before
  // each send passing after cancel() shut the socket down, so the next send hits the shut
  // socket: EPIPE, and SIGPIPE unless held off.
  std::promise<void> head_read;
  zeus::testing::RawHttpPeer peer(
      [&](const std::string&) {
        head_read.set_value();
        return "HTTP/1.1 200 OK\r\n";
      },
      /*close_after_answer=*/false);
  const PushgatewayClient client = client_for(peer.url(), "train", 30.0);
  const std::string body(32u << 20u, '#');
  std::atomic<bool> failed{false};
  std::thread pusher([&] {
    try {
      client.push(body);
    } catch (const Error&) {
      failed = true;
    }
  });
  ASSERT_EQ(head_read.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the body's send now blocks
  client.cancel();
  pusher.join();
  ::sigaction(SIGPIPE, &before, nullptr);
  EXPECT_TRUE(failed);
  EXPECT_EQ(g_sigpipes.load(), 0);
}

TEST(WindowFamilies, CountersAndGaugesRenderTheReferenceNames) {
  WindowEnergyCounters counters;
  monitor::Measurement measurement;
  measurement.gpu_energy_j.set(0, 2.5);
  measurement.cpu_energy_j.set(1, 1.0);
  counters.add("a\"b\\c\nd", measurement);
  counters.add("a\"b\\c\nd", measurement);
  measurement.gpu_energy_j.set(0, -4.0);  // a counter never goes down
  counters.add("a\"b\\c\nd", measurement);
  std::string out;
  counters.render(out);
  EXPECT_NE(out.find("# TYPE energy_monitor_gpu_energy_joules_total counter\n"), std::string::npos);
  EXPECT_NE(
      out.find(
          "energy_monitor_gpu_energy_joules_total{window=\"a\\\"b\\\\c\\nd\",index=\"0\"} 5\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("energy_monitor_cpu_energy_joules_total{"), std::string::npos);
  EXPECT_EQ(out.find("dram"), std::string::npos) << "no DRAM family without DRAM series";
  counters.erase("a\"b\\c\nd");
  out.clear();
  counters.render(out);
  EXPECT_EQ(out, "");

  WindowPowerGauges gauges;
  gauges.set("w", 1, 301.5);
  out.clear();
  gauges.render(out);
  EXPECT_EQ(out,
            "# HELP power_monitor_gpu_power_watts GPU instant power during each window, in watts\n"
            "# TYPE power_monitor_gpu_power_watts gauge\n"
            "power_monitor_gpu_power_watts{window=\"w\",index=\"1\"} 301.5\n");
}

device::Gpus simulated_gpus(int count) {
  std::vector<std::shared_ptr<device::Gpu>> gpus;
  std::vector<int> physical;
  for (int i = 0; i < count; ++i) {
    gpus.push_back(std::make_shared<device::SimulatedGpu>(device::simulated_gpu_model("a100"), i,
                                                          steady_clock()));
    physical.push_back(i);
  }
  return device::Gpus(gpus, physical);
}

TEST(EnergyCounterPusher, PushesGrowingCountersEveryPeriodAndStopsAtTheLastEnd) {
  RecordingGateway gateway;
  const device::Gpus gpus = simulated_gpus(2);
  EnergyCounterPusher pusher(gpus, {0, 1}, {}, std::nullopt, 0.05, client_for(gateway.url()));
  pusher.begin_window("epoch");
  expect_error([&] { pusher.begin_window("epoch"); }, ErrorKind::kAlreadyExists, {"'epoch'"});
  ASSERT_TRUE(wait_until([&] { return gateway.requests() >= 3; }));
  const std::string body = gateway.body();
  EXPECT_NE(body.find("energy_monitor_gpu_energy_joules_total{window=\"epoch\",index=\"1\"} "),
            std::string::npos)
      << body;
  const double first_j = pusher.value("gpu", "epoch", 0).value();
  ASSERT_TRUE(wait_until([&] { return pusher.value("gpu", "epoch", 0).value() > first_j; }));
  EXPECT_TRUE(pusher.end_window("epoch"));
  EXPECT_TRUE(pusher.open_windows().empty());
  const int requests = gateway.requests();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(gateway.requests(), requests) << "the sampler thread stopped at the last end_window";
  EXPECT_NE(gateway.body().find("window=\"epoch\""), std::string::npos)
      << "the final push carries the ended window";
  expect_error([&] { pusher.end_window("epoch"); }, ErrorKind::kNotFound, {"'epoch' is not open"});
  EXPECT_EQ(pusher.stats().failures, 0u);
  // A second run restarts the thread.
  pusher.begin_window("epoch");
  ASSERT_TRUE(wait_until([&] { return gateway.requests() > requests + 1; }));
  EXPECT_TRUE(pusher.end_window("epoch"));
}

TEST(EnergyCounterPusher, RejectsBadPeriodsAndIndices) {
  const device::Gpus gpus = simulated_gpus(1);
  for (const double period : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    expect_error(
        [&] { EnergyCounterPusher(gpus, {0}, {}, std::nullopt, period, client_for("h:9091")); },
        ErrorKind::kInvalidArgument, {"update period"});
  }
  EXPECT_THROW(EnergyCounterPusher(gpus, {3}, {}, std::nullopt, 1.0, client_for("h:9091")), Error);
  expect_error([&] { PowerGaugePusher(gpus, {3}, 1.0, client_for("h:9091")); },
               ErrorKind::kInvalidArgument, {"GPU index 3"});
}

TEST(EnergyCounterPusher, ADownGatewayIsCountedNotThrown) {
  const device::Gpus gpus = simulated_gpus(1);
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port());
  EnergyCounterPusher pusher(gpus, {0}, {}, std::nullopt, 0.02, client_for(url));
  pusher.begin_window("w");
  ASSERT_TRUE(wait_until([&] { return pusher.stats().failures >= 2; }));
  EXPECT_FALSE(pusher.end_window("w"));
  const PushStats stats = pusher.stats();
  EXPECT_EQ(stats.failures, stats.pushes);
  EXPECT_NE(stats.last_error.find(url), std::string::npos) << stats.last_error;
}

TEST(WindowPusher, DestroyingARunningPusherWithAHungGatewayIsPrompt) {
  zeus::testing::RawHttpPeer peer(never_answer());
  const device::Gpus gpus = simulated_gpus(1);
  auto pusher = std::make_unique<PowerGaugePusher>(gpus, std::vector<int>{0}, 0.02,
                                                   client_for(peer.url(), "j", 30.0));
  pusher->begin_window("w");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a push is now in flight
  const auto start = std::chrono::steady_clock::now();
  pusher.reset();
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - start).count(), 5.0);
}

TEST(WindowPusher, NoWindowBeginsAfterShutdown) {
  const device::Gpus gpus = simulated_gpus(1);
  PowerGaugePusher pusher(gpus, {0}, 1.0, client_for("h:9091"));
  pusher.shutdown();
  pusher.shutdown();  // idempotent
  expect_error([&] { pusher.begin_window("w"); }, ErrorKind::kUnavailable, {"shut down"});
  EXPECT_TRUE(pusher.open_windows().empty());
}

TEST(PowerGaugePusher, PushesEachGpusInstantPowerPerWindow) {
  RecordingGateway gateway;
  const device::Gpus gpus = simulated_gpus(2);
  PowerGaugePusher pusher(gpus, {1}, 0.05, client_for(gateway.url(), "power"));
  pusher.begin_window("train");
  pusher.begin_window("eval");
  ASSERT_TRUE(wait_until([&] { return gateway.requests() >= 2; }));
  const std::string body = gateway.body();
  EXPECT_NE(body.find("power_monitor_gpu_power_watts{window=\"eval\",index=\"1\"} "),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("index=\"0\""), std::string::npos) << "only the GPUs asked for";
  const double watts = pusher.value("train", 1).value();
  EXPECT_GT(watts, 20.0);
  EXPECT_LT(watts, 500.0);
  EXPECT_TRUE(pusher.end_window("train"));
  EXPECT_EQ(pusher.open_windows(), std::vector<std::string>{"eval"});
  EXPECT_FALSE(pusher.value("train", 1).has_value()) << "an ended window is forgotten";
  EXPECT_TRUE(pusher.end_window("eval"));
  EXPECT_EQ(gateway.path(), "/metrics/job/power");
}

}  // namespace
}  // namespace zeus::metrics
