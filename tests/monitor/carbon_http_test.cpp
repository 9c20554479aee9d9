// The ElectricityMaps client against a real HTTP server on loopback, started by the test: the
// documented response shapes, then the failures (timeout, 500, malformed JSON, server gone), and
// hostile services (trickling, hung, flooding) that must cost no more than the fetch's deadline
// and body cap.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "monitor/test_support.hpp"
#include "support/expect_error.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/local_http_server.hpp"
#include "support/wait_until.hpp"
#include "zeus/monitor/carbon.hpp"

namespace zeus::monitor {
namespace {

using zeus::testing::expect_error;

constexpr double kT0 = 1764626400.0;  // 2025-12-01T22:00:00Z

enum class Mode { kOk, kStatus500, kMalformed, kSlow, kNullHistory, kNoData };

class FakeElectricityMaps {
 public:
  FakeElectricityMaps() {
    http_.server().Get("/v3/carbon-intensity/latest",
                       [this](const httplib::Request& request, httplib::Response& response) {
                         if (!serve(request, response)) {
                           return;
                         }
                         response.set_content(R"({"zone":"DE","carbonIntensity":321,)"
                                              R"("datetime":"2025-12-01T22:00:00.000Z"})",
                                              "application/json");
                       });
    http_.server().Get("/v3/carbon-intensity/history",
                       [this](const httplib::Request& request, httplib::Response& response) {
                         if (!serve(request, response)) {
                           return;
                         }
                         if (mode_ == Mode::kNullHistory) {
                           response.set_content(R"({"zone":"DE","history":[
            {"datetime":"2025-12-01T20:00:00.000Z","carbonIntensity":null}]})",
                                                "application/json");
                           return;
                         }
                         // The last hours before kT0 (22:00), as the service answers: 20:00 and
                         // 21:00.
                         response.set_content(R"({"zone":"DE","history":[
          {"carbonIntensity":100,"datetime":"2025-12-01T20:00:00.000Z","isEstimated":false},
          {"carbonIntensity":200,"datetime":"2025-12-01T21:00:00.000Z","isEstimated":false}]})",
                                              "application/json");
                       });
    http_.start();
  }
  ~FakeElectricityMaps() { stop(); }

  void stop() { http_.stop(); }
  std::string url() const { return http_.url() + "/v3"; }
  void set_mode(Mode mode) { mode_ = mode; }
  int hits() const { return hits_; }
  std::string last_query() {
    const std::lock_guard lock(mutex_);
    return last_query_;
  }
  std::string last_token() {
    const std::lock_guard lock(mutex_);
    return last_token_;
  }

 private:
  // Records the request; answers the failure modes. False when the response is complete.
  bool serve(const httplib::Request& request, httplib::Response& response) {
    ++hits_;
    {
      const std::lock_guard lock(mutex_);
      last_query_.clear();
      for (const auto& [key, value] : request.params) {
        last_query_ += key + "=" + value + ";";
      }
      last_token_ = request.get_header_value("auth-token");
    }
    switch (mode_.load()) {
      case Mode::kStatus500:
        response.status = 500;
        response.set_content("internal error", "text/plain");
        return false;
      case Mode::kMalformed:
        response.set_content(R"({"history": [ {"carbonIntensity": 1)", "application/json");
        return false;
      case Mode::kNoData:  // what the service sends for a zone it has no recent data for
        response.set_content(R"({"error":"No recent data for zone \"US-MIDW-MISO\""})",
                             "application/json");
        return false;
      case Mode::kSlow:
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        return true;
      default:
        return true;
    }
  }

  zeus::testing::LocalHttpServer http_;
  std::atomic<Mode> mode_{Mode::kOk};
  std::atomic<int> hits_{0};
  std::mutex mutex_;
  std::string last_query_;
  std::string last_token_;
};

struct ClientRig {
  FakeElectricityMaps server;
  std::shared_ptr<ManualClock> clock =
      std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kT0 + 600));  // 22:10

  ElectricityMapsOptions options() {
    ElectricityMapsOptions options;
    options.base_url = server.url();
    options.zone = "DE";
    options.auth_token = "secret";
    // Generous: a loaded machine under ThreadSanitizer can take a second to answer. The
    // timeout tests set their own.
    options.connect_timeout_s = 5.0;
    options.read_timeout_s = 10.0;
    options.clock = clock;
    return options;
  }
};

