// The OpenEI utility-rates client against a real HTTP server on loopback, started by the test:
// a realistic time-of-use rate (summer and winter months, weekday and weekend schedules, an
// "adj"), converted to prices at chosen instants and to the cost of a window; then the failures
// (label not found, a missing schedule, a timeout, 500 then success, malformed JSON, the server
// gone, a huge body). The API key must never appear in a message.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "monitor/test_support.hpp"
#include "support/expect_error.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/local_http_server.hpp"
#include "zeus/common/units.hpp"
#include "zeus/monitor/openei.hpp"

namespace zeus::monitor {
namespace {

using zeus::testing::error_of;
using zeus::testing::expect_error;

constexpr double kHour = 3600.0;
constexpr double kDay = 24 * kHour;
constexpr const char* kKey = "k3y-s3cr3t";
constexpr const char* kLabel = "5cd33f0a5457a3b8d2d0c6f5";

// A weekday row: period `peak` in [from, to) hours, period 0 otherwise.
std::string weekday_row(int peak, int from, int to) {
  std::string row = "[";
  for (int hour = 0; hour < 24; ++hour) {
    row += hour > 0 ? "," : "";
    row += std::to_string(hour >= from && hour < to ? peak : 0);
  }
  return row + "]";
}

// Summer (Jun-Sep) weekday peak 16:00-21:00 at period 1 (0.30 + 0.02 adj, tiered), winter
// (Nov-Mar) weekday evening 17:00-20:00 at period 2 (0.15, no adj), otherwise period 0
// (0.10 + 0.02); weekends period 0 all day. In the utility's local time (UTC-7 in the tests).
std::string rate_item(const std::string& label, bool with_weekend = true) {
  std::string weekday = "[";
  std::string weekend = "[";
  for (int month = 0; month < 12; ++month) {
    const bool summer = month >= 5 && month <= 8;
    const bool winter = month <= 2 || month >= 10;
    weekday += month > 0 ? "," : "";
    weekday += summer   ? weekday_row(1, 16, 21)
               : winter ? weekday_row(2, 17, 20)
                        : weekday_row(0, 0, 0);
    weekend += month > 0 ? "," : "";
    weekend += weekday_row(0, 0, 0);
  }
  weekday += "]";
  weekend += "]";
  std::string item = R"({"label": ")" + label + R"(", "name": "E-TOU-C Residential",
    "utility": "Example Gas & Electric Co", "sector": "Residential", "uri": "https://apps.openei.org/USURDB/rate/view/)" +
                     label + R"(",
    "energyratestructure": [
      [{"rate": 0.10, "adj": 0.02, "unit": "kWh"}],
      [{"rate": 0.30, "adj": 0.02, "max": 500, "unit": "kWh"}, {"rate": 0.35, "adj": 0.02, "unit": "kWh"}],
      [{"rate": 0.15, "unit": "kWh"}]
    ],
    "energyweekdayschedule": )" +
                     weekday;
  if (with_weekend) {
    item += R"(, "energyweekendschedule": )" + weekend;
  }
  return item + "}";
}

enum class Mode { kOk, kFail500Once, kStatus500, kMalformed, kSlow, kHuge, kNoWeekend, kForbidden };

class FakeOpenEI {
 public:
  FakeOpenEI() {
    http_.server().Get("/utility_rates", [this](const httplib::Request& request,
                                                httplib::Response& response) {
      const int hit = ++hits_;
      {
        const std::lock_guard lock(mutex_);
        params_.clear();
        for (const auto& [key, value] : request.params) {
          params_[key] = value;
        }
      }
      switch (mode_.load()) {
        case Mode::kFail500Once:
          if (hit == 1) {
            response.status = 500;
            response.set_content("upstream error", "text/plain");
            return;
          }
          break;
        case Mode::kStatus500:
          response.status = 500;
          return;
        case Mode::kMalformed:
          response.set_content(R"({"items": [{"label": ")", "application/json");
          return;
        case Mode::kSlow:
          std::this_thread::sleep_for(std::chrono::milliseconds(600));
          break;
        case Mode::kHuge:
          response.set_content(std::string((std::size_t{16} << 20) + 1, ' '), "application/json");
          return;
        case Mode::kForbidden:
          // What api.data.gov answers for a bad key; it may echo the request.
          response.status = 403;
          response.set_content(R"({"error": {"code": "API_KEY_INVALID", "message": "bad key"}})",
                               "application/json");
          return;
        default:
          break;
      }
      // Another utility's rate first: the client must pick the item by its label.
      std::string body = R"({"items": [)";
      body += rate_item("0000other");
      body += ",";
      body += rate_item(kLabel, mode_ != Mode::kNoWeekend);
      body += "]}";
      response.set_content(body, "application/json");
    });
    http_.start();
  }
  ~FakeOpenEI() { stop(); }

