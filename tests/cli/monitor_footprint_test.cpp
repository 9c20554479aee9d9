// `zeus monitor --carbon-intensity` and `--price`: the emissions and the cost in the summary,
// from constants, files and local ElectricityMaps and OpenEI stand-ins; and totals that do not
// count a Grace superchip's CPU twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "monitor_test_support.hpp"
#include "support/loopback_peers.hpp"

namespace {

using namespace zeus::testing::cli_monitor;

// --carbon-intensity (docs/carbon.md): gCO2eq from the window's energy and the intensity over it.
TEST_F(CliMonitor, CarbonIntensityAddsTheEmissionsToTheSummary) {
  // 1 kWh = 3.6e6 J: at 360 gCO2eq/kWh, a joule is 1e-4 g.
  const Result constant = run({kTwoH200}, {"monitor", "--json", "--output", path("c.json"),
                                           "--carbon-intensity", "360", "--", "sleep", "0.2"});
  ASSERT_EQ(constant.exit_code, 0) << constant.err;
  const json summary = json::parse(read_file(path("c.json")));
  const json& carbon = summary["carbon"];
  ASSERT_TRUE(carbon.is_object()) << summary.dump();
  EXPECT_DOUBLE_EQ(carbon["mean_gco2eq_per_kwh"].get<double>(), 360.0);
  for (const std::string index : {"0", "1"}) {
    EXPECT_NEAR(carbon["gpu_gco2eq"][index].get<double>(),
                summary["gpu_energy_j"][index].get<double>() * 1e-4, 1e-12);
  }
  EXPECT_NEAR(carbon["gco2eq"].get<double>(),
              carbon["gpu_gco2eq"]["0"].get<double>() + carbon["gpu_gco2eq"]["1"].get<double>(),
              1e-12);

  // A time series file (the value in force since 2026 holds over the run).
  std::ofstream(path("series.csv")) << "timestamp,gco2eq_per_kwh\n2020-01-01T00:00:00Z,100\n"
                                       "2026-01-01T00:00:00Z,250\n";
  const Result series =
      run({kTwoH200}, {"monitor", "--carbon-intensity", path("series.csv"), "--", "sleep", "0.1"});
  ASSERT_EQ(series.exit_code, 0) << series.err;
  EXPECT_TRUE(contains(series.err, "gCO2eq (GPU ")) << series.err;
  EXPECT_TRUE(contains(series.err, "at a mean 250 gCO2eq/kWh")) << series.err;
}

// A Grace superchip's GPU energy is module energy (GPU + CPU + memory): the summary labels it, and
// neither the total nor the carbon and cost totals add the CPU and DRAM figures on top of it.
TEST_F(CliMonitor, ModuleEnergyIsLabelledAndTheCpuIsNotCountedTwice) {
  const fs::path root = make_powercap_tree();
  const std::string script = "echo 5000000 > '" + (root / "intel-rapl:0/energy_uj").string() + "'";
  const std::string module = "ZEUS_SIMULATED_GPUS=1:h200:module";
  Result result =
      run({module}, {"monitor", "--powercap-root", root.string(), "--json", "-o", path("s.json"),
                     "--carbon-intensity", "360", "--price", "0.36", "--", "sh", "-c", script});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_DOUBLE_EQ(summary["cpu_energy_j"]["0"].get<double>(), 4.0);
  EXPECT_EQ(summary["gpu_energy_scope"], json({{"0", "module"}}));
  EXPECT_EQ(summary["cpu_energy_in_gpu_energy"], true);
  EXPECT_NEAR(summary["carbon"]["gco2eq"].get<double>(),
              summary["carbon"]["gpu_gco2eq"]["0"].get<double>(), 1e-12);
  EXPECT_GT(summary["carbon"]["cpu_gco2eq"]["0"].get<double>(), 0.0);
  EXPECT_NEAR(summary["cost"]["total"].get<double>(), summary["cost"]["gpu"]["0"].get<double>(),
              1e-12);

  result = run({module}, {"monitor", "--powercap-root", root.string(), "-o", path("s.txt"), "--",
                          "sh", "-c", script});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string text = read_file(path("s.txt"));
  EXPECT_TRUE(contains(text, "module energy: GPU + CPU + memory of its superchip")) << text;
  EXPECT_TRUE(contains(text, "the totals leave them out")) << text;
  std::smatch gpu, total;
  ASSERT_TRUE(std::regex_search(text, gpu, std::regex(R"(GPU 0 +NVIDIA H200 +([0-9.]+) J)")));
  ASSERT_TRUE(
      std::regex_search(text, total, std::regex(R"(total +\(GPU modules only\) +([0-9.]+) J)")))
      << text;
  EXPECT_EQ(gpu[1], total[1]);  // the GPU's module energy alone

  // Without CPU figures there is nothing counted twice: the row is labelled, no note.
  result = run({module}, {"monitor", "--powercap-root", path("none").string(), "-o", path("n.txt"),
                          "--", "true"});
  const std::string alone = read_file(path("n.txt"));
  EXPECT_TRUE(contains(alone, "module energy:")) << alone;
  EXPECT_FALSE(contains(alone, "the totals leave them out")) << alone;
}

TEST_F(CliMonitor, ABadCarbonIntensityIsAUsageErrorBeforeAnythingRuns) {
  std::ofstream(path("bad.csv")) << "timestamp,gco2eq_per_kwh\n2026-01-01T00:00:00Z,lots\n";
  for (const std::string& spec :
       {std::string("-5"), std::string("nan"), std::string("electricitymaps:"),
        path("bad.csv").string(), path("missing.csv").string()}) {
    const Result result = run({kTwoH200}, {"monitor", "--carbon-intensity", spec, "--", "sh", "-c",
                                           "touch " + path("ran").string()});
    EXPECT_NE(result.exit_code, 0) << spec;
    EXPECT_TRUE(contains(result.err, "--carbon-intensity")) << spec << ": " << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result bad_row =
      run({kTwoH200}, {"monitor", "--carbon-intensity", path("bad.csv"), "--", "true"});
  EXPECT_EQ(bad_row.exit_code, 2);
  EXPECT_TRUE(contains(bad_row.err, "bad.csv:2")) << bad_row.err;
}

TEST_F(CliMonitor, AnUnreachableCarbonServiceCostsOnlyTheCarbonFigure) {
  // Nothing listens on port 9 (discard) here: the client's retries fail fast, the energy stays.
  const Result result = run({kTwoH200, "ELECTRICITYMAPS_URL=http://127.0.0.1:9"},
                            {"monitor", "--json", "--output", path("s.json"), "--carbon-intensity",
                             "electricitymaps:DE", "--", "true"},
                            60.0);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("s.json")));
  EXPECT_TRUE(summary["carbon"].is_null()) << summary.dump();
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(has_note(summary, "no carbon emissions: ")) << summary["notes"].dump();
}

