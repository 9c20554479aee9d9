// The electricity price providers (constant, time-of-use tariff in local time) and the energy cost
// monitor's window accounting on a manual wall clock.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "monitor/test_support.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/units.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::monitor {
namespace {

using zeus::testing::expect_error;

// 2025-12-01T00:00:00Z, a Monday.
constexpr double kMonday = 1764547200.0;
constexpr double kHour = 3600.0;

// Every window used 2 kWh on GPU 0 and 1 kWh on CPU 0, whatever its length.
std::shared_ptr<zeus::testing::FixedEnergyMonitor> two_kwh_monitor() {
  return std::make_shared<zeus::testing::FixedEnergyMonitor>(
      zeus::testing::energies(2.0, {{0, 7.2e6}}, {{0, 3.6e6}}));
}

// Peak 16:00-21:00 local on weekdays, a weekend rate all day, 0.10 otherwise; UTC-5.
constexpr const char* kTariff = R"({
  "currency": "USD", "timezone_offset_hours": -5,
  "periods": [
    {"days": "mon-fri", "start": "16:00", "end": "21:00", "price_per_kwh": 0.30},
    {"days": "sat,sun", "start": "00:00", "end": "24:00", "price_per_kwh": 0.05}
  ],
  "default_price_per_kwh": 0.10
})";

TEST(ConstantElectricityPrice, OnePieceAnyTime) {
  ConstantElectricityPrice price(0.25, "EUR");
  const auto pieces = price.price_over(kMonday, kMonday + 10 * kHour);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].price_per_kwh, 0.25);
  EXPECT_EQ(price.currency(), "EUR");
  EXPECT_EQ(price.price_at(0.0), 0.25);
  expect_error([] { ConstantElectricityPrice bad(-0.1); }, ErrorKind::kInvalidArgument, {"-0.1"});
  expect_error([] { ConstantElectricityPrice bad(std::nan("")); }, ErrorKind::kInvalidArgument,
               {"finite"});
  expect_error([&] { price.price_over(1.0, 0.0); }, ErrorKind::kInvalidArgument,
               {"end before start"});
}

TEST(TariffElectricityPrice, PeriodsAreInLocalTimeNotUtc) {
  auto tariff = TariffElectricityPrice::from_json(kTariff, "t.json");
  EXPECT_EQ(tariff.currency(), "USD");
  // Monday 16:00 local is 21:00 UTC: at 20:59 UTC it is still off-peak.
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 20.5 * kHour), 0.10);
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 21 * kHour), 0.30);
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 25.5 * kHour), 0.30);  // Monday 20:30 local
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 26 * kHour), 0.10);    // Monday 21:00 local
  // Saturday 00:00 local is Saturday 05:00 UTC; Friday 23:00 local (Saturday 04:00 UTC) is not.
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 5 * 24 * kHour + 4 * kHour), 0.10);
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 5 * 24 * kHour + 5 * kHour), 0.05);
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 7 * 24 * kHour + 4.9 * kHour), 0.05);  // Sun local
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 7 * 24 * kHour + 5 * kHour), 0.10);    // Mon local
}

TEST(TariffElectricityPrice, PiecesTileTheIntervalAndMergeEqualPrices) {
  auto tariff = TariffElectricityPrice::from_json(kTariff, "t.json");
  // Monday 15:00 to 22:00 local (20:00 to 03:00 UTC): off, peak, off.
  const double start = kMonday + 20 * kHour;
  const auto pieces = tariff.price_over(start, start + 7 * kHour);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_DOUBLE_EQ(pieces[0].start_unix_s, start);
  EXPECT_DOUBLE_EQ(pieces[0].end_unix_s, start + kHour);
  EXPECT_DOUBLE_EQ(pieces[1].price_per_kwh, 0.30);
  EXPECT_DOUBLE_EQ(pieces[1].end_unix_s, start + 6 * kHour);
  EXPECT_DOUBLE_EQ(pieces[2].end_unix_s, start + 7 * kHour);
  // Across local midnight Monday -> Tuesday: one off-peak piece (midnight changes nothing).
  const double midnight = kMonday + 29 * kHour;
  EXPECT_EQ(tariff.price_over(midnight - kHour, midnight + kHour).size(), 1u);
  // A whole week: 5 peaks, a weekend; the pieces are contiguous.
  const auto week = tariff.price_over(kMonday, kMonday + 7 * 24 * kHour);
  for (std::size_t i = 1; i < week.size(); ++i) {
    EXPECT_DOUBLE_EQ(week[i].start_unix_s, week[i - 1].end_unix_s);
    EXPECT_NE(week[i].price_per_kwh, week[i - 1].price_per_kwh);
  }
  EXPECT_DOUBLE_EQ(week.back().end_unix_s, kMonday + 7 * 24 * kHour);
  ASSERT_EQ(tariff.price_over(start, start).size(), 1u);
}