TEST(ElectricityMapsClient, SendsTheReferenceQueryAndReadsBothEndpoints) {
  ClientRig rig;
  ElectricityMapsClient client(rig.options());
  EXPECT_EQ(client.fetch_latest(), 321.0);
  EXPECT_EQ(rig.server.last_token(), "secret");
  EXPECT_EQ(rig.server.last_query(), "disableEstimations=true;emissionFactorType=direct;zone=DE;");
  const auto history = client.fetch_history();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history.at(static_cast<std::int64_t>(kT0) - 7200), 100.0);

  ElectricityMapsOptions by_location = rig.options();
  by_location.zone.clear();
  by_location.latitude = 48.1;
  by_location.longitude = 11.5;
  by_location.estimate = true;
  by_location.emission_factor_type = "lifecycle";
  ElectricityMapsClient located(by_location);
  located.fetch_latest();
  EXPECT_EQ(rig.server.last_query(),
            "disableEstimations=false;emissionFactorType=lifecycle;lat=48.1;lon=11.5;");
  // Changing the question empties the cache and changes the query.
  EXPECT_EQ(located.intensity_at(kT0 + 60), 321.0);
  EXPECT_FALSE(located.cached().empty());
  located.set_query(false, "direct");
  EXPECT_TRUE(located.cached().empty());
  EXPECT_EQ(located.emission_factor_type(), "direct");
  located.fetch_latest();
  EXPECT_EQ(rig.server.last_query(),
            "disableEstimations=true;emissionFactorType=direct;lat=48.1;lon=11.5;");
  expect_error([&] { located.set_query(false, "both"); }, ErrorKind::kInvalidArgument, {"both"});
}

TEST(ElectricityMapsClient, SplitsByHourAndCachesEachHour) {
  ClientRig rig;
  ElectricityMapsClient client(rig.options());
  // 20:30 to 22:10: 30 min at 100, 60 min at 200, 10 min at the latest value (321).
  const auto pieces = client.intensity_over(kT0 - 5400, kT0 + 600);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].gco2eq_per_kwh, 100.0);
  EXPECT_EQ(pieces[0].end_unix_s, kT0 - 3600);
  EXPECT_EQ(pieces[1].gco2eq_per_kwh, 200.0);
  EXPECT_EQ(pieces[2].gco2eq_per_kwh, 321.0);
  EXPECT_EQ(pieces[2].end_unix_s, kT0 + 600);
  EXPECT_EQ(client.requests_sent(), 2);  // history, then latest for the current hour
  EXPECT_EQ(client.intensity_at(kT0 - 4000), 100.0);
  EXPECT_EQ(client.intensity_over(kT0 - 7200, kT0 + 600).size(), 3u);
  EXPECT_EQ(client.requests_sent(), 2);  // all cached
  EXPECT_EQ(client.last_fallback_reason(), "");
}

TEST(ElectricityMapsClient, Status500IsRetriedWithBackoffThenAClearError) {
  ClientRig rig;
  rig.server.set_mode(Mode::kStatus500);
  ElectricityMapsClient client(rig.options());
  expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable, {"HTTP 500", "latest"});
  EXPECT_EQ(rig.server.hits(), 3);
  EXPECT_THROW(client.fetch_history(), CarbonIntensityError);  // its own type, for the binding
  EXPECT_EQ(rig.server.hits(), 6);
  EXPECT_EQ(rig.clock->sleeps(), 4);
  EXPECT_EQ(rig.clock->slept_ns(), units::nanoseconds_from_seconds(3.0));  // 2 x (0.5 + 1.0)
  // Through the provider interface: nothing known and no fallback -> a clear error, quickly.
  expect_error([&] { client.intensity_over(kT0, kT0 + 60); }, ErrorKind::kUnavailable,
               {"no carbon intensity known", "fallback"});
}

