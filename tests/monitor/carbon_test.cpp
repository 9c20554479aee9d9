// The offline carbon intensity providers (constant, CSV/JSON series), timestamp parsing, and the
// carbon emission monitor's window accounting on a manual clock.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include "monitor/test_support.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::monitor {
namespace {

using zeus::testing::expect_error;

constexpr double kT0 = 1764626400.0;  // 2025-12-01T22:00:00Z, an hour boundary

std::filesystem::path write(const zeus::testing::TempDir& dir, const std::string& name,
                            const std::string& text) {
  const std::filesystem::path path = dir.path() / name;
  std::ofstream(path) << text;
  return path;
}

TEST(CarbonTimestamp, ParsesIsoAndUnixSeconds) {
  EXPECT_EQ(parse_timestamp("2025-12-01T22:00:00Z"), kT0);
  EXPECT_EQ(parse_timestamp("2025-12-01T22:00:00.000Z"), kT0);
  EXPECT_EQ(parse_timestamp("2025-12-01T23:30:00+01:30"), kT0);
  EXPECT_EQ(parse_timestamp("2025-12-01 22:00:00"), kT0);
  EXPECT_EQ(parse_timestamp("2025-12-01T22:00Z"), kT0);
  EXPECT_EQ(parse_timestamp("1970-01-01"), 0.0);
  EXPECT_EQ(parse_timestamp("1764626400"), kT0);
  EXPECT_EQ(parse_timestamp(" 12.5 "), 12.5);
  for (const char* bad : {"", "yesterday", "2025-13-01T00:00:00Z", "2025-12-01T25:00:00Z",
                          "2025-12-01T22:00:00Q", "2025-12-01T22:00:00.Z", "nan", "12abc"}) {
    EXPECT_EQ(parse_timestamp(bad), std::nullopt) << bad;
  }
}

TEST(ConstantCarbonIntensity, OnePieceOverAnyInterval) {
  ConstantCarbonIntensity constant(400.0);
  const auto pieces = constant.intensity_over(kT0, kT0 + 7200);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].gco2eq_per_kwh, 400.0);
  EXPECT_EQ(constant.intensity_at(kT0 - 1e6), 400.0);
  expect_error([] { ConstantCarbonIntensity bad(-1.0); }, ErrorKind::kInvalidArgument, {"-1"});
  expect_error([&] { constant.intensity_over(kT0, kT0 - 1); }, ErrorKind::kInvalidArgument,
               {"end before start"});
}

TEST(OfflineCarbonIntensity, CsvSplitsIntervalsAtPoints) {
  const zeus::testing::TempDir dir;
  const auto path = write(dir, "ci.csv",
                          "timestamp,gco2eq_per_kwh\n"
                          "2025-12-01T22:00:00Z,100\n"
                          "1764630000,200\n"  // 23:00 as Unix seconds
                          "2025-12-02T00:00:00Z, 300 \n");
  OfflineCarbonIntensity series = OfflineCarbonIntensity::from_file(path);
  ASSERT_EQ(series.points().size(), 3u);
  EXPECT_EQ(series.update_period_s(), 3600.0);
  EXPECT_EQ(series.intensity_at(kT0 + 10), 100.0);
  EXPECT_EQ(series.intensity_at(kT0 + 3600), 200.0);
  EXPECT_EQ(series.intensity_at(kT0 - 100), 100.0);  // before the first: the first
  EXPECT_EQ(series.intensity_at(kT0 + 1e6), 300.0);  // after the last: the last
  const auto pieces = series.intensity_over(kT0 + 1800, kT0 + 9000);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].start_unix_s, kT0 + 1800);
  EXPECT_EQ(pieces[0].end_unix_s, kT0 + 3600);
  EXPECT_EQ(pieces[1].gco2eq_per_kwh, 200.0);
  EXPECT_EQ(pieces[2].start_unix_s, kT0 + 7200);
  EXPECT_EQ(pieces[2].end_unix_s, kT0 + 9000);
  EXPECT_EQ(pieces[2].gco2eq_per_kwh, 300.0);
  // Entirely before the series, and a zero-length interval.
  EXPECT_EQ(series.intensity_over(kT0 - 50, kT0 - 10).size(), 1u);
  EXPECT_EQ(series.intensity_over(kT0 + 5, kT0 + 5).size(), 1u);
}

