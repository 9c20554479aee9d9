// Electricity price providers (constant, offline time-of-use tariff) and the energy cost monitor.
#include "zeus/monitor/price.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/text.hpp"
#include "monitor/apportion.hpp"

namespace zeus::monitor {
namespace {

constexpr int kDayS = 86400;
constexpr const char* kWeekdayNames[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};
constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};

// The index of `name` (case-insensitive) in `names`; -1 when not there.
int name_index(std::string_view name, const char* const* names, int count) {
  const std::string lower = text::ascii_lower(name);
  for (int i = 0; i < count; ++i) {
    if (lower == names[i]) {
      return i;
    }
  }
  return -1;
}

// "a-b,c" over a cyclic list of names (a week, a year) -> bits; "all" -> every bit; 0 when not
// that. A range may wrap around ("sat-mon", "nov-feb").
unsigned parse_cyclic_names(std::string_view text, const char* const* names, int count) {
  text = text::trim(text);
  constexpr const char* kAll[] = {"all"};
  if (name_index(text, kAll, 1) == 0) {
    return (1u << count) - 1;
  }
  unsigned bits = 0;
  for (const std::string_view item : text::split(text, ',')) {
    const std::vector<std::string_view> range = text::split(item, '-');
    if (range.size() > 2) {
      return 0;
    }
    const int first = name_index(text::trim(range.front()), names, count);
    const int last = name_index(text::trim(range.back()), names, count);
    if (first < 0 || last < 0) {
      return 0;
    }
    for (int index = first;; index = (index + 1) % count) {
      bits |= 1u << index;
      if (index == last) {
        break;
      }
    }
  }
  return bits;
}

// The month (0 January) of the day `day` days after 1970-01-01.
int month_of_day(double day) {
  const std::chrono::year_month_day date{
      std::chrono::sys_days{std::chrono::days{static_cast<std::int64_t>(day)}}};
  return static_cast<int>(static_cast<unsigned>(date.month())) - 1;
}

// "HH:MM" (00:00 to 24:00) -> seconds after midnight; -1 when not that.
int parse_clock_time(std::string_view text) {
  text = text::trim(text);
  if (text.size() != 5 || text[2] != ':') {
    return -1;
  }
  for (const std::size_t i : {0u, 1u, 3u, 4u}) {
    if (text[i] < '0' || text[i] > '9') {
      return -1;
    }
  }
  const int hour = (text[0] - '0') * 10 + (text[1] - '0');
  const int minute = (text[3] - '0') * 10 + (text[4] - '0');
  if (minute > 59 || hour > 24 || (hour == 24 && minute != 0)) {
    return -1;
  }
  return hour * 3600 + minute * 60;
}

}  // namespace

unsigned parse_weekdays(std::string_view text) {
  return parse_cyclic_names(text, kWeekdayNames, 7);
}

unsigned parse_months(std::string_view text) {
  return parse_cyclic_names(text, kMonthNames, 12);
}

double ElectricityPriceProvider::price_at(double unix_s) {
  const std::vector<ElectricityPricePiece> pieces = price_over(unix_s, unix_s);
  if (pieces.empty()) {
    throw ElectricityPriceError(ErrorKind::kNotFound,
                                fmt::format("no electricity price known at {}", unix_s));
  }
  return pieces.front().price_per_kwh;
}

// ---- Constant --------------------------------------------------------------------------------

ConstantElectricityPrice::ConstantElectricityPrice(double price_per_kwh, std::string currency)
    : price_per_kwh_(price_per_kwh), currency_(std::move(currency)) {
  if (!valid_rate(price_per_kwh)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("electricity price: {} per kWh is not a finite value >= 0", price_per_kwh));
  }
}

std::vector<ElectricityPricePiece> ConstantElectricityPrice::price_over(double start_unix_s,
                                                                        double end_unix_s) {
  check_rate_interval("electricity price", start_unix_s, end_unix_s);
  return {ElectricityPricePiece{start_unix_s, end_unix_s, price_per_kwh_}};
}

// ---- Time-of-use tariff ----------------------------------------------------------------------