TEST(TariffElectricityPrice, FirstListedOverlappingPeriodWinsAndDaysParse) {
  auto tariff = TariffElectricityPrice::from_json(
      R"({"default_price_per_kwh": 1, "periods": [
          {"days": "Sat-Mon", "start": "10:00", "end": "12:00", "price_per_kwh": 3},
          {"start": "00:00", "end": "24:00", "price_per_kwh": 2}]})",
      "o.json");
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 11 * kHour), 3.0);               // Monday (UTC)
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 24 * kHour + 11 * kHour), 2.0);  // Tuesday
  EXPECT_EQ(parse_weekdays("mon-fri"), 0x1fu);
  EXPECT_EQ(parse_weekdays("sat,sun"), 0x60u);
  EXPECT_EQ(parse_weekdays("sun-mon"), 0x41u);
  EXPECT_EQ(parse_weekdays("all"), 0x7fu);
  EXPECT_EQ(parse_weekdays("weekdays"), 0u);
  EXPECT_EQ(parse_weekdays("mon-tue-wed"), 0u);
}

// 2025-06-30T00:00:00Z, a Monday, and 2025-07-01 the day after.
constexpr double kJune30 = 1751241600.0;

TEST(TariffElectricityPrice, MonthsMakeSeasonsInLocalTime) {
  // Summer (jun-sep) weekday peak 14:00-20:00 at 0.40; a winter (nov-feb, wrapping) weekday
  // evening at 0.20; otherwise 0.10. UTC+2.
  auto tariff = TariffElectricityPrice::from_json(
      R"({"default_price_per_kwh": 0.10, "timezone_offset_hours": 2, "periods": [
          {"days": "mon-fri", "months": "jun-sep", "start": "14:00", "end": "20:00",
           "price_per_kwh": 0.40},
          {"days": "mon-fri", "months": "Nov-Feb", "start": "17:00", "end": "20:00",
           "price_per_kwh": 0.20}]})",
      "s.json");
  ASSERT_EQ(tariff.periods().size(), 2u);
  EXPECT_EQ(tariff.periods()[0].months, 0x1e0u);
  EXPECT_EQ(tariff.periods()[1].months, 0xc03u);
  // Monday June 30, 15:00 local (13:00 UTC): summer peak.
  EXPECT_DOUBLE_EQ(tariff.price_at(kJune30 + 13 * kHour), 0.40);
  // The same weekday hour in winter (Monday 2025-12-01, 15:00 local) is off-peak; 18:00 is not.
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 13 * kHour), 0.10);
  EXPECT_DOUBLE_EQ(tariff.price_at(kMonday + 16 * kHour), 0.20);
  // October is in neither season.
  const double october_1 = 1759276800.0;  // 2025-10-01T00:00:00Z, a Wednesday
  EXPECT_DOUBLE_EQ(tariff.price_at(october_1 + 13 * kHour), 0.10);
  // A window across local midnight into July: the pieces still tile it (off-peak across the
  // midnight, then July 1, a Tuesday in summer, from 14:00 local).
  const double july_1_local = kJune30 + 22 * kHour;  // July 1 00:00 at UTC+2
  const auto pieces = tariff.price_over(july_1_local - kHour, july_1_local + 16 * kHour);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_DOUBLE_EQ(pieces[1].start_unix_s, july_1_local + 14 * kHour);
  EXPECT_DOUBLE_EQ(pieces[1].price_per_kwh, 0.40);
  // The month is the local date's: at UTC+2, 2025-09-30T22:30Z is already October 1.
  auto october = TariffElectricityPrice::from_json(
      R"({"default_price_per_kwh": 0.10, "timezone_offset_hours": 2, "periods": [
          {"months": "oct", "start": "00:00", "end": "24:00", "price_per_kwh": 0.50}]})",
      "o.json");
  EXPECT_DOUBLE_EQ(october.price_at(october_1 - 2.5 * kHour), 0.10);
  EXPECT_DOUBLE_EQ(october.price_at(october_1 - 1.5 * kHour), 0.50);
  EXPECT_EQ(parse_months("jan,feb,dec"), 0x803u);
  EXPECT_EQ(parse_months("all"), 0xfffu);
  EXPECT_EQ(parse_months("JUN"), 0x20u);
  EXPECT_EQ(parse_months("summer"), 0u);
  EXPECT_EQ(parse_months("jan-feb-mar"), 0u);
  // A period built in code: months default to the whole year; no month is an error.
  TariffElectricityPrice::Period period;
  EXPECT_EQ(period.months, 0xfffu);
  period.months = 0;
  period.price_per_kwh = 1;
  expect_error([&] { TariffElectricityPrice({period}, 1.0, 0.0, "", "code"); },
               ErrorKind::kInvalidArgument, {"code", "period 0", "no months"});
}

