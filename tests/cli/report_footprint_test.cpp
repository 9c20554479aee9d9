// `zeus report --carbon-intensity SPEC --price SPEC`: the integration of a timeline's power with
// a rate (report_footprint.cpp, tested directly), then the command as a user runs it: totals on
// timelines whose numbers are worked out here by hand, the charts present only with the flags,
// bad specs and flags without a timeline (exit 2, no page), and ElectricityMaps served by a real
// HTTP server on loopback.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/report/report_footprint.hpp"
#include "report_page_check.hpp"
#include "run_command.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/local_http_server.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using zeus::cli::report::cumulative_joule_rate;
using zeus::cli::report::RatePiece;
using Samples = std::vector<std::pair<double, double>>;

// ---- The integration ----

TEST(CumulativeJouleRate, ConstantPowerAndRate) {
  // 100 W for 10 s at rate 2: 1000 J x 2.
  const std::vector<double> at = {0.0, 5.0, 10.0};
  EXPECT_EQ(cumulative_joule_rate({{0.0, 100.0}, {10.0, 100.0}}, {{0.0, 10.0, 2.0}}, at),
            (std::vector<double>{0.0, 1000.0, 2000.0}));
}

TEST(CumulativeJouleRate, APieceBoundaryInsideASampleIntervalIsExact) {
  // Power ramps 100 -> 300 W over [10, 20]; the rate is 1 before 15 and 5 after. At 15 the power
  // is 200 W: (100 + 200) / 2 x 5 s = 750 J at 1, (200 + 300) / 2 x 5 s = 1250 J at 5.
  const Samples samples = {{0.0, 100.0}, {10.0, 100.0}, {20.0, 300.0}};
  const std::vector<RatePiece> pieces = {{0.0, 15.0, 1.0}, {15.0, 20.0, 5.0}};
  const std::vector<double> got = cumulative_joule_rate(samples, pieces, {10.0, 15.0, 20.0});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_DOUBLE_EQ(got[0], 1000.0);
  EXPECT_DOUBLE_EQ(got[1], 1750.0);
  EXPECT_DOUBLE_EQ(got[2], 1750.0 + 1250.0 * 5.0);
}

TEST(CumulativeJouleRate, NothingOutsideTheSamplesAndTheEdgePiecesExtend) {
  // Times before the first sample have nothing yet, times after the last have everything; a
  // rate outside the pieces is the nearest piece's.
  const Samples samples = {{10.0, 50.0}, {12.0, 50.0}};
  const std::vector<RatePiece> pieces = {{11.0, 11.5, 3.0}};
  const std::vector<double> got = cumulative_joule_rate(samples, pieces, {0.0, 11.0, 100.0});
  EXPECT_EQ(got, (std::vector<double>{0.0, 150.0, 300.0}));
}

TEST(CumulativeJouleRate, DuplicateTimesOneSampleOrNoPieces) {
  EXPECT_EQ(
      cumulative_joule_rate({{1.0, 10.0}, {1.0, 90.0}, {2.0, 90.0}}, {{1.0, 2.0, 1.0}}, {2.0}),
      (std::vector<double>{90.0}));
  EXPECT_EQ(cumulative_joule_rate({{1.0, 10.0}}, {{1.0, 1.0, 1.0}}, {1.0}),
            (std::vector<double>{0.0}));
  EXPECT_EQ(cumulative_joule_rate({{0.0, 10.0}, {1.0, 10.0}}, {}, {1.0}),
            (std::vector<double>{0.0}));
}

TEST(DevicePowerSeries, InstantThenAverageNeverMemoryWhenTheDeviceHasMore) {
  zeus::cli::report::Timeline timeline;
  for (const auto& [device, domain] :
       std::vector<std::pair<std::string, std::string>>{{"gpu0", "memory_average"},
                                                        {"gpu0", "device_average"},
                                                        {"gpu1", "memory_average"},
                                                        {"gpu0", "device_instant"},
                                                        {"gpu2", "device_average"}}) {
    timeline.series.push_back({device, domain, {}, 0, {}});
  }
  const auto chosen = zeus::cli::report::device_power_series(timeline);
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_EQ(chosen[0]->device + "/" + chosen[0]->domain, "gpu0/device_instant");
  EXPECT_EQ(chosen[1]->device + "/" + chosen[1]->domain, "gpu1/memory_average");
  EXPECT_EQ(chosen[2]->device + "/" + chosen[2]->domain, "gpu2/device_average");
}