TEST(OfflineCarbonIntensity, JsonArrayAndElectricityMapsHistory) {
  const zeus::testing::TempDir dir;
  const auto plain = write(dir, "a.json",
                           R"([{"timestamp": "2025-12-01T22:00:00Z", "gco2eq_per_kwh": 10},
                               {"timestamp": 1764630000, "gco2eq_per_kwh": 20}])");
  EXPECT_EQ(OfflineCarbonIntensity::from_file(plain).intensity_at(kT0 + 4000), 20.0);
  const auto history = write(dir, "h.json",
                             R"({"zone": "DE", "history": [
                                 {"datetime": "2025-12-01T22:00:00.000Z", "carbonIntensity": 5},
                                 {"datetime": "2025-12-01T23:00:00.000Z", "carbonIntensity": 7}]})");
  EXPECT_EQ(OfflineCarbonIntensity::from_file(history).intensity_at(kT0 + 4000), 7.0);
  expect_error([&] { OfflineCarbonIntensity::from_file(write(dir, "b.json", "{not json")); },
               ErrorKind::kInvalidArgument, {"b.json", "not valid JSON"});
  try {
    OfflineCarbonIntensity::from_file(write(dir, "o.json", R"([{"timestamp": 1e400}])"));
    ADD_FAILURE() << "an overflowing number was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).find("json.exception"), std::string::npos) << error.what();
  }
  expect_error(
      [&] {
        OfflineCarbonIntensity::from_file(
            write(dir, "c.json", R"([{"timestamp": 1, "gco2eq_per_kwh": 1}, {"timestamp": 2}])"));
      },
      ErrorKind::kInvalidArgument, {"c.json", "entry 1"});
  expect_error([&] { OfflineCarbonIntensity::from_file(write(dir, "d.json", "[]")); },
               ErrorKind::kInvalidArgument, {"d.json", "no carbon intensity points"});
}

TEST(OfflineCarbonIntensity, HostileCsvFilesNameFileAndLine) {
  const zeus::testing::TempDir dir;
  const auto fails = [&](const std::string& name, const std::string& text,
                         const std::vector<std::string>& fragments) {
    const auto path = write(dir, name, text);
    expect_error([&] { OfflineCarbonIntensity::from_file(path); }, ErrorKind::kInvalidArgument,
                 fragments);
  };
  fails("empty.csv", "", {"empty.csv"});
  fails("header.csv", "timestamp,gco2eq_per_kwh\n", {"header.csv", "no carbon intensity"});
  fails("badnum.csv", "timestamp,gco2eq_per_kwh\n1,100\n2,lots\n", {"badnum.csv:3", "lots"});
  // A corrupt or wrongly scaled value would give infinite or absurd emissions.
  fails("huge.csv", "timestamp,gco2eq_per_kwh\n1,100\n2,1e308\n", {"huge.csv:3", "at most"});
  expect_error([] { ConstantCarbonIntensity bad(2e5); }, ErrorKind::kInvalidArgument,
               {"at most 100000"});
  expect_error(
      [] {
        OfflineCarbonIntensity bad({{1.0, 100.0}, {2.0, 1e308}});
      },
      ErrorKind::kInvalidArgument, {"point 1"});
  fails("neg.csv", "timestamp,gco2eq_per_kwh\n1,-5\n", {"neg.csv:2", ">= 0"});
  fails("inf.csv", "timestamp,gco2eq_per_kwh\n1,inf\n", {"inf.csv:2"});
  fails("badtime.csv", "timestamp,gco2eq_per_kwh\nnoon,5\n", {"badtime.csv:2", "noon"});
  fails("unsorted.csv", "timestamp,gco2eq_per_kwh\n10,1\n5,2\n", {"unsorted.csv:3", "increasing"});
  fails("dup.csv", "timestamp,gco2eq_per_kwh\n10,1\n10,2\n", {"dup.csv:3", "duplicate"});
  fails("cols.csv", "time,value\n1,2\n", {"cols.csv"});
  fails("short.csv", "timestamp,gco2eq_per_kwh\n1\n", {"short.csv:2"});

  expect_error([&] { OfflineCarbonIntensity::from_file(dir.path() / "absent.csv"); },
               ErrorKind::kNotFound, {"absent.csv"});
  const auto fifo = dir.path() / "fifo.csv";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO must be refused, not read (that would block until a writer comes).
  try {
    OfflineCarbonIntensity::from_file(fifo);
    ADD_FAILURE() << "a FIFO was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("fifo.csv"), std::string::npos) << error.what();
  }
}

// 1 kWh on GPU 0, 0.5 on GPU 1, 2 on CPU 0 and 0.1 on DRAM 0 per window.
std::shared_ptr<zeus::testing::FixedEnergyMonitor> fixed_energy_monitor() {
  return std::make_shared<zeus::testing::FixedEnergyMonitor>(
      zeus::testing::energies(1.0, {{0, 3.6e6}, {1, 1.8e6}}, {{0, 7.2e6}}, {{0, 0.36e6}}));
}

TEST(CarbonEmissionMonitor, WindowInsideOneIntervalUsesItsIntensity) {
  auto clock = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kT0 + 60));
  auto provider = std::make_shared<OfflineCarbonIntensity>(
      std::vector<OfflineCarbonIntensity::Point>{{kT0, 100.0}, {kT0 + 3600, 500.0}});
  CarbonEmissionMonitor monitor(fixed_energy_monitor(), provider, clock);
  monitor.begin_window("step");
  clock->advance_s(600);
  const CarbonEmissionMeasurement m = monitor.end_window("step");
  EXPECT_DOUBLE_EQ(m.mean_gco2eq_per_kwh, 100.0);
  EXPECT_DOUBLE_EQ(m.gpu_carbon_emission_g.at(0), 100.0);
  EXPECT_DOUBLE_EQ(m.gpu_carbon_emission_g.at(1), 50.0);
  EXPECT_DOUBLE_EQ(m.cpu_carbon_emission_g.at(0), 200.0);
  EXPECT_DOUBLE_EQ(m.dram_carbon_emission_g.at(0), 10.0);
  EXPECT_DOUBLE_EQ(m.gpu_energy_j.at(0), 3.6e6);
  EXPECT_DOUBLE_EQ(m.total_carbon_emission_g(), 360.0);
}

