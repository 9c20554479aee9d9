// Carbon intensity providers that need no network (constant, offline series), timestamp parsing,
// and the carbon emission monitor. The HTTP provider is in carbon_http.cpp.
#include "zeus/monitor/carbon.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/csv.hpp"
#include "common/text.hpp"
#include "monitor/apportion.hpp"
#include "zeus/common/error.hpp"

namespace zeus::monitor {
namespace {

std::optional<int> digits(std::string_view text, std::size_t at, std::size_t count) {
  if (at + count > text.size()) {
    return std::nullopt;
  }
  int value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') {
      return std::nullopt;
    }
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

}  // namespace

std::optional<double> parse_timestamp(std::string_view text) {
  text = text::trim(text);
  if (text.empty()) {
    return std::nullopt;
  }
  if (text.find('-', 1) == std::string_view::npos) {  // a plain number of seconds
    const std::optional<double> seconds = csv::to_double(text);
    if (seconds && std::isfinite(*seconds)) {
      return seconds;
    }
    return std::nullopt;
  }
  // YYYY-MM-DD[T| ]HH:MM[:SS[.fff]][Z|±HH:MM]
  const auto year = digits(text, 0, 4);
  const auto month = digits(text, 5, 2);
  const auto day = digits(text, 8, 2);
  if (!year || !month || !day || text[4] != '-' || text[7] != '-' || *month < 1 || *month > 12 ||
      *day < 1 || *day > 31) {
    return std::nullopt;
  }
  // A day past the month's end (02-31) rolls into the next month, as <chrono> defines it.
  const std::chrono::sys_days date = std::chrono::year{*year} /
                                     std::chrono::month{static_cast<unsigned>(*month)} /
                                     std::chrono::day{static_cast<unsigned>(*day)};
  double seconds = static_cast<double>(date.time_since_epoch().count()) * 86400.0;
  std::size_t at = 10;
  if (at < text.size()) {
    if (text[at] != 'T' && text[at] != ' ') {
      return std::nullopt;
    }
    const auto hour = digits(text, at + 1, 2);
    const auto minute = digits(text, at + 4, 2);
    if (!hour || !minute || text[at + 3] != ':' || *hour > 23 || *minute > 59) {
      return std::nullopt;
    }
    seconds += *hour * 3600.0 + *minute * 60.0;
    at += 6;
    if (at < text.size() && text[at] == ':') {
      const auto second = digits(text, at + 1, 2);
      if (!second || *second > 60) {
        return std::nullopt;
      }
      seconds += *second;
      at += 3;
      if (at < text.size() && text[at] == '.') {
        std::size_t end = at + 1;
        while (end < text.size() && text[end] >= '0' && text[end] <= '9') {
          ++end;
        }
        if (end == at + 1) {
          return std::nullopt;
        }
        const std::optional<double> fraction = csv::to_double(text.substr(at, end - at));
        seconds += fraction.value_or(0.0);
        at = end;
      }
    }
    if (at < text.size()) {
      if (text[at] == 'Z' && at + 1 == text.size()) {
        at += 1;
      } else if ((text[at] == '+' || text[at] == '-') && at + 6 == text.size() &&
                 text[at + 3] == ':') {
        const auto offset_hour = digits(text, at + 1, 2);
        const auto offset_minute = digits(text, at + 4, 2);
        if (!offset_hour || !offset_minute) {
          return std::nullopt;
        }
        const double offset_s = *offset_hour * 3600.0 + *offset_minute * 60.0;
        seconds += text[at] == '+' ? -offset_s : offset_s;  // local time minus offset is UTC
        at += 6;
      } else {
        return std::nullopt;
      }
    }
  }
  return at == text.size() ? std::optional<double>(seconds) : std::nullopt;
}

double CarbonIntensityProvider::intensity_at(double unix_s) {
  const std::vector<CarbonIntensityPiece> pieces = intensity_over(unix_s, unix_s);
  if (pieces.empty()) {
    throw CarbonIntensityError(ErrorKind::kNotFound,
                               fmt::format("no carbon intensity known at {}", unix_s));
  }
  return pieces.front().gco2eq_per_kwh;
}

// ---- Constant --------------------------------------------------------------------------------

ConstantCarbonIntensity::ConstantCarbonIntensity(double gco2eq_per_kwh)
    : gco2eq_per_kwh_(gco2eq_per_kwh) {
  if (!valid_gco2eq_per_kwh(gco2eq_per_kwh)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("carbon intensity: {} gCO2eq/kWh is not a finite value >= 0 and at "
                            "most {}",
                            gco2eq_per_kwh, kMaxGco2eqPerKwh));
  }
}