// ---- The command ----

using Result = zeus::testing::SplitOutput;
using zeus::testing::read_file;

using zeus::testing::contains;
using zeus::testing::page_data;
using zeus::testing::write_file;

std::vector<json> charts_of_kind(const json& data, const std::string& kind) {
  std::vector<json> found;
  for (const auto& [id, spec] : data["charts"].items()) {
    if (spec["kind"] == kind) {
      found.push_back(spec);
    }
  }
  return found;
}

// Two GPUs over [T, T + 20 s]: gpu0 100 W for 10 s, then a ramp to 300 W (1000 + 2000 J);
// gpu1 200 W throughout (4000 J); gpu0's memory_average is part of its power and is not added.
constexpr double kT = 1700000000.0;  // 2023-11-14T22:13:20Z, a Tuesday
const char* const kTimeline =
    "timestamp,device,domain,watts,celsius\n"
    "1700000000.0,gpu0,device_instant,100.000,\n1700000000.0,gpu1,device_instant,200.000,\n"
    "1700000000.0,gpu0,memory_average,10.000,\n1700000000.0,gpu0,temperature,,40\n"
    "1700000010.0,gpu0,device_instant,100.000,\n1700000010.0,gpu1,device_instant,200.000,\n"
    "1700000010.0,gpu0,memory_average,10.000,\n"
    "1700000020.0,gpu0,device_instant,300.000,\n1700000020.0,gpu1,device_instant,200.000,\n"
    "1700000020.0,gpu0,memory_average,10.000,\n";

constexpr double kJoulesPerKwh = 3.6e6;

class ReportFootprint : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = zeus::testing::fresh_test_dir("zeus_report_footprint_");
    write_file(dir_ / "t.csv", kTimeline);
  }
  void TearDown() override {
    if (!HasFailure()) {
      fs::remove_all(dir_);
    }
  }

  Result zeus(const std::string& arguments, const std::string& env = "") {
    return zeus::testing::run_zeus_in(dir_, arguments, env);
  }

  // The page's footprint charts after `zeus report ARGUMENTS -o r.html`, which must succeed.
  std::vector<json> footprints(const std::string& arguments, const std::string& env = "") {
    const Result result = zeus(arguments + " -o r.html", env);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    html_ = read_file(dir_ / "r.html");
    return charts_of_kind(page_data(html_), "footprint");
  }

  fs::path dir_;
  std::string html_;
};

TEST_F(ReportFootprint, ConstantIntensityTotalsPerDeviceAndInAll) {
  const std::vector<json> charts = footprints("report t.csv --carbon-intensity 400");
  ASSERT_EQ(charts.size(), 1u);
  const json& carbon = charts[0];
  EXPECT_EQ(carbon["unit"], "gCO2eq");
  EXPECT_NEAR(carbon["energy_j"]["gpu0"].get<double>(), 3000.0, 1e-9);
  EXPECT_NEAR(carbon["energy_j"]["gpu1"].get<double>(), 4000.0, 1e-9);
  EXPECT_NEAR(carbon["totals"]["gpu0"].get<double>(), 3000.0 / kJoulesPerKwh * 400.0, 1e-12);
  EXPECT_NEAR(carbon["totals"]["gpu1"].get<double>(), 4000.0 / kJoulesPerKwh * 400.0, 1e-12);
  EXPECT_NEAR(carbon["totals"]["total"].get<double>(), 7000.0 / kJoulesPerKwh * 400.0, 1e-12);
  EXPECT_DOUBLE_EQ(carbon["mean_rate"].get<double>(), 400.0);
  // Per device and in all, each ending at its total; the intensity, held over the timeline.
  ASSERT_EQ(carbon["series"].size(), 3u);
  EXPECT_EQ(carbon["series"][2]["label"], "total");
  EXPECT_NEAR(carbon["series"][2]["points"].back()[1].get<double>(), 7000.0 / 3.6e6 * 400.0, 1e-6);
  EXPECT_EQ(carbon["series"][0]["points"].front(), json::parse("[0.0, 0.0]"));
  EXPECT_EQ(carbon["rate"], json::parse("[[0.0, 400.0], [20.0, 400.0]]"));
  EXPECT_TRUE(contains(carbon["rate_title"], "gCO2eq/kWh"));
  // The totals table beside the charts.
  EXPECT_TRUE(contains(html_, "<th>Carbon emissions (gCO2eq)</th>")) << html_;
  EXPECT_TRUE(contains(html_, "<td class=\"num\">0.777778</td>"));
  EXPECT_FALSE(contains(html_, "<th>Electricity cost"));
}