TEST(CarbonEmissionMonitor, WindowAcrossIntervalBoundariesIsTimeWeighted) {
  // Starts 30 min before the boundary, ends 90 min after it: 1/4 at 100, 3/4 at 500.
  auto clock = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kT0 + 1800));
  auto provider =
      std::make_shared<OfflineCarbonIntensity>(std::vector<OfflineCarbonIntensity::Point>{
          {kT0, 100.0}, {kT0 + 3600, 500.0}, {kT0 + 7200, 500.0}});
  CarbonEmissionMonitor monitor(fixed_energy_monitor(), provider, clock);
  monitor.begin_window("epoch");
  monitor.begin_window("inner");
  clock->advance_s(1800);  // exactly on the boundary
  const CarbonEmissionMeasurement inner = monitor.end_window("inner");
  EXPECT_DOUBLE_EQ(inner.mean_gco2eq_per_kwh, 100.0);
  clock->advance_s(5400);
  const CarbonEmissionMeasurement epoch = monitor.end_window("epoch");
  EXPECT_DOUBLE_EQ(epoch.mean_gco2eq_per_kwh, 0.25 * 100.0 + 0.75 * 500.0);
  EXPECT_DOUBLE_EQ(epoch.gpu_carbon_emission_g.at(0), 400.0);
  // A zero-length window takes the intensity in force; a cancelled one emits nothing.
  monitor.begin_window("instant");
  EXPECT_DOUBLE_EQ(monitor.end_window("instant").gpu_carbon_emission_g.at(0), 500.0);
  monitor.begin_window("cancelled");
  EXPECT_TRUE(monitor.end_window("cancelled", {.cancel = true}).gpu_carbon_emission_g.empty());
  expect_error([&] { monitor.end_window("never"); }, ErrorKind::kInvalidArgument, {"never"});
}

TEST(CarbonEmissionMonitor, ProviderErrorPropagatesAndTheWindowIsClosed) {
  class Failing final : public CarbonIntensityProvider {
   public:
    std::vector<CarbonIntensityPiece> intensity_over(double, double) override {
      throw Error(ErrorKind::kUnavailable, "service down");
    }
    double update_period_s() const override { return 0; }
  };
  auto clock = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kT0));
  CarbonEmissionMonitor monitor(fixed_energy_monitor(), std::make_shared<Failing>(), clock);
  monitor.begin_window("w");
  expect_error([&] { monitor.end_window("w"); }, ErrorKind::kUnavailable, {"service down"});
  monitor.begin_window("w");  // closed: may be opened again
  expect_error([&] { CarbonEmissionMonitor(nullptr, std::make_shared<Failing>()); },
               ErrorKind::kInvalidArgument, {"energy monitor"});
}

TEST(CarbonEmissionMonitor, OverARealZeusMonitorOnSimulatedGpus) {
  zeus::testing::SimulatedRig rig(2, "a100");  // the GPUs' own (monotonic) clock
  ZeusMonitorOptions options;
  options.clock = rig.clock;
  options.start_sampler_thread = false;
  auto energy =
      std::make_shared<ZeusMonitor>(rig.set, std::vector<std::shared_ptr<device::Cpu>>{}, options);
  // The wall clock: 30 min before a change of intensity, moved with the GPUs' clock.
  auto wall = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kT0 - 1800));
  auto provider = std::make_shared<OfflineCarbonIntensity>(
      std::vector<OfflineCarbonIntensity::Point>{{kT0 - 3600, 200.0}, {kT0, 600.0}});
  CarbonEmissionMonitor monitor(energy, provider, wall);
  rig.gpus[0]->set_utilization(1.0);
  monitor.begin_window("epoch");
  for (double step_s : {1800.0, 1800.0}) {  // across the change, half an hour on each side
    rig.clock->advance_s(step_s);
    wall->advance_s(step_s);
  }
  const CarbonEmissionMeasurement m = monitor.end_window("epoch");
  EXPECT_DOUBLE_EQ(m.time_s, 3600.0);
  EXPECT_DOUBLE_EQ(m.mean_gco2eq_per_kwh, 400.0);
  for (int gpu : {0, 1}) {
    EXPECT_GT(m.gpu_energy_j.at(gpu), 0.0);
    EXPECT_DOUBLE_EQ(m.gpu_carbon_emission_g.at(gpu),
                     units::kilowatt_hours_from_joules(m.gpu_energy_j.at(gpu)) * 400.0);
  }
  EXPECT_GT(m.gpu_carbon_emission_g.at(0), m.gpu_carbon_emission_g.at(1));  // busy vs idle
}

}  // namespace
}  // namespace zeus::monitor
