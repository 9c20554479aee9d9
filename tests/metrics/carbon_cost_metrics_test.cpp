// DeviceMetrics' carbon-emission and electricity-cost counters on simulated GPUs and a fake
// powercap tree, with manual steady and wall clocks: constant and offline providers (an interval
// across a change of intensity), a failing provider (the interval left out, reads go on), and a
// provider that blocks without blocking a scrape.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

#include "exposition_check.hpp"
#include "monitor/test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::metrics {
namespace {

using zeus::testing::SimulatedRig;
using zeus::testing::TempDir;

constexpr double kStartUnixS = 1.8e9;  // 2027-01-15, an arbitrary wall time
constexpr double kJoulesPerKwh = 3.6e6;

// Advances the steady (device) clock and the wall clock together.
struct Clocks {
  SimulatedRig& rig;
  std::shared_ptr<ManualClock> wall =
      std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kStartUnixS));
  void advance_s(double seconds) {
    rig.clock->advance_s(seconds);
    wall->advance_s(seconds);
  }
};

DeviceMetricsOptions manual_options(SimulatedRig& rig, const Clocks& clocks) {
  DeviceMetricsOptions options;
  options.clock = rig.clock;
  options.wall_clock = clocks.wall;
  options.start_thread = false;
  return options;
}

std::string rendered(const DeviceMetrics& metrics) {
  std::string text;
  metrics.render(text);
  expect_valid_exposition(text);
  return text;
}

double value(const std::string& text, const std::string& series) {
  const auto found = sample(text, series);
  EXPECT_TRUE(found) << series << " missing in\n" << text;
  return found.value_or(-1.0);
}

TEST(CarbonCostMetrics, WithoutProvidersNoFamiliesAreAdded) {
  SimulatedRig rig(1, "a100");
  Clocks clocks{rig};
  DeviceMetrics metrics(rig.set, {}, manual_options(rig, clocks));
  const std::string text = rendered(metrics);
  EXPECT_EQ(text.find("carbon"), std::string::npos);
  EXPECT_EQ(text.find("cost"), std::string::npos);
  EXPECT_EQ(text.find("price"), std::string::npos);
}

TEST(CarbonCostMetrics, ConstantProvidersPriceEveryDevicesEnergy) {
  SimulatedRig rig(2, "a100");  // 55 W idle, 400 W at full use
  Clocks clocks{rig};
  TempDir dir;
  zeus::testing::make_powercap_tree(dir.path(), 1, true);
  const device::CpuDiscovery cpus = device::discover_rapl_cpus(dir.path());
  ASSERT_TRUE(cpus.available) << cpus.message;
  DeviceMetricsOptions options = manual_options(rig, clocks);
  options.carbon_intensity = std::make_shared<monitor::ConstantCarbonIntensity>(400.0);
  options.electricity_price = std::make_shared<monitor::ConstantElectricityPrice>(0.2, "USD");
  DeviceMetrics metrics(rig.set, cpus.cpus, options);

  // Declared and at 0 before the first interval; no gauge before an interval was priced.
  std::string text = rendered(metrics);
  EXPECT_EQ(value(text, R"(zeus_gpu_carbon_emission_grams_total{index="1"})"), 0.0);
  EXPECT_EQ(value(text, R"(zeus_gpu_energy_cost_total{index="0",currency="USD"})"), 0.0);
  EXPECT_NE(text.find("# TYPE zeus_carbon_intensity_gco2eq_per_kwh gauge"), std::string::npos);
  EXPECT_FALSE(sample(text, "zeus_carbon_intensity_gco2eq_per_kwh"));

  rig.gpus[0]->set_utilization(1.0);
  for (int read = 0; read < 5; ++read) {
    clocks.advance_s(2.0);
    metrics.sample_once();
  }
  zeus::testing::write_file(dir.path() / "intel-rapl:0" / "energy_uj", "37000000");  // +36 J
  zeus::testing::write_file(dir.path() / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj",
                            "18500000");  // +18 J
  clocks.advance_s(1.0);
  metrics.sample_once();
  text = rendered(metrics);

  for (const char* index : {"0", "1"}) {
    const std::string labels = std::string("{index=\"") + index + "\"";
    const double joules = value(text, "zeus_gpu_energy_joules_total" + labels + "}");
    EXPECT_GT(joules, 500.0);
    EXPECT_NEAR(value(text, "zeus_gpu_carbon_emission_grams_total" + labels + "}"),
                joules / kJoulesPerKwh * 400.0, 1e-9);
    EXPECT_NEAR(value(text, "zeus_gpu_energy_cost_total" + labels + ",currency=\"USD\"}"),
                joules / kJoulesPerKwh * 0.2, 1e-12);
  }
  EXPECT_NEAR(value(text, R"(zeus_cpu_carbon_emission_grams_total{index="0"})"),
              36.0 / kJoulesPerKwh * 400.0, 1e-12);
  EXPECT_NEAR(value(text, R"(zeus_dram_carbon_emission_grams_total{index="0"})"),
              18.0 / kJoulesPerKwh * 400.0, 1e-12);
  EXPECT_NEAR(value(text, R"(zeus_dram_energy_cost_total{index="0",currency="USD"})"),
              18.0 / kJoulesPerKwh * 0.2, 1e-12);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_gco2eq_per_kwh"), 400.0);
  EXPECT_EQ(value(text, R"(zeus_electricity_price_per_kwh{currency="USD"})"), 0.2);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_failures_total"), 0.0);
  EXPECT_EQ(value(text, "zeus_electricity_price_failures_total"), 0.0);
}