  void stop() { http_.stop(); }
  std::string url() const { return http_.url(); }
  void set_mode(Mode mode) { mode_ = mode; }
  int hits() const { return hits_; }
  std::map<std::string, std::string> params() {
    const std::lock_guard lock(mutex_);
    return params_;
  }

 private:
  zeus::testing::LocalHttpServer http_;
  std::atomic<Mode> mode_{Mode::kOk};
  std::atomic<int> hits_{0};
  std::mutex mutex_;
  std::map<std::string, std::string> params_;
};

// 2025-06-30T00:00:00Z, a Monday; at UTC-7 local 17:00 on June 30 is July 1 00:00 UTC.
constexpr double kJune30 = 1751241600.0;
// 2025-12-01T00:00:00Z, a Monday.
constexpr double kDecember1 = 1764547200.0;
// 2025-10-01T00:00:00Z, a Wednesday.
constexpr double kOctober1 = 1759276800.0;
constexpr double kOffsetS = -7 * kHour;

// Unix time of local (UTC-7) hour `hour` on the UTC day that starts at `day_unix_s`.
double local(double day_unix_s, double hour) {
  return day_unix_s + hour * kHour - kOffsetS;
}

struct Rig {
  FakeOpenEI server;
  std::shared_ptr<ManualClock> clock =
      std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kJune30));

  OpenEIOptions options() {
    OpenEIOptions options;
    options.base_url = server.url();
    options.latitude = 37.77;
    options.longitude = -122.42;
    options.label = kLabel;
    options.api_key = kKey;
    options.timezone_offset_hours = -7;
    // Generous: a loaded machine under ThreadSanitizer can take a second to answer. The
    // timeout tests set their own.
    options.connect_timeout_s = 5.0;
    options.read_timeout_s = 10.0;
    options.clock = clock;
    return options;
  }
};

void expect_no_key(const Error& error) {
  EXPECT_EQ(std::string(error.what()).find(kKey), std::string::npos) << error.what();
}