TEST_F(CliMonitor, AHungCarbonServiceHoldsTheSummaryBackOnlySeconds) {
  // A socket that listens and is never accepted from: the kernel completes each connection, the
  // request is sent, and no answer ever comes (a half-open service). zeus monitor's limits (two
  // attempts, 3 s read timeout, a 6 s deadline on the whole fetch) bound the wait to 6 s, not the
  // library's 15 s.
  const zeus::testing::SilentListener listener;
  const std::string url = listener.url();
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, "ELECTRICITYMAPS_URL=" + url},
                            {"monitor", "--json", "--output", path("h.json"), "--carbon-intensity",
                             "electricitymaps:DE", "--", "true"},
                            60.0);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(json::parse(read_file(path("h.json")))["carbon"].is_null());
  EXPECT_GE(waited_s, 5.0) << "both attempts should have waited for their read timeout";
  EXPECT_LT(waited_s, 12.0);
}

// --price (docs/cost.md): the window's energy times the price per kWh over it.
TEST_F(CliMonitor, PriceAddsTheCostToTheSummary) {
  // 1 kWh = 3.6e6 J: at 0.36 per kWh, a joule costs 1e-7.
  const Result constant = run({kTwoH200}, {"monitor", "--json", "--output", path("p.json"),
                                           "--price", "0.36", "--", "sleep", "0.2"});
  ASSERT_EQ(constant.exit_code, 0) << constant.err;
  const json summary = json::parse(read_file(path("p.json")));
  const json& cost = summary["cost"];
  ASSERT_TRUE(cost.is_object()) << summary.dump();
  EXPECT_DOUBLE_EQ(cost["mean_price_per_kwh"].get<double>(), 0.36);
  EXPECT_TRUE(cost["currency"].is_null());
  for (const std::string index : {"0", "1"}) {
    EXPECT_NEAR(cost["gpu"][index].get<double>(),
                summary["gpu_energy_j"][index].get<double>() * 1e-7, 1e-12);
  }
  EXPECT_NEAR(cost["total"].get<double>(),
              cost["gpu"]["0"].get<double>() + cost["gpu"]["1"].get<double>(), 1e-12);
  EXPECT_FALSE(summary.contains("carbon"));

  // A tariff whose only period covers the whole week: its price holds, with its currency.
  std::ofstream(path("tariff.json")) << R"({"currency": "EUR", "default_price_per_kwh": 1,
             "periods": [{"days": "all", "start": "00:00", "end": "24:00", "price_per_kwh": 0.25}]})";
  const Result tariff =
      run({kTwoH200}, {"monitor", "--price", path("tariff.json"), "--", "sleep", "0.1"});
  ASSERT_EQ(tariff.exit_code, 0) << tariff.err;
  EXPECT_TRUE(contains(tariff.err, "EUR (GPU ")) << tariff.err;
  EXPECT_TRUE(contains(tariff.err, "at a mean 0.25 EUR/kWh")) << tariff.err;
}