TEST(CarbonCostMetrics, AnIntervalAcrossAChangeOfIntensityIsApportionedByTime) {
  SimulatedRig rig(1, "a100");
  rig.gpus[0]->set_utilization(1.0);  // a constant 400 W: time apportioning is exact
  Clocks clocks{rig};
  DeviceMetricsOptions options = manual_options(rig, clocks);
  // 100 g/kWh until 4 s after the start, then 500.
  options.carbon_intensity = std::make_shared<monitor::OfflineCarbonIntensity>(
      std::vector<monitor::OfflineCarbonIntensity::Point>{{kStartUnixS - 3600, 100.0},
                                                          {kStartUnixS + 4.0, 500.0}});
  // No currency said: the cost series carry no currency label.
  options.electricity_price = std::make_shared<monitor::ConstantElectricityPrice>(0.3);
  DeviceMetrics metrics(rig.set, {}, options);

  clocks.advance_s(10.0);  // 4 s at 100, 6 s at 500: a mean of 340
  metrics.sample_once();
  std::string text = rendered(metrics);
  const double first_j = value(text, R"(zeus_gpu_energy_joules_total{index="0"})");
  EXPECT_NEAR(first_j, 4000.0, 4.0);
  const double first_g = value(text, R"(zeus_gpu_carbon_emission_grams_total{index="0"})");
  EXPECT_NEAR(first_g, first_j / kJoulesPerKwh * 340.0, 1e-9);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_gco2eq_per_kwh"), 500.0);
  EXPECT_NEAR(value(text, R"(zeus_gpu_energy_cost_total{index="0"})"),
              first_j / kJoulesPerKwh * 0.3, 1e-12);
  EXPECT_EQ(value(text, "zeus_electricity_price_per_kwh"), 0.3);

  clocks.advance_s(5.0);  // all at 500
  metrics.sample_once();
  text = rendered(metrics);
  const double second_j = value(text, R"(zeus_gpu_energy_joules_total{index="0"})") - first_j;
  EXPECT_NEAR(value(text, R"(zeus_gpu_carbon_emission_grams_total{index="0"})"),
              first_g + second_j / kJoulesPerKwh * 500.0, 1e-9);
}

// Fails while `failing`, else a constant 400; counts its calls.
class FlakyIntensity final : public monitor::CarbonIntensityProvider {
 public:
  std::vector<monitor::CarbonIntensityPiece> intensity_over(double start_unix_s,
                                                            double end_unix_s) override {
    ++calls;
    if (failing) {
      throw monitor::CarbonIntensityError(ErrorKind::kUnavailable, "service answered 500");
    }
    return {{start_unix_s, end_unix_s, 400.0}};
  }
  double update_period_s() const override { return 0.0; }
  bool failing = false;
  int calls = 0;
};

TEST(CarbonCostMetrics, AFailingProviderLeavesItsIntervalsOutAndReadsGoOn) {
  SimulatedRig rig(1, "a100");
  rig.gpus[0]->set_utilization(1.0);
  Clocks clocks{rig};
  auto provider = std::make_shared<FlakyIntensity>();
  DeviceMetricsOptions options = manual_options(rig, clocks);
  options.carbon_intensity = provider;
  DeviceMetrics metrics(rig.set, {}, options);
  EXPECT_EQ(provider->calls, 0);  // the first read only sets the baseline

  clocks.advance_s(1.0);
  metrics.sample_once();
  const double counted_j = value(rendered(metrics), R"(zeus_gpu_energy_joules_total{index="0"})");

  provider->failing = true;
  for (int read = 0; read < 3; ++read) {
    clocks.advance_s(1.0);
    EXPECT_NO_THROW(metrics.sample_once());
  }
  std::string text = rendered(metrics);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_failures_total"), 3.0);
  const double after_failures_j = value(text, R"(zeus_gpu_energy_joules_total{index="0"})");
  EXPECT_NEAR(after_failures_j, counted_j + 1200.0, 2.0);  // the energy counter went on
  EXPECT_NEAR(value(text, R"(zeus_gpu_carbon_emission_grams_total{index="0"})"),
              counted_j / kJoulesPerKwh * 400.0, 1e-9);  // the failed intervals left out
  EXPECT_EQ(value(text, "zeus_carbon_intensity_gco2eq_per_kwh"), 400.0);  // the last known

  provider->failing = false;
  clocks.advance_s(1.0);
  metrics.sample_once();
  text = rendered(metrics);
  const double now_j = value(text, R"(zeus_gpu_energy_joules_total{index="0"})");
  EXPECT_NEAR(value(text, R"(zeus_gpu_carbon_emission_grams_total{index="0"})"),
              (counted_j + now_j - after_failures_j) / kJoulesPerKwh * 400.0, 1e-9);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_failures_total"), 3.0);
  EXPECT_EQ(provider->calls, 5);
}