TEST(OpenEIClient, SendsTheReferenceQueryAndConvertsTheSchedule) {
  Rig rig;
  OpenEIClient client(rig.options());
  EXPECT_EQ(client.currency(), "USD");
  TariffElectricityPrice tariff = client.fetch_tariff();
  EXPECT_EQ(client.requests_sent(), 1);
  const auto params = rig.server.params();
  EXPECT_EQ(params.at("version"), "latest");
  EXPECT_EQ(params.at("format"), "json");
  EXPECT_EQ(params.at("detail"), "full");
  EXPECT_EQ(params.at("api_key"), kKey);
  EXPECT_EQ(params.at("lat"), "37.77");
  EXPECT_EQ(params.at("lon"), "-122.42");
  EXPECT_EQ(params.at("radius"), "0");
  EXPECT_EQ(params.at("sector"), "Residential");
  EXPECT_EQ(tariff.currency(), "USD");
  EXPECT_DOUBLE_EQ(tariff.timezone_offset_hours(), -7.0);
  // Off-peak (0.10 + 0.02 adj) holds most hours: it is the default; the rest are periods.
  EXPECT_DOUBLE_EQ(tariff.default_price_per_kwh(), 0.12);
  EXPECT_EQ(tariff.periods().size(), 2u);

  // Summer weekday peak, Monday June 30 at 17:00 local: the first tier, with its adj.
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kJune30, 17)), 0.32);
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kJune30, 15.99)), 0.12);
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kJune30, 21)), 0.12);
  // Saturday June 28 at 17:00 local: the weekend schedule.
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kJune30 - 2 * kDay, 17)), 0.12);
  // Winter weekday (Monday December 1): the evening rate without adj, not the summer peak.
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kDecember1, 18)), 0.15);
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kDecember1, 16.5)), 0.12);
  // October (neither season): off-peak all day.
  EXPECT_DOUBLE_EQ(tariff.price_at(local(kOctober1, 17)), 0.12);

  // price_over uses the cached tariff: no second request.
  const auto pieces = client.price_over(local(kJune30, 15), local(kJune30, 22));
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_DOUBLE_EQ(pieces[1].start_unix_s, local(kJune30, 16));
  EXPECT_DOUBLE_EQ(pieces[1].price_per_kwh, 0.32);
  EXPECT_DOUBLE_EQ(pieces[2].start_unix_s, local(kJune30, 21));
  EXPECT_EQ(client.requests_sent(), 1);
  EXPECT_EQ(client.last_fallback_reason(), "");
}

TEST(OpenEIClient, CostOfAWindowThroughTheCostMonitor) {
  Rig rig;
  auto client = std::make_shared<OpenEIClient>(rig.options());
  // Monday June 30, 15:30 to 16:30 local: half off-peak (0.12), half summer peak (0.32).
  auto wall = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(local(kJune30, 15.5)));
  EnergyCostMonitor monitor(std::make_shared<zeus::testing::FixedEnergyMonitor>(
                                zeus::testing::energies(1.0, {{0, 7.2e6}})),
                            client, wall);
  monitor.begin_window("w");
  wall->advance_s(kHour);
  const EnergyCostMeasurement cost = monitor.end_window("w");
  EXPECT_EQ(cost.currency, "USD");
  EXPECT_DOUBLE_EQ(cost.mean_price_per_kwh, 0.22);
  EXPECT_DOUBLE_EQ(cost.gpu_energy_cost.at(0), 0.44);
}

TEST(OpenEIClient, LabelNotFoundAndMissingScheduleAreNotFound) {
  Rig rig;
  OpenEIOptions options = rig.options();
  options.label = "nosuchlabel";
  OpenEIClient missing(options);
  const Error not_found = error_of([&] { missing.fetch_tariff(); });
  EXPECT_EQ(not_found.kind(), ErrorKind::kNotFound) << not_found.what();
  EXPECT_NE(std::string(not_found.what()).find("nosuchlabel"), std::string::npos);
  EXPECT_NE(std::string(not_found.what()).find("2 rates found"), std::string::npos);
  expect_no_key(not_found);

  rig.server.set_mode(Mode::kNoWeekend);
  OpenEIClient client(rig.options());
  const Error no_schedule = error_of([&] { client.fetch_tariff(); });
  EXPECT_EQ(no_schedule.kind(), ErrorKind::kNotFound) << no_schedule.what();
  EXPECT_NE(std::string(no_schedule.what()).find("energyweekendschedule"), std::string::npos);
  EXPECT_NE(std::string(no_schedule.what()).find("E-TOU-C"), std::string::npos);
  // Without a fallback, price_over says so too; with one, it prices at the fallback.
  expect_error([&] { client.price_over(kJune30, kJune30 + kHour); }, ErrorKind::kNotFound,
               {"energyweekendschedule", "fallback"});
}