TariffElectricityPrice::TariffElectricityPrice(std::vector<Period> periods,
                                               double default_price_per_kwh,
                                               double timezone_offset_hours, std::string currency,
                                               std::string source)
    : periods_(std::move(periods)),
      default_price_per_kwh_(default_price_per_kwh),
      timezone_offset_hours_(timezone_offset_hours),
      currency_(std::move(currency)) {
  if (!valid_rate(default_price_per_kwh)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: default_price_per_kwh {} is not a finite number >= 0", source,
                            default_price_per_kwh));
  }
  if (!std::isfinite(timezone_offset_hours) || std::abs(timezone_offset_hours) > 14.0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: timezone_offset_hours {} is not between -14 and 14", source,
                            timezone_offset_hours));
  }
  for (std::size_t i = 0; i < periods_.size(); ++i) {
    const Period& period = periods_[i];
    if (period.weekdays == 0 || period.weekdays > 0x7f) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: period {}: no days (use e.g. \"mon-fri\")", source, i));
    }
    if (period.months == 0 || period.months > 0xfff) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: period {}: no months (use e.g. \"jun-sep\")", source, i));
    }
    if (period.start_s < 0 || period.end_s > kDayS || period.end_s <= period.start_s) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: period {}: start must be before end within one day (split a "
                              "period across midnight into two)",
                              source, i));
    }
    if (!valid_rate(period.price_per_kwh)) {
      throw Error(
          ErrorKind::kInvalidArgument,
          fmt::format("{}: period {}: price_per_kwh is not a finite number >= 0", source, i));
    }
  }
}

TariffElectricityPrice TariffElectricityPrice::from_file(const std::filesystem::path& path) {
  return from_json(text::read_file(path, "tariff file"), path.string());
}

TariffElectricityPrice TariffElectricityPrice::from_json(std::string_view text,
                                                         const std::string& source) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: not valid JSON ({})", source,
                                                         text::json_error_text(error.what())));
  }
  const auto fail = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: {} (docs/cost.md)", source, what));
  };
  if (!document.is_object()) {
    fail("expected a JSON object with \"default_price_per_kwh\" and \"periods\"");
  }
  for (const auto& [key, value] : document.items()) {
    if (key != "currency" && key != "timezone_offset_hours" && key != "periods" &&
        key != "default_price_per_kwh") {
      fail(fmt::format("unknown key \"{}\"", key));
    }
  }
  if (!document.contains("default_price_per_kwh") ||
      !document["default_price_per_kwh"].is_number()) {
    fail("\"default_price_per_kwh\" is missing or not a number");
  }
  std::string currency;
  if (document.contains("currency")) {
    if (!document["currency"].is_string()) {
      fail("\"currency\" is not a string");
    }
    currency = document["currency"].get<std::string>();
  }
  double offset_hours = 0.0;
  if (document.contains("timezone_offset_hours")) {
    if (!document["timezone_offset_hours"].is_number()) {
      fail("\"timezone_offset_hours\" is not a number");
    }
    offset_hours = document["timezone_offset_hours"].get<double>();
  }
  std::vector<Period> periods;
  if (document.contains("periods")) {
    const nlohmann::json& entries = document["periods"];
    if (!entries.is_array()) {
      fail("\"periods\" is not an array");
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const nlohmann::json& entry = entries[i];
      const auto bad = [&](const std::string& what) {
        fail(fmt::format("period {}: {}", i, what));
      };
      if (!entry.is_object()) {
        bad("not an object");
      }
      Period period;
      if (entry.contains("days")) {
        if (!entry["days"].is_string() ||
            (period.weekdays = parse_weekdays(entry["days"].get<std::string>())) == 0) {
          bad("\"days\" is not like \"mon-fri\", \"sat,sun\" or \"all\"");
        }
      }
      if (entry.contains("months")) {
        if (!entry["months"].is_string() ||
            (period.months = parse_months(entry["months"].get<std::string>())) == 0) {
          bad("\"months\" is not like \"jun-sep\", \"jan,feb,dec\" or \"all\"");
        }
      }
      for (const char* key : {"start", "end"}) {
        if (!entry.contains(key) || !entry[key].is_string()) {
          bad(fmt::format("\"{}\" is missing or not a \"HH:MM\" string", key));
        }
        const int at_s = parse_clock_time(entry[key].get<std::string>());
        if (at_s < 0) {
          bad(fmt::format("\"{}\" '{}' is not a time from 00:00 to 24:00", key,
                          entry[key].get<std::string>()));
        }
        (std::string_view(key) == "start" ? period.start_s : period.end_s) = at_s;
      }
      if (!entry.contains("price_per_kwh") || !entry["price_per_kwh"].is_number()) {
        bad("\"price_per_kwh\" is missing or not a number");
      }
      period.price_per_kwh = entry["price_per_kwh"].get<double>();
      periods.push_back(period);
    }
  }
  return TariffElectricityPrice(std::move(periods), document["default_price_per_kwh"].get<double>(),
                                offset_hours, std::move(currency), source);
}