// Blocks every call until released (an HTTP provider waiting on a slow service).
class BlockingPrice final : public monitor::ElectricityPriceProvider {
 public:
  std::vector<monitor::ElectricityPricePiece> price_over(double start_unix_s,
                                                         double end_unix_s) override {
    std::unique_lock lock(mutex);
    entered = true;
    changed.notify_all();
    changed.wait(lock, [this] { return released; });
    return {{start_unix_s, end_unix_s, 0.1}};
  }
  std::string currency() const override { return "EUR"; }
  std::mutex mutex;
  std::condition_variable changed;
  bool entered = false;
  bool released = false;
};

TEST(CarbonCostMetrics, AProviderThatBlocksDoesNotBlockAScrape) {
  SimulatedRig rig(1, "a100");
  Clocks clocks{rig};
  auto provider = std::make_shared<BlockingPrice>();
  DeviceMetricsOptions options = manual_options(rig, clocks);
  options.electricity_price = provider;
  DeviceMetrics metrics(rig.set, {}, options);
  clocks.advance_s(1.0);
  auto reading = std::async(std::launch::async, [&] { metrics.sample_once(); });
  {
    std::unique_lock lock(provider->mutex);
    provider->changed.wait(lock, [&] { return provider->entered; });
  }
  // The read is inside the provider; a scrape renders the state it has.
  auto scrape = std::async(std::launch::async, [&] { return rendered(metrics); });
  ASSERT_EQ(scrape.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::string during = scrape.get();
  EXPECT_NEAR(value(during, R"(zeus_gpu_energy_joules_total{index="0"})"), 55.0, 1.0);
  EXPECT_EQ(value(during, R"(zeus_gpu_energy_cost_total{index="0",currency="EUR"})"), 0.0);
  {
    const std::lock_guard lock(provider->mutex);
    provider->released = true;
  }
  provider->changed.notify_all();
  reading.get();
  EXPECT_GT(value(rendered(metrics), R"(zeus_gpu_energy_cost_total{index="0",currency="EUR"})"),
            0.0);
}

// A wall clock that can be set back, as the system time can be.
class SettableClock final : public Clock {
 public:
  std::int64_t now_ns() const override { return now_ns_.load(); }
  void sleep_for_ns(std::int64_t) const override {}
  void set_s(double unix_s) { now_ns_.store(units::nanoseconds_from_seconds(unix_s)); }

 private:
  std::atomic<std::int64_t> now_ns_{0};
};

TEST(CarbonCostMetrics, AWallClockSetBackGivesAZeroLengthInterval) {
  SimulatedRig rig(1, "a100");  // 55 W idle
  Clocks clocks{rig};
  DeviceMetricsOptions options = manual_options(rig, clocks);
  auto wall = std::make_shared<SettableClock>();
  wall->set_s(kStartUnixS + 100);
  options.wall_clock = wall;
  options.carbon_intensity = std::make_shared<monitor::OfflineCarbonIntensity>(
      std::vector<monitor::OfflineCarbonIntensity::Point>{{kStartUnixS, 200.0},
                                                          {kStartUnixS + 50, 300.0}});
  DeviceMetrics metrics(rig.set, {}, options);
  rig.clock->advance_s(1.0);
  wall->set_s(kStartUnixS + 10);  // set back by 90 s
  EXPECT_NO_THROW(metrics.sample_once());
  const std::string text = rendered(metrics);
  EXPECT_EQ(value(text, "zeus_carbon_intensity_failures_total"), 0.0);
  // Priced at the intensity in force at the new time, not refused as an interval ending before
  // it starts.
  EXPECT_EQ(value(text, "zeus_carbon_intensity_gco2eq_per_kwh"), 200.0);
  EXPECT_NEAR(value(text, R"(zeus_gpu_carbon_emission_grams_total{index="0"})"),
              value(text, R"(zeus_gpu_energy_joules_total{index="0"})") / kJoulesPerKwh * 200.0,
              1e-9);
}

}  // namespace
}  // namespace zeus::metrics