TEST_F(CliMonitor, ABadPriceIsAUsageErrorBeforeAnythingRuns) {
  std::ofstream(path("bad.json")) << R"({"default_price_per_kwh": "cheap"})";
  for (const std::string& spec : {std::string("-1"), std::string("nan"), path("bad.json").string(),
                                  path("missing.json").string()}) {
    const Result result = run({kTwoH200}, {"monitor", "--price", spec, "--", "sh", "-c",
                                           "touch " + path("ran").string()});
    EXPECT_NE(result.exit_code, 0) << spec;
    EXPECT_TRUE(contains(result.err, "--price")) << spec << ": " << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result bad = run({kTwoH200}, {"monitor", "--price", path("bad.json"), "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "bad.json")) << bad.err;
  EXPECT_TRUE(contains(bad.err, "default_price_per_kwh")) << bad.err;
}

// An OpenEI answer with the rate `label`: one period (0.20 + 0.05 adj) at every hour of the year,
// so the price does not depend on when the test runs.
std::string openei_answer(const std::string& label) {
  std::string day = "[0";
  for (int hour = 1; hour < 24; ++hour) {
    day += ",0";
  }
  day += "]";
  std::string year = day;
  for (int month = 1; month < 12; ++month) {
    year += ',';
    year += day;
  }
  return R"({"items": [{"label": ")" + label +
         R"(", "name": "Flat commercial", "utility": "Example Power",
         "energyratestructure": [[{"rate": 0.20, "adj": 0.05, "unit": "kWh"}]],
         "energyweekdayschedule": [)" +
         year + R"(], "energyweekendschedule": [)" + year + "]}]}";
}

constexpr const char* kOpenEIKey = "OPENEI_API_KEY=cli-test-key";

// --price openei:LABEL@LAT,LON (docs/cost.md): the rate from a local OpenEI-compatible server.
TEST_F(CliMonitor, PriceFromAnOpenEIRate) {
  // Every request gets the same 200 answer; the request lines are read after stop().
  const std::string answer = zeus::testing::RawHttpPeer::ok_json(openei_answer("lbl123"));
  zeus::testing::RawHttpPeer server([&answer](const std::string&) { return answer; });
  const Result result =
      run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + server.url()},
          {"monitor", "--json", "--output", path("o.json"), "--price",
           "openei:lbl123@40.02,-105.27,sector=commercial,radius=5", "--", "sleep", "0.1"});
  const Result text = run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + server.url()},
                          {"monitor", "--price", "openei:lbl123@40.02,-105.27", "--", "true"});
  server.stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json summary = json::parse(read_file(path("o.json")));
  const json& cost = summary["cost"];
  ASSERT_TRUE(cost.is_object()) << summary.dump();
  EXPECT_EQ(cost["currency"], "USD");
  EXPECT_DOUBLE_EQ(cost["mean_price_per_kwh"].get<double>(), 0.25);
  EXPECT_NEAR(cost["gpu"]["0"].get<double>(),
              summary["gpu_energy_j"]["0"].get<double>() / 3.6e6 * 0.25, 1e-12);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.err, "at a mean 0.25 USD/kWh")) << text.err;
  // One request per run, with the reference's query and the key from the environment.
  const std::vector<std::string> request_lines = server.request_lines();
  ASSERT_EQ(request_lines.size(), 2u);
  const std::string& request = request_lines[0];
  for (const std::string part :
       {"GET /utility_rates?", "api_key=cli-test-key", "sector=Commercial", "radius=5", "lat=40.02",
        "lon=-105.27", "detail=full", "version=latest", "format=json"}) {
    EXPECT_TRUE(contains(request, part)) << part << " not in " << request;
  }
  EXPECT_FALSE(contains(result.err + read_file(path("o.json")) + text.err, "cli-test-key"));
}