TEST_F(ReportFootprint, TwoPieceSeriesCrossingMidRun) {
  // 100 gCO2eq/kWh until T + 15 s, 500 after: the boundary lies inside gpu0's ramp, where its
  // power is 200 W. gpu0: 1000 J + 750 J at 100, 1250 J at 500; gpu1: 3000 J at 100, 1000 J at
  // 500.
  write_file(dir_ / "series.csv",
             "timestamp,gco2eq_per_kwh\n2023-11-14T21:00:00Z,100\n1700000015,500\n");
  const std::vector<json> charts = footprints("report t.csv --carbon-intensity series.csv");
  ASSERT_EQ(charts.size(), 1u);
  const json& carbon = charts[0];
  const double gpu0 = (1750.0 * 100.0 + 1250.0 * 500.0) / kJoulesPerKwh;
  const double gpu1 = (3000.0 * 100.0 + 1000.0 * 500.0) / kJoulesPerKwh;
  EXPECT_NEAR(carbon["totals"]["gpu0"].get<double>(), gpu0, 1e-12);
  EXPECT_NEAR(carbon["totals"]["gpu1"].get<double>(), gpu1, 1e-12);
  EXPECT_NEAR(carbon["totals"]["total"].get<double>(), gpu0 + gpu1, 1e-12);
  EXPECT_DOUBLE_EQ(carbon["mean_rate"].get<double>(), 200.0);  // 15 s at 100, 5 s at 500
  EXPECT_EQ(carbon["rate"], json::parse("[[0.0, 100.0], [15.0, 500.0], [20.0, 500.0]]"));
  // The curve has a point at the boundary: the cumulative amount there is the first piece's.
  bool at_boundary = false;
  for (const json& point : carbon["series"][0]["points"]) {
    if (point[0].get<double>() == 15.0) {
      at_boundary = true;
      EXPECT_NEAR(point[1].get<double>(), 1750.0 * 100.0 / kJoulesPerKwh, 1e-7);
    }
  }
  EXPECT_TRUE(at_boundary) << carbon["series"][0]["points"].dump();
}

TEST_F(ReportFootprint, PriceTotalsWithTheTariffsCurrency) {
  // gpu0 alone, 360 W over [T + 30, T + 50] (22:13:50 to 22:14:10 UTC on a Tuesday): 3600 J at
  // the default 0.10 EUR/kWh before 22:14, 3600 J at 0.30 after.
  write_file(dir_ / "one.csv",
             "timestamp,device,domain,watts\n1700000030,gpu0,device_instant,360\n"
             "1700000050,gpu0,device_instant,360\n");
  write_file(dir_ / "tariff.json", R"({"currency": "EUR", "default_price_per_kwh": 0.10,
      "periods": [{"days": "tue", "start": "22:14", "end": "24:00", "price_per_kwh": 0.30}]})");
  const std::vector<json> charts = footprints("report one.csv --price tariff.json");
  ASSERT_EQ(charts.size(), 1u);
  const json& cost = charts[0];
  EXPECT_EQ(cost["unit"], "EUR");
  EXPECT_NEAR(cost["totals"]["gpu0"].get<double>(), 0.001 * 0.10 + 0.001 * 0.30, 1e-12);
  EXPECT_NEAR(cost["totals"]["total"].get<double>(), 0.0004, 1e-12);
  EXPECT_EQ(cost["series"].size(), 1u) << "one device: no separate total";
  EXPECT_EQ(cost["rate"], json::parse("[[0.0, 0.1], [10.0, 0.3], [20.0, 0.3]]"));
  EXPECT_TRUE(contains(cost["rate_title"], "EUR/kWh"));
  EXPECT_TRUE(contains(html_, "<th>Electricity cost (EUR)</th>"));
  EXPECT_TRUE(contains(html_, "<td class=\"num\">0.0004</td>"));
}