TEST(ElectricityMapsClient, FallbackConstantWhenNothingIsKnown) {
  ClientRig rig;
  rig.server.set_mode(Mode::kStatus500);
  ElectricityMapsOptions options = rig.options();
  options.fallback_gco2eq_per_kwh = 450.0;
  ElectricityMapsClient client(options);
  EXPECT_EQ(client.intensity_at(kT0 + 60), 450.0);
  EXPECT_NE(client.last_fallback_reason().find("fallback constant"), std::string::npos);
  // Right after a failure, no new request is sent (retry_after_failure_s).
  const int hits = rig.server.hits();
  EXPECT_EQ(client.intensity_at(kT0 + 120), 450.0);
  EXPECT_EQ(rig.server.hits(), hits);
  // Once the service answers again and the wait is over, real values come back.
  rig.server.set_mode(Mode::kOk);
  rig.clock->advance_s(61);
  EXPECT_EQ(client.intensity_at(kT0 - 60), 200.0);
}

TEST(ElectricityMapsClient, TimeoutIsBoundedAndRetried) {
  ClientRig rig;
  rig.server.set_mode(Mode::kSlow);
  ElectricityMapsOptions options = rig.options();
  options.max_attempts = 2;
  options.read_timeout_s = 0.3;
  ElectricityMapsClient client(options);
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable, {"request failed"});
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed_s, 3.0);  // two attempts of a 0.3 s read timeout, not the 0.7 s answer each
  EXPECT_EQ(client.requests_sent(), 2);
  // The server may read the second request only after the client gave up on it (a loaded
  // machine, ThreadSanitizer): its count catches up, and no third request ever comes.
  zeus::testing::wait_until([&] { return rig.server.hits() >= 2; });
  EXPECT_EQ(rig.server.hits(), 2);
}

TEST(ElectricityMapsClient, MalformedJsonAndMissingValues) {
  ClientRig rig;
  rig.server.set_mode(Mode::kMalformed);
  ElectricityMapsClient client(rig.options());
  expect_error([&] { client.fetch_history(); }, ErrorKind::kUnavailable, {"not valid JSON"});
  rig.server.set_mode(Mode::kNullHistory);
  EXPECT_TRUE(client.fetch_history().empty());  // null hours are skipped
}

TEST(ElectricityMapsClient, AnswerWithoutTheValueIsNotFound) {
  ClientRig rig;
  rig.server.set_mode(Mode::kNoData);
  ElectricityMapsClient client(rig.options());
  try {
    client.intensity_at(kT0 + 60);
    ADD_FAILURE() << "no error";
  } catch (const CarbonIntensityError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotFound) << error.what();
    EXPECT_NE(std::string(error.what()).find("no 'history' array"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(rig.server.hits(), 1);  // an answer, not a failure: not retried
}

TEST(ElectricityMapsClient, ServerGoneMidRunFallsBackToTheLastKnownValue) {
  ClientRig rig;
  ElectricityMapsClient client(rig.options());
  EXPECT_EQ(client.intensity_at(kT0 + 60), 321.0);
  rig.server.stop();
  // Two hours later, the service is gone: the last known value stands in.
  rig.clock->advance_s(7200);
  const auto pieces = client.intensity_over(kT0 + 7200, kT0 + 7800);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].gco2eq_per_kwh, 321.0);
  EXPECT_NE(client.last_fallback_reason().find("last known"), std::string::npos);
}

TEST(ElectricityMapsClient, ConcurrentCallersShareOneCache) {
  ClientRig rig;
  ElectricityMapsClient client(rig.options());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        const auto pieces = client.intensity_over(kT0 - 5400, kT0 + 600);
        if (pieces.size() != 3 || pieces[2].gco2eq_per_kwh != 321.0) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(client.requests_sent(), 8);  // at most one history and one latest per thread
}

TEST(ElectricityMapsClient, RejectsBadOptions) {
  ElectricityMapsOptions options;
  expect_error([&] { ElectricityMapsClient client(options); }, ErrorKind::kInvalidArgument,
               {"zone"});
  options.zone = "DE";
  options.base_url = "ftp://x";
  expect_error([&] { ElectricityMapsClient client(options); }, ErrorKind::kInvalidArgument,
               {"http://"});
  options.base_url = "http://127.0.0.1:1";
  options.emission_factor_type = "indirect";
  expect_error([&] { ElectricityMapsClient client(options); }, ErrorKind::kInvalidArgument,
               {"indirect"});
}