std::vector<CarbonIntensityPiece> ConstantCarbonIntensity::intensity_over(double start_unix_s,
                                                                          double end_unix_s) {
  check_rate_interval("carbon intensity", start_unix_s, end_unix_s);
  return {CarbonIntensityPiece{start_unix_s, end_unix_s, gco2eq_per_kwh_}};
}

// ---- Offline series --------------------------------------------------------------------------

OfflineCarbonIntensity::OfflineCarbonIntensity(std::vector<Point> points, std::string source)
    : points_(std::move(points)) {
  if (points_.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: no carbon intensity points (give at least one "
                            "`timestamp,gco2eq_per_kwh` row)",
                            source));
  }
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (!std::isfinite(points_[i].unix_s) || !valid_gco2eq_per_kwh(points_[i].gco2eq_per_kwh)) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: point {}: bad timestamp or intensity", source, i));
    }
    if (i > 0 && points_[i].unix_s <= points_[i - 1].unix_s) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: point {}: timestamps must be strictly increasing", source, i));
    }
  }
}

OfflineCarbonIntensity OfflineCarbonIntensity::from_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::vector<Point> points;
  const bool is_json = path.extension() == ".json";
  if (is_json) {
    const std::string text = text::read_file(path, "carbon intensity file");
    nlohmann::json document;
    try {
      document = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: not valid JSON ({})", name,
                                                           text::json_error_text(error.what())));
    }
    const bool history = document.is_object() && document.contains("history");
    const nlohmann::json& entries = history ? document["history"] : document;
    if (!entries.is_array()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: expected an array of {{\"timestamp\", \"gco2eq_per_kwh\"}} or "
                              "an ElectricityMaps history object",
                              name));
    }
    const char* time_key = history ? "datetime" : "timestamp";
    const char* value_key = history ? "carbonIntensity" : "gco2eq_per_kwh";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const nlohmann::json& entry = entries[i];
      const auto fail = [&](const std::string& what) {
        throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: entry {}: {}", name, i, what));
      };
      if (!entry.is_object() || !entry.contains(time_key) || !entry.contains(value_key)) {
        fail(fmt::format("needs \"{}\" and \"{}\"", time_key, value_key));
      }
      const nlohmann::json& when = entry[time_key];
      std::optional<double> unix_s;
      if (when.is_number()) {
        unix_s = when.get<double>();
      } else if (when.is_string()) {
        unix_s = parse_timestamp(when.get<std::string>());
      }
      if (!unix_s) {
        fail(fmt::format("\"{}\" is not an ISO 8601 time or Unix seconds", time_key));
      }
      if (!entry[value_key].is_number()) {
        fail(fmt::format("\"{}\" is not a number", value_key));
      }
      points.push_back({*unix_s, entry[value_key].get<double>()});
    }
  } else {
    const csv::Reader reader(path, {"timestamp", "gco2eq_per_kwh"}, "carbon intensity file");
    reader.for_each_row([&](int line, const std::vector<std::string_view>& fields) {
      const std::optional<double> unix_s = parse_timestamp(fields[0]);
      if (!unix_s) {
        reader.fail(line, fmt::format("timestamp '{}' is not ISO 8601 (2026-12-01T22:00:00Z) "
                                      "or Unix seconds",
                                      fields[0]));
      }
      const std::optional<double> value = csv::to_double(fields[1]);
      if (!value || !valid_gco2eq_per_kwh(*value)) {
        reader.fail(line, fmt::format("gco2eq_per_kwh '{}' is not a finite number >= 0 and at "
                                      "most {}",
                                      fields[1], kMaxGco2eqPerKwh));
      }
      if (!points.empty() && *unix_s <= points.back().unix_s) {
        reader.fail(line, *unix_s == points.back().unix_s
                              ? "duplicate timestamp (each must appear once)"
                              : "timestamps must be in increasing order (sort the file)");
      }
      points.push_back({*unix_s, *value});
    });
  }
  return OfflineCarbonIntensity(std::move(points), name);
}