TEST_F(ReportFootprint, BothFlagsTwoChartsAndNeitherNone) {
  std::vector<json> charts = footprints("report t.csv --carbon-intensity 400 --price 0.36");
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0]["title"], "Carbon emissions (cumulative)");
  EXPECT_EQ(charts[1]["title"], "Electricity cost (cumulative)");
  EXPECT_NEAR(charts[1]["totals"]["total"].get<double>(), 7000.0 / kJoulesPerKwh * 0.36, 1e-12);
  EXPECT_EQ(charts[1]["unit"], "") << "a plain number says no currency";
  // Beside power: after the timeline's own charts (2 power, 1 temperature), in the same section.
  const json data = page_data(html_);
  EXPECT_EQ(data["charts"].size(), 5u);
  EXPECT_EQ(data["charts"]["chart-4"]["kind"], "footprint");
  EXPECT_EQ(data["charts"]["chart-5"]["kind"], "footprint");
  EXPECT_TRUE(contains(html_, "<th>Electricity cost (currency units)</th>"));

  charts = footprints("report t.csv");
  EXPECT_TRUE(charts.empty());
  EXPECT_FALSE(contains(html_, "class=\"footprint\""));
  EXPECT_FALSE(contains(html_, "data-chart=\"footprint\""));
}

// The totals use every sample, not the points left after a long series is averaged for the chart.
TEST_F(ReportFootprint, LongTimelinesIntegrateEverySample) {
  std::string csv = "timestamp,device,domain,watts\n";
  for (int i = 0; i <= 5000; ++i) {
    csv += std::to_string(1700000000 + i) + ",gpu0,device_instant," + (i % 2 ? "100" : "0") + "\n";
  }
  write_file(dir_ / "long.csv", csv);
  const std::vector<json> charts = footprints("report long.csv --carbon-intensity 360");
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_NEAR(charts[0]["energy_j"]["gpu0"].get<double>(), 250000.0, 1e-6);  // 50 W x 5000 s
  EXPECT_NEAR(charts[0]["totals"]["gpu0"].get<double>(), 25.0, 1e-9);
  EXPECT_LE(charts[0]["series"][0]["points"].size(), 1001u);
}

TEST_F(ReportFootprint, FlagsWithoutATimelineAreUsageErrors) {
  write_file(dir_ / "profile.json", R"({"measurements": [
    {"power_limit": 300, "energy": 900.0, "time": 3.0},
    {"power_limit": 250, "energy": 780.0, "time": 3.3}]})");
  for (const std::string flag : {"--carbon-intensity 400", "--price 0.2"}) {
    const Result result = zeus("report profile.json " + flag + " -o r.html");
    EXPECT_EQ(result.exit_code, 2) << flag << ": " << result.err;
    const std::string name = flag.substr(0, flag.find(' '));
    EXPECT_TRUE(contains(result.err, name + " needs a power timeline among the inputs"))
        << result.err;
    EXPECT_FALSE(fs::exists(dir_ / "r.html"));
  }
}

TEST_F(ReportFootprint, BadSpecsAreUsageErrorsBeforeAnyOutput) {
  write_file(dir_ / "bad.csv", "timestamp,gco2eq_per_kwh\n2026-01-01T00:00:00Z,lots\n");
  write_file(dir_ / "bad.json", R"({"default_price_per_kwh": "cheap"})");
  write_file(dir_ / "old.html", "old page");
  struct Bad {
    std::string arguments;
    std::string expected;
  };
  for (const Bad& bad : std::vector<Bad>{{"--carbon-intensity -5", "--carbon-intensity"},
                                         {"--carbon-intensity nan", "--carbon-intensity"},
                                         {"--carbon-intensity electricitymaps:", "needs a zone"},
                                         {"--carbon-intensity bad.csv", "bad.csv:2"},
                                         {"--carbon-intensity missing.csv", "missing.csv"},
                                         {"--carbon-intensity ''", "--carbon-intensity"},
                                         {"--price -1", "--price"},
                                         {"--price bad.json", "default_price_per_kwh"},
                                         {"--price missing.json", "missing.json"}}) {
    for (const char* out : {"new.html", "old.html"}) {
      const Result result = zeus("report t.csv " + bad.arguments + " -o " + out);
      EXPECT_EQ(result.exit_code, 2) << bad.arguments << ": " << result.err;
      EXPECT_TRUE(contains(result.err, bad.expected)) << bad.arguments << ": " << result.err;
    }
    EXPECT_FALSE(fs::exists(dir_ / "new.html")) << bad.arguments;
    EXPECT_EQ(read_file(dir_ / "old.html"), "old page") << bad.arguments;
  }
}

TEST_F(ReportFootprint, TheSeriesFileIsAnInputTheOutputMustNotReplace) {
  write_file(dir_ / "series.csv", "timestamp,gco2eq_per_kwh\n1700000000,100\n");
  const Result result = zeus("report t.csv --carbon-intensity series.csv -o series.csv");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "is also an input")) << result.err;
  EXPECT_EQ(read_file(dir_ / "series.csv"), "timestamp,gco2eq_per_kwh\n1700000000,100\n");
}