TEST(ElectricityMapsClient, FeedsTheCarbonMonitor) {
  ClientRig rig;

  // The window's wall clock and the client's clock are the same manual clock.
  auto client = std::make_shared<ElectricityMapsClient>(rig.options());
  CarbonEmissionMonitor monitor(std::make_shared<zeus::testing::FixedEnergyMonitor>(
                                    zeus::testing::energies(1.0, {{0, 3.6e6}})),
                                client, rig.clock);
  monitor.begin_window("w");
  rig.clock->advance_s(600);  // 22:10 -> 22:20, all in the current hour (latest: 321)
  EXPECT_DOUBLE_EQ(monitor.end_window("w").gpu_carbon_emission_g.at(0), 321.0);
}

using zeus::testing::HostileHttpPeer;
using zeus::testing::Hostility;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Options for a hostile peer, on the real clock (the deadline is wall time).
ElectricityMapsOptions hostile_options(const HostileHttpPeer& peer) {
  ElectricityMapsOptions options;
  options.base_url = peer.url() + "/v3";
  options.zone = "DE";
  options.read_timeout_s = 5.0;
  options.max_attempts = 3;
  options.backoff_initial_s = 0.1;
  options.total_timeout_s = 1.5;
  return options;
}

TEST(ElectricityMapsClient, ATricklingServiceCostsTheFetchDeadlineNotForever) {
  for (const Hostility hostility : {Hostility::kTrickleHead, Hostility::kTrickleBody}) {
    HostileHttpPeer peer(hostility, std::chrono::milliseconds(100));
    ElectricityMapsClient client(hostile_options(peer));
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable,
                 {"no complete answer within the 1.5 s deadline"});
    EXPECT_LT(seconds_since(start), 5.0);  // 1.5 s, with room for a loaded machine
    EXPECT_EQ(client.requests_sent(), 1);  // not retried: another try would trickle the same
  }
}

// Each attempt ends at its 0.3 s read timeout and is retried; the deadline ends the loop.
TEST(ElectricityMapsClient, RetriesStopAtTheFetchDeadline) {
  HostileHttpPeer peer(Hostility::kHangAfterHead);
  ElectricityMapsOptions options = hostile_options(peer);
  options.read_timeout_s = 0.3;
  options.max_attempts = 50;
  const auto start = std::chrono::steady_clock::now();
  ElectricityMapsClient client(options);
  expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable,
               {"within the 1.5 s deadline"});
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_GE(client.requests_sent(), 2);
  EXPECT_LT(client.requests_sent(), 50);
}

TEST(ElectricityMapsClient, AFloodIsCutAtTheBodyCap) {
  EXPECT_EQ(ElectricityMapsOptions{}.max_body_bytes, std::size_t{16} << 20);
  for (const Hostility hostility :
       {Hostility::kEndlessChunked, Hostility::kHugeLength, Hostility::kEndlessUnannounced}) {
    HostileHttpPeer peer(hostility);
    ElectricityMapsOptions options = hostile_options(peer);
    options.max_body_bytes = 1 << 20;
    options.total_timeout_s = 30.0;
    ElectricityMapsClient client(options);
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable, {"over 1048576 bytes"});
    EXPECT_LT(seconds_since(start), 10.0);
    EXPECT_EQ(client.requests_sent(), 1);
  }
}

TEST(ElectricityMapsClient, CancelEndsAFetchInFlightAndTheLaterOnes) {
  HostileHttpPeer peer(Hostility::kTrickleBody, std::chrono::milliseconds(100));
  ElectricityMapsOptions options = hostile_options(peer);
  options.total_timeout_s = 60.0;
  options.fallback_gco2eq_per_kwh = 123.0;
  ElectricityMapsClient client(options);
  const auto start = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    client.cancel();
  });
  // The fallback answers once the fetch is cancelled.
  EXPECT_EQ(client.intensity_at(kT0), 123.0);
  canceller.join();
  EXPECT_LT(seconds_since(start), 10.0);
  expect_error([&] { client.fetch_latest(); }, ErrorKind::kUnavailable, {"cancelled"});
}

}  // namespace
}  // namespace zeus::monitor