TEST(TariffElectricityPrice, HostileFilesAreNamedWithWhatIsWrong) {
  const zeus::testing::TempDir dir;
  const auto check = [&](const std::string& text, std::initializer_list<std::string> parts) {
    const auto path = dir.path() / "bad.json";
    std::ofstream(path) << text;
    std::vector<std::string> expected{"bad.json"};
    expected.insert(expected.end(), parts.begin(), parts.end());
    expect_error([&] { TariffElectricityPrice::from_file(path); }, ErrorKind::kInvalidArgument,
                 expected);
  };
  check("{", {"not valid JSON"});
  try {
    const auto path = dir.path() / "overflow.json";
    std::ofstream(path) << R"({"default_price_per_kwh": 1e400})";
    TariffElectricityPrice::from_file(path);
    ADD_FAILURE() << "an overflowing number was accepted";
  } catch (const Error& error) {
    // The parser's own words, not its library's exception prefix.
    EXPECT_NE(std::string(error.what()).find("number overflow"), std::string::npos) << error.what();
    EXPECT_EQ(std::string(error.what()).find("json.exception"), std::string::npos) << error.what();
  }
  check("[]", {"JSON object"});
  check(R"({"periods": []})", {"default_price_per_kwh"});
  check(R"({"default_price_per_kwh": -1})", {"default_price_per_kwh", ">= 0"});
  check(R"({"default_price_per_kwh": 1, "timezone_offset_hours": 30})", {"-14 and 14"});
  check(R"({"default_price_per_kwh": 1, "prices": []})", {"unknown key \"prices\""});
  check(R"({"default_price_per_kwh": 1, "periods": {}})", {"not an array"});
  check(R"({"default_price_per_kwh": 1, "periods": [3]})", {"period 0", "not an object"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"days": "someday", "start": "01:00",
        "end": "02:00", "price_per_kwh": 1}]})",
        {"period 0", "days"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"months": "summer", "start": "01:00",
        "end": "02:00", "price_per_kwh": 1}]})",
        {"period 0", "months", "jun-sep"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"start": "25:00", "end": "26:00",
        "price_per_kwh": 1}]})",
        {"period 0", "'25:00'"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"start": "22:00", "end": "06:00",
        "price_per_kwh": 1}]})",
        {"period 0", "midnight"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"start": "01:00", "end": "02:00"}]})",
        {"price_per_kwh"});
  check(R"({"default_price_per_kwh": 1, "periods": [{"start": "01:00", "end": "02:00",
        "price_per_kwh": "cheap"}]})",
        {"price_per_kwh"});
  expect_error([&] { TariffElectricityPrice::from_file(dir.path() / "missing.json"); },
               ErrorKind::kNotFound, {"missing.json"});
}

TEST(EnergyCostMonitor, CostIsEnergyTimesTheTimeWeightedPrice) {
  const auto tariff =
      std::make_shared<TariffElectricityPrice>(TariffElectricityPrice::from_json(kTariff, "t"));
  // Monday 15:00 local.
  auto clock = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kMonday + 20 * kHour));
  EnergyCostMonitor monitor(two_kwh_monitor(), tariff, clock);
  monitor.begin_window("off_peak");
  clock->advance_s(0.5 * kHour);
  EnergyCostMeasurement m = monitor.end_window("off_peak");
  EXPECT_EQ(m.currency, "USD");
  EXPECT_DOUBLE_EQ(m.mean_price_per_kwh, 0.10);
  EXPECT_DOUBLE_EQ(m.gpu_energy_cost.at(0), 0.20);
  EXPECT_DOUBLE_EQ(m.cpu_energy_cost.at(0), 0.10);
  EXPECT_DOUBLE_EQ(m.gpu_energy_j.at(0), 7.2e6);
  EXPECT_TRUE(m.dram_energy_cost.empty());
  EXPECT_DOUBLE_EQ(m.total_cost(), 0.30);
  // 15:30 to 16:30 local: half off-peak, half peak.
  monitor.begin_window("across");
  clock->advance_s(kHour);
  m = monitor.end_window("across");
  EXPECT_DOUBLE_EQ(m.mean_price_per_kwh, 0.20);
  EXPECT_DOUBLE_EQ(m.gpu_energy_cost.at(0), 0.40);
  monitor.begin_window("cancelled");
  EXPECT_TRUE(monitor.end_window("cancelled", {.cancel = true}).gpu_energy_cost.empty());
  expect_error([&] { monitor.end_window("never"); }, ErrorKind::kInvalidArgument, {"never"});
  expect_error([&] { EnergyCostMonitor(nullptr, tariff); }, ErrorKind::kInvalidArgument,
               {"energy monitor"});
}

TEST(EnergyCostMonitor, ProviderErrorPropagatesAndTheWindowIsClosed) {
  class Failing final : public ElectricityPriceProvider {
   public:
    std::vector<ElectricityPricePiece> price_over(double, double) override {
      throw ElectricityPriceError(ErrorKind::kUnavailable, "no rates");
    }
    std::string currency() const override { return ""; }
  };
  auto clock = std::make_shared<ManualClock>(units::nanoseconds_from_seconds(kMonday));
  EnergyCostMonitor monitor(two_kwh_monitor(), std::make_shared<Failing>(), clock);
  monitor.begin_window("w");
  expect_error([&] { monitor.end_window("w"); }, ErrorKind::kUnavailable, {"no rates"});
  monitor.begin_window("w");
  EXPECT_DOUBLE_EQ(EnergyCostMonitor::cost_of(Measurement{}, {{0, 1, 0.5}}, "X").mean_price_per_kwh,
                   0.5);
}

}  // namespace
}  // namespace zeus::monitor