// ElectricityMaps on loopback: its history answers the last 24 hours (hourly, as the service).
class FakeHistory {
 public:
  explicit FakeHistory(double first_hour_unix_s) {
    http_.server().Get("/carbon-intensity/history", [first_hour_unix_s](
                                                        const httplib::Request&,
                                                        httplib::Response& response) {
      json history = json::array();
      for (int hour = 0; hour < 24; ++hour) {
        const auto seconds = static_cast<std::time_t>(first_hour_unix_s) + hour * std::time_t{3600};
        std::tm tm{};
        gmtime_r(&seconds, &tm);
        char text[32];
        std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
        history.push_back({{"datetime", text}, {"carbonIntensity", 100 + 100 * hour}});
      }
      response.set_content(json{{"zone", "DE"}, {"history", history}}.dump(), "application/json");
    });
    http_.server().Get(
        "/carbon-intensity/latest", [](const httplib::Request&, httplib::Response& r) {
          r.set_content(R"({"zone":"DE","carbonIntensity":999})", "application/json");
        });
    http_.start();
  }
  std::string url() const { return http_.url(); }

 private:
  zeus::testing::LocalHttpServer http_;
};

TEST_F(ReportFootprint, ElectricityMapsHistoryForARecentTimeline) {
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double boundary = std::floor(now_s / 3600.0) * 3600.0 - 3600.0;  // an hour ago, whole
  const double first_hour = boundary - 22 * 3600.0;  // hours 0..23: the last is the current one
  FakeHistory server(first_hour);
  // 360 W for 10 s each side of the boundary: 3600 J at hour 21's 2200, 3600 J at hour 22's 2300.
  write_file(dir_ / "now.csv", "timestamp,device,domain,watts\n" + std::to_string(boundary - 10) +
                                   ",gpu0,device_instant,360\n" + std::to_string(boundary + 10) +
                                   ",gpu0,device_instant,360\n");
  const std::vector<json> charts =
      footprints("report now.csv --carbon-intensity electricitymaps:DE",
                 "ELECTRICITYMAPS_URL=" + server.url());
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_NEAR(charts[0]["totals"]["gpu0"].get<double>(), 0.001 * 2200 + 0.001 * 2300, 1e-9);
  EXPECT_EQ(charts[0]["rate"], json::parse("[[0.0, 2200.0], [10.0, 2300.0], [20.0, 2300.0]]"));
  EXPECT_FALSE(contains(html_, "covers only the last 24 hours"));

  // A timeline from 2023: older than the history, so the page says so and what to use instead.
  footprints("report t.csv --carbon-intensity electricitymaps:DE",
             "ELECTRICITYMAPS_URL=" + server.url());
  EXPECT_TRUE(contains(html_, "covers only the last 24 hours")) << html_;
  EXPECT_TRUE(contains(html_, "pass a saved series"));
}

// A service that trickles or floods costs `zeus report` the fetch's 6 s deadline at most (or the
// body cap), then the same clear failure.
TEST_F(ReportFootprint, AHostileServiceFailsWithinTheDeadline) {
  for (const auto hostility :
       {zeus::testing::Hostility::kTrickleHead, zeus::testing::Hostility::kEndlessChunked}) {
    zeus::testing::HostileHttpPeer peer(hostility);
    const auto start = std::chrono::steady_clock::now();
    const Result result = zeus("report t.csv --carbon-intensity electricitymaps:DE -o r.html",
                               "ELECTRICITYMAPS_URL=" + peer.url() + "/v3");
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_TRUE(contains(result.err, "--carbon-intensity electricitymaps:DE")) << result.err;
    EXPECT_LT(elapsed_s, 6.0 + 5.0);
    EXPECT_FALSE(fs::exists(dir_ / "r.html"));
  }
}

TEST_F(ReportFootprint, AnUnreachableServiceFailsWithoutAPage) {
  // Nothing listens on port 9 (discard): the client's bounded retries fail, nothing is written.
  const Result result = zeus("report t.csv --carbon-intensity electricitymaps:DE -o r.html",
                             "ELECTRICITYMAPS_URL=http://127.0.0.1:9");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_TRUE(contains(result.err, "--carbon-intensity electricitymaps:DE")) << result.err;
  EXPECT_TRUE(contains(result.err, "t.csv")) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));
}

}  // namespace