std::vector<ElectricityPricePiece> TariffElectricityPrice::price_over(double start_unix_s,
                                                                      double end_unix_s) {
  check_rate_interval("electricity price", start_unix_s, end_unix_s);
  // The schedule is in the tariff's local time: shift to it, walk local days, shift back.
  const double offset_s = timezone_offset_hours_ * 3600.0;
  std::vector<ElectricityPricePiece> pieces;
  double at = start_unix_s;
  while (true) {
    const double local_s = at + offset_s;
    const double day = std::floor(local_s / kDayS);
    const double second_of_day = local_s - day * kDayS;
    // 1970-01-01 was a Thursday (index 3 with Monday 0).
    const auto weekday = static_cast<int>(std::fmod(std::fmod(day + 3.0, 7.0) + 7.0, 7.0));
    // Months change only at midnight, which is always an edge below.
    const int month = month_of_day(day);
    double price = default_price_per_kwh_;
    bool matched = false;
    double next_edge_s = kDayS;  // the next second of the day at which the price may change
    for (const Period& period : periods_) {
      if ((period.weekdays & (1u << weekday)) == 0 || (period.months & (1u << month)) == 0) {
        continue;
      }
      if (!matched && period.start_s <= second_of_day && second_of_day < period.end_s) {
        price = period.price_per_kwh;
        matched = true;
      }
      for (const int edge_s : {period.start_s, period.end_s}) {
        if (edge_s > second_of_day) {
          next_edge_s = std::min(next_edge_s, static_cast<double>(edge_s));
        }
      }
    }
    const double piece_end = std::min(end_unix_s, at + (next_edge_s - second_of_day));
    if (!pieces.empty() && pieces.back().price_per_kwh == price) {
      pieces.back().end_unix_s = piece_end;  // same price on both sides of an edge
    } else {
      pieces.push_back({at, piece_end, price});
    }
    if (piece_end >= end_unix_s || piece_end <= at) {
      break;
    }
    at = piece_end;
  }
  pieces.back().end_unix_s = end_unix_s;
  return pieces;
}

// ---- Monitor ---------------------------------------------------------------------------------

EnergyCostMonitor::EnergyCostMonitor(std::shared_ptr<WindowMonitor> monitor,
                                     std::shared_ptr<ElectricityPriceProvider> provider,
                                     std::shared_ptr<Clock> wall_clock)
    : monitor_(std::move(monitor)), provider_(std::move(provider)), times_(std::move(wall_clock)) {
  if (!monitor_ || !provider_) {
    throw Error(ErrorKind::kInvalidArgument,
                "EnergyCostMonitor needs an energy monitor and an electricity price provider");
  }
}

void EnergyCostMonitor::begin_window(const std::string& name, BeginWindowOptions options) {
  monitor_->begin_window(name, options);
  times_.begin(name);
}

EnergyCostMeasurement EnergyCostMonitor::end_window(const std::string& name,
                                                    EndWindowOptions options) {
  const Measurement measurement = monitor_->end_window(name, options);
  const auto [start_unix_s, end_unix_s] = times_.end(name);
  const std::string currency = provider_->currency();
  if (options.cancel) {
    return cost_of(measurement, {ElectricityPricePiece{start_unix_s, end_unix_s, 0.0}}, currency);
  }
  return cost_of(measurement, provider_->price_over(start_unix_s, end_unix_s), currency);
}

EnergyCostMeasurement EnergyCostMonitor::cost_of(const Measurement& measurement,
                                                 const std::vector<ElectricityPricePiece>& pieces,
                                                 const std::string& currency) {
  EnergyCostMeasurement result;
  result.time_s = measurement.time_s;
  result.currency = currency;
  result.mean_price_per_kwh = time_weighted_mean(pieces, &ElectricityPricePiece::price_per_kwh);
  const double price = result.mean_price_per_kwh;
  energy_at_rate(measurement.gpu_energy_j, price, result.gpu_energy_j, result.gpu_energy_cost);
  energy_at_rate(measurement.cpu_energy_j, price, result.cpu_energy_j, result.cpu_energy_cost);
  energy_at_rate(measurement.dram_energy_j, price, result.dram_energy_j, result.dram_energy_cost);
  return result;
}

}  // namespace zeus::monitor