TEST(OpenEIClient, MalformedRatesAreNamed) {
  const auto check = [](const std::string& item, ErrorKind kind,
                        const std::vector<std::string>& parts) {
    expect_error([&] { tariff_from_openei_item(item, 0.0, "rate X"); }, kind, parts);
  };
  const std::string hours24 = weekday_row(0, 0, 0);
  std::string year;
  for (int month = 0; month < 12; ++month) {
    year += month > 0 ? "," : "";
    year += hours24;
  }
  const std::string schedules =
      R"("energyweekdayschedule": [)" + year + R"(], "energyweekendschedule": [)" + year + "]";
  check("{" + schedules + "}", ErrorKind::kNotFound, {"rate X", "energyratestructure"});
  check(R"({"energyratestructure": [[{"rate": 0.1}]]})", ErrorKind::kNotFound,
        {"energyweekdayschedule"});
  check(R"({"energyratestructure": [], )" + schedules + "}", ErrorKind::kUnavailable,
        {"energyratestructure", "non-empty"});
  check(R"({"energyratestructure": [[{"adj": 0.1}]], )" + schedules + "}", ErrorKind::kUnavailable,
        {"period 0 tier 0", "\"rate\""});
  check(R"({"energyratestructure": [[{"rate": 0.1, "adj": "x"}]], )" + schedules + "}",
        ErrorKind::kUnavailable, {"\"adj\""});
  check(R"({"energyratestructure": [[{"rate": 0.1, "adj": -0.5}]], )" + schedules + "}",
        ErrorKind::kUnavailable, {"finite price >= 0"});
  check(R"({"energyratestructure": [[{"rate": 0.1}]], "energyweekdayschedule": [)" + hours24 +
            R"(], "energyweekendschedule": [)" + year + "]}",
        ErrorKind::kUnavailable, {"energyweekdayschedule", "12 months"});
  std::string bad_year;
  for (int month = 0; month < 12; ++month) {
    bad_year += month > 0 ? "," : "";
    bad_year += month == 3 ? std::string("[0,0]") : hours24;
  }
  check(R"({"energyratestructure": [[{"rate": 0.1}]], "energyweekdayschedule": [)" + bad_year +
            R"(], "energyweekendschedule": [)" + year + "]}",
        ErrorKind::kUnavailable, {"energyweekdayschedule", "3 (Apr)", "24 hours"});
  std::string bad_index;
  for (int month = 0; month < 12; ++month) {
    bad_index += month > 0 ? "," : "";
    bad_index += month == 6 ? weekday_row(3, 5, 6) : hours24;
  }
  check(R"({"energyratestructure": [[{"rate": 0.1}]], "energyweekdayschedule": [)" + year +
            R"(], "energyweekendschedule": [)" + bad_index + "]}",
        ErrorKind::kUnavailable, {"energyweekendschedule", "6 (Jul) hour 5", "from 0 to 0"});
  check("[", ErrorKind::kUnavailable, {"not valid JSON"});
}