std::vector<CarbonIntensityPiece> OfflineCarbonIntensity::intensity_over(double start_unix_s,
                                                                         double end_unix_s) {
  check_rate_interval("carbon intensity", start_unix_s, end_unix_s);
  // The point in force at start: the last one at or before it (the first point when none).
  auto it = std::upper_bound(points_.begin(), points_.end(), start_unix_s,
                             [](double t, const Point& point) { return t < point.unix_s; });
  std::size_t index =
      it == points_.begin() ? 0 : static_cast<std::size_t>(it - points_.begin()) - 1;
  std::vector<CarbonIntensityPiece> pieces;
  double at = start_unix_s;
  while (true) {
    const bool has_next = index + 1 < points_.size();
    const double next = has_next ? points_[index + 1].unix_s : end_unix_s;
    const double piece_end = std::min(std::max(next, at), end_unix_s);
    pieces.push_back({at, piece_end, points_[index].gco2eq_per_kwh});
    if (!has_next || piece_end >= end_unix_s) {
      break;
    }
    at = piece_end;
    ++index;
  }
  return pieces;
}

double OfflineCarbonIntensity::update_period_s() const {
  if (points_.size() < 2) {
    return 0.0;
  }
  return (points_.back().unix_s - points_.front().unix_s) / static_cast<double>(points_.size() - 1);
}

// ---- Monitor ---------------------------------------------------------------------------------

CarbonEmissionMonitor::CarbonEmissionMonitor(std::shared_ptr<WindowMonitor> monitor,
                                             std::shared_ptr<CarbonIntensityProvider> provider,
                                             std::shared_ptr<Clock> wall_clock)
    : monitor_(std::move(monitor)), provider_(std::move(provider)), times_(std::move(wall_clock)) {
  if (!monitor_ || !provider_) {
    throw Error(ErrorKind::kInvalidArgument,
                "CarbonEmissionMonitor needs an energy monitor and a carbon intensity provider");
  }
}

void CarbonEmissionMonitor::begin_window(const std::string& name, BeginWindowOptions options) {
  monitor_->begin_window(name, options);  // throws for a window already open
  times_.begin(name);
}

CarbonEmissionMeasurement CarbonEmissionMonitor::end_window(const std::string& name,
                                                            EndWindowOptions options) {
  const Measurement measurement = monitor_->end_window(name, options);
  const auto [start_unix_s, end_unix_s] = times_.end(name);
  if (options.cancel) {
    return emissions_of(measurement, {CarbonIntensityPiece{start_unix_s, end_unix_s, 0.0}});
  }
  return emissions_of(measurement, provider_->intensity_over(start_unix_s, end_unix_s));
}

CarbonEmissionMeasurement CarbonEmissionMonitor::emissions_of(
    const Measurement& measurement, const std::vector<CarbonIntensityPiece>& pieces) {
  // The time-weighted mean intensity: each device's energy is spread over the window in
  // proportion to time (docs/carbon.md), so every device sees the same mean.
  const double mean = time_weighted_mean(pieces, &CarbonIntensityPiece::gco2eq_per_kwh);
  CarbonEmissionMeasurement result;
  result.time_s = measurement.time_s;
  result.mean_gco2eq_per_kwh = mean;
  energy_at_rate(measurement.gpu_energy_j, mean, result.gpu_energy_j, result.gpu_carbon_emission_g);
  energy_at_rate(measurement.cpu_energy_j, mean, result.cpu_energy_j, result.cpu_carbon_emission_g);
  energy_at_rate(measurement.dram_energy_j, mean, result.dram_energy_j,
                 result.dram_carbon_emission_g);
  return result;
}

}  // namespace zeus::monitor