TEST_F(CliMonitor, ABadOpenEIPriceIsAUsageErrorBeforeAnythingRuns) {
  for (const std::string& spec :
       {std::string("openei:"), std::string("openei:lbl"), std::string("openei:lbl@40"),
        std::string("openei:lbl@north,west"), std::string("openei:@40,-105"),
        std::string("openei:lbl@40,-105,color=red"), std::string("openei:lbl@95,0"),
        std::string("openei:lbl@40,-105,radius=500"), std::string("openei:lbl@40,-105,sector=Farm"),
        std::string("openei:lbl@40,-105,utc_offset=20")}) {
    const Result result =
        run({kTwoH200, kOpenEIKey, "OPENEI_URL=http://127.0.0.1:9"},
            {"monitor", "--price", spec, "--", "sh", "-c", "touch " + path("ran").string()});
    EXPECT_EQ(result.exit_code, 2) << spec << ": " << result.err;
    EXPECT_TRUE(contains(result.err, "--price " + spec)) << spec << ": " << result.err;
    EXPECT_FALSE(contains(result.err, "cli-test-key")) << result.err;
    EXPECT_FALSE(fs::exists(path("ran"))) << spec << ": the command must not run";
  }
  const Result no_key =
      run({kTwoH200, "OPENEI_API_KEY="}, {"monitor", "--price", "openei:lbl@40,-105", "--", "sh",
                                          "-c", "touch " + path("ran").string()});
  EXPECT_EQ(no_key.exit_code, 2) << no_key.err;
  EXPECT_TRUE(contains(no_key.err, "OPENEI_API_KEY")) << no_key.err;
  EXPECT_FALSE(fs::exists(path("ran")));
}

TEST_F(CliMonitor, AnUnreachableOpenEIServiceCostsOnlyTheCostFigure) {
  // Nothing listens on port 9 here: both attempts are refused at once; the energy stays.
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, kOpenEIKey, "OPENEI_URL=http://127.0.0.1:9"},
                            {"monitor", "--json", "--output", path("u.json"), "--price",
                             "openei:lbl@40,-105", "--", "true"},
                            60.0);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(seconds_since(start), 10.0);
  const std::string written = read_file(path("u.json"));
  const json summary = json::parse(written);
  EXPECT_TRUE(summary["cost"].is_null()) << summary.dump();
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u);
  EXPECT_TRUE(has_note(summary, "no electricity cost: ")) << summary["notes"].dump();
  EXPECT_FALSE(contains(written + result.err, "cli-test-key"));
}

TEST_F(CliMonitor, AHungOpenEIServiceHoldsTheSummaryBackOnlySeconds) {
  // A socket that listens and is never accepted from: each request is sent and never answered.
  // zeus monitor's limits (two attempts, 3 s read timeout, a 6 s deadline on the whole fetch)
  // bound the wait to 6 s, not the library's 30 s.
  const zeus::testing::SilentListener listener;
  const std::string url = listener.url();
  const auto start = std::chrono::steady_clock::now();
  const Result result = run({kTwoH200, kOpenEIKey, "OPENEI_URL=" + url},
                            {"monitor", "--json", "--output", path("h.json"), "--price",
                             "openei:lbl@40,-105", "--", "true"},
                            60.0);
  const double waited_s = seconds_since(start);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(json::parse(read_file(path("h.json")))["cost"].is_null());
  EXPECT_GE(waited_s, 5.0) << "both attempts should have waited for their read timeout";
  EXPECT_LT(waited_s, 12.0);
}

}  // namespace