TEST(OpenEIClient, ATimeoutIsUnavailableAfterTheAttempts) {
  Rig rig;
  rig.server.set_mode(Mode::kSlow);
  OpenEIOptions options = rig.options();
  options.max_attempts = 2;
  options.read_timeout_s = 0.3;
  OpenEIClient client(options);
  const auto started = std::chrono::steady_clock::now();
  const Error error = error_of([&] { client.fetch_tariff(); });
  EXPECT_EQ(error.kind(), ErrorKind::kUnavailable) << error.what();
  EXPECT_NE(std::string(error.what()).find("request failed"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("/utility_rates"), std::string::npos);
  expect_no_key(error);
  EXPECT_EQ(client.requests_sent(), 2);
  // Two read timeouts of 0.3 s; the backoff sleeps on the manual clock.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(rig.clock->slept_ns(), units::nanoseconds_from_seconds(0.5));
}

TEST(OpenEIClient, A500IsRetriedThenTheRateIsRead) {
  Rig rig;
  rig.server.set_mode(Mode::kFail500Once);
  OpenEIClient client(rig.options());
  EXPECT_DOUBLE_EQ(client.price_at(local(kJune30, 17)), 0.32);
  EXPECT_EQ(client.requests_sent(), 2);
  EXPECT_EQ(rig.server.hits(), 2);

  rig.server.set_mode(Mode::kStatus500);
  OpenEIClient failing(rig.options());
  expect_error([&] { failing.fetch_tariff(); }, ErrorKind::kUnavailable, {"HTTP 500"});
  EXPECT_EQ(failing.requests_sent(), 3);
}

TEST(OpenEIClient, MalformedJsonAndARefusedKey) {
  Rig rig;
  rig.server.set_mode(Mode::kMalformed);
  OpenEIClient client(rig.options());
  const Error malformed = error_of([&] { client.fetch_tariff(); });
  EXPECT_EQ(malformed.kind(), ErrorKind::kUnavailable);
  EXPECT_NE(std::string(malformed.what()).find("not valid JSON"), std::string::npos);
  expect_no_key(malformed);

  rig.server.set_mode(Mode::kForbidden);
  OpenEIClient refused(rig.options());
  const Error forbidden = error_of([&] { refused.fetch_tariff(); });
  EXPECT_EQ(forbidden.kind(), ErrorKind::kUnavailable);
  EXPECT_NE(std::string(forbidden.what()).find("HTTP 403"), std::string::npos);
  EXPECT_NE(std::string(forbidden.what()).find("API key"), std::string::npos);
  EXPECT_EQ(refused.requests_sent(), 1);  // a 4xx is not retried
  expect_no_key(forbidden);
}

TEST(OpenEIClient, AServerGoneMidRunKeepsTheCachedTariff) {
  Rig rig;
  OpenEIClient client(rig.options());
  EXPECT_DOUBLE_EQ(client.price_at(local(kJune30, 17)), 0.32);
  rig.server.stop();
  EXPECT_DOUBLE_EQ(client.price_at(local(kDecember1, 18)), 0.15);
  EXPECT_EQ(client.requests_sent(), 1);
  EXPECT_EQ(client.last_fallback_reason(), "");
}

TEST(OpenEIClient, NothingCachedFallsBackOrIsUnavailable) {
  Rig rig;
  const std::string url = rig.server.url();
  rig.server.stop();
  OpenEIOptions options = rig.options();
  options.base_url = url;
  {
    OpenEIClient client(options);
    const Error error = error_of([&] { client.price_over(kJune30, kJune30 + kHour); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable) << error.what();
    EXPECT_NE(std::string(error.what()).find("fallback"), std::string::npos);
    expect_no_key(error);
    EXPECT_EQ(client.requests_sent(), 3);
    // No new fetch within retry_after_failure_s; one after it.
    EXPECT_THROW(client.price_over(kJune30, kJune30 + kHour), ElectricityPriceError);
    EXPECT_EQ(client.requests_sent(), 3);
    rig.clock->advance_s(61);
    EXPECT_THROW(client.price_over(kJune30, kJune30 + kHour), ElectricityPriceError);
    EXPECT_EQ(client.requests_sent(), 6);
  }
  options.fallback_price_per_kwh = 0.2;
  OpenEIClient client(options);
  const auto pieces = client.price_over(kJune30, kJune30 + kHour);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_DOUBLE_EQ(pieces[0].price_per_kwh, 0.2);
  EXPECT_NE(client.last_fallback_reason().find("fallback price"), std::string::npos);
  EXPECT_NE(client.last_fallback_reason().find("request failed"), std::string::npos);
  EXPECT_EQ(client.last_fallback_reason().find(kKey), std::string::npos);
  // fetch_tariff itself never falls back.
  EXPECT_THROW(client.fetch_tariff(), ElectricityPriceError);
}

TEST(OpenEIClient, ConcurrentCallersShareOneFetch) {
  Rig rig;
  rig.server.set_mode(Mode::kSlow);  // 0.6 s: the callers overlap
  OpenEIClient client(rig.options());
  std::vector<std::thread> callers;
  std::atomic<int> peak_prices{0};
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      if (client.price_at(local(kJune30, 17)) == 0.32) {
        ++peak_prices;
      }
    });
  }
  for (std::thread& caller : callers) {
    caller.join();
  }
  EXPECT_EQ(peak_prices, 4);
  EXPECT_EQ(client.requests_sent(), 1);
}

TEST(OpenEIClient, AHugeBodyIsCutShort) {
  Rig rig;
  rig.server.set_mode(Mode::kHuge);
  OpenEIClient client(rig.options());
  expect_error([&] { client.fetch_tariff(); }, ErrorKind::kUnavailable, {"over 16777216 bytes"});
  EXPECT_EQ(client.requests_sent(), 1);  // not retried
}

TEST(OpenEIClient, BadOptionsAreNamed) {
  Rig rig;
  const auto check = [&](auto&& change, const std::string& part) {
    OpenEIOptions options = rig.options();
    change(options);
    const Error error = error_of([&] { OpenEIClient client(options); });
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument) << error.what();
    EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();
    expect_no_key(error);
  };
  check([](OpenEIOptions& o) { o.label.clear(); }, "label");
  check([](OpenEIOptions& o) { o.api_key.clear(); }, "API key");
  check([](OpenEIOptions& o) { o.latitude = 91; }, "latitude");
  check([](OpenEIOptions& o) { o.radius_miles = 201; }, "radius");
  check([](OpenEIOptions& o) { o.sector = "Farm"; }, "sector 'Farm'");
  check([](OpenEIOptions& o) { o.timezone_offset_hours = 15; }, "timezone offset");
  check([](OpenEIOptions& o) { o.fallback_price_per_kwh = -1; }, "fallback");
  check([](OpenEIOptions& o) { o.max_attempts = 0; }, "max_attempts");
  check([](OpenEIOptions& o) { o.base_url = "ftp://x"; }, "http://");
  // The sector is matched case-insensitively and sent as the service spells it.
  OpenEIOptions options = rig.options();
  options.sector = "commercial";
  EXPECT_EQ(OpenEIClient(options).options().sector, "Commercial");
  // Without an offset, the machine's current one is used: some finite value.
  options.timezone_offset_hours.reset();
  OpenEIClient local_time(options);
  EXPECT_FALSE(local_time.options().timezone_offset_hours.has_value());
}

// A byte every 100 ms never trips a read timeout: the fetch's deadline ends it, once. An endless
// chunked answer stops at the default 16 MiB cap.
TEST(OpenEIClient, AHostileServiceCostsTheDeadlineOrTheCapNotForever) {
  Rig rig;
  const auto seconds_since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  {
    zeus::testing::HostileHttpPeer peer(zeus::testing::Hostility::kTrickleBody,
                                        std::chrono::milliseconds(100));
    OpenEIOptions options = rig.options();
    options.base_url = peer.url();
    options.total_timeout_s = 1.5;
    OpenEIClient client(options);
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.fetch_tariff(); }, ErrorKind::kUnavailable,
                 {"within the 1.5 s deadline"});
    EXPECT_LT(seconds_since(start), 5.0);
    EXPECT_EQ(client.requests_sent(), 1);
  }
  {
    zeus::testing::HostileHttpPeer peer(zeus::testing::Hostility::kEndlessChunked);
    OpenEIOptions options = rig.options();
    options.base_url = peer.url();
    OpenEIClient client(options);
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.fetch_tariff(); }, ErrorKind::kUnavailable, {"over 16777216 bytes"});
    EXPECT_LT(seconds_since(start), 15.0);
  }
  {
    zeus::testing::HostileHttpPeer peer(zeus::testing::Hostility::kTrickleHead,
                                        std::chrono::milliseconds(100));
    OpenEIOptions options = rig.options();
    options.base_url = peer.url();
    OpenEIClient client(options);
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      client.cancel();
    });
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.fetch_tariff(); }, ErrorKind::kUnavailable, {"cancelled"});
    canceller.join();
    EXPECT_LT(seconds_since(start), 10.0);
  }
}

}  // namespace
}  // namespace zeus::monitor
