// `zeus report`'s carbon emissions and electricity cost of a power timeline: each device's power
// times the rate in force at each instant, integrated over the timeline (docs/carbon.md,
// docs/cost.md, "Where they show up").
#include "cli/report/report_footprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "monitor/apportion.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::cli::report {
namespace {

// At most this many points per cumulative curve (plus the rate's boundaries inside the span).
constexpr std::size_t kMaxFootprintPoints = 1000;
// ElectricityMaps' history endpoint answers the last 24 hours only.
constexpr double kElectricityMapsHistoryS = 24.0 * 3600.0;

int domain_rank(const std::string& domain) {
  if (domain == "device_instant" || domain == "instant") {
    return 0;
  }
  if (domain == "device_average" || domain == "average") {
    return 1;
  }
  if (domain.starts_with("memory")) {
    return 3;  // part of the device's power: taken only when nothing else is there
  }
  return 2;
}

const std::vector<std::pair<double, double>>& samples_of(const PowerSeries& series) {
  // all_points is empty when the reader was not asked to keep them, or the series was short
  // enough never to be downsampled.
  return series.all_points.empty() ? series.points : series.all_points;
}

// The times the cumulative curves are given at: evenly spread over the timeline, plus the rate's
// boundaries inside it (where a curve's slope changes).
std::vector<double> footprint_times(const Timeline& timeline,
                                    const std::vector<const PowerSeries*>& series,
                                    const std::vector<RatePiece>& pieces) {
  if (!(timeline.end_s > timeline.start_s)) {
    return {timeline.start_s};
  }
  std::size_t samples = 2;
  for (const PowerSeries* one : series) {
    samples = std::max(samples, samples_of(*one).size());
  }
  const std::size_t count = std::min(samples, kMaxFootprintPoints);
  std::vector<double> times;
  times.reserve(count + pieces.size());
  for (std::size_t i = 0; i < count; ++i) {
    times.push_back(timeline.start_s + (timeline.end_s - timeline.start_s) *
                                           static_cast<double>(i) / static_cast<double>(count - 1));
  }
  times.back() = timeline.end_s;
  if (pieces.size() <= kMaxFootprintPoints) {
    for (const RatePiece& piece : pieces) {
      if (piece.start_unix_s > timeline.start_s && piece.start_unix_s < timeline.end_s) {
        times.push_back(piece.start_unix_s);
      }
    }
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  return times;
}

Footprint integrate(const Timeline& timeline, const std::vector<RatePiece>& pieces,
                    Footprint footprint) {
  const std::vector<const PowerSeries*> series = device_power_series(timeline);
  footprint.times_unix_s = footprint_times(timeline, series, pieces);
  footprint.total_cumulative.assign(footprint.times_unix_s.size(), 0.0);
  const std::vector<RatePiece> unit_rate{{timeline.start_s, timeline.end_s, 1.0}};
  for (const PowerSeries* one : series) {
    DeviceFootprint device;
    device.device = one->device;
    device.domain = one->domain;
    device.energy_j = cumulative_joule_rate(samples_of(*one), unit_rate, {timeline.end_s}).back();
    device.cumulative = cumulative_joule_rate(samples_of(*one), pieces, footprint.times_unix_s);
    for (std::size_t i = 0; i < device.cumulative.size(); ++i) {
      device.cumulative[i] = units::kilowatt_hours_from_joules(device.cumulative[i]);
      footprint.total_cumulative[i] += device.cumulative[i];
    }
    device.amount = device.cumulative.back();
    footprint.energy_j += device.energy_j;
    footprint.amount += device.amount;
    footprint.devices.push_back(std::move(device));
  }
  for (const RatePiece& piece : pieces) {
    if (footprint.rate_steps.empty() || footprint.rate_steps.back().second != piece.per_kwh) {
      footprint.rate_steps.emplace_back(std::max(piece.start_unix_s, timeline.start_s),
                                        piece.per_kwh);
    }
  }
  footprint.mean_rate = monitor::time_weighted_mean(pieces, &RatePiece::per_kwh);
  return footprint;
}

// The provider's pieces over the timeline as rate pieces (`rate`: the piece's per-kWh field), its
// errors naming the flag, the spec and the file.
template <typename Piece, typename Get>
std::vector<RatePiece> pieces_over(const Timeline& timeline, const std::string& flag,
                                   const std::string& spec, Get get, double Piece::*rate) {
  std::vector<Piece> pieces;
  try {
    pieces = get(timeline.start_s, timeline.end_s);
  } catch (const Error& error) {
    throw Error(error.kind(), fmt::format("{} {}: nothing for the span of {}: {}", flag, spec,
                                          timeline.path.string(), error.what()));
  }
  std::vector<RatePiece> out;
  out.reserve(pieces.size());
  for (const Piece& piece : pieces) {
    out.push_back({piece.start_unix_s, piece.end_unix_s, piece.*rate});
  }
  return out;
}

}  // namespace

std::vector<double> cumulative_joule_rate(const std::vector<std::pair<double, double>>& samples,
                                          const std::vector<RatePiece>& pieces,
                                          const std::vector<double>& at_unix_s) {
  std::vector<double> result(at_unix_s.size(), 0.0);
  std::size_t next_at = 0;
  std::size_t piece = 0;
  double total = 0.0;
  const auto record_up_to = [&](double time) {
    while (next_at < at_unix_s.size() && at_unix_s[next_at] <= time) {
      result[next_at++] = total;
    }
  };
  for (std::size_t i = 0; i + 1 < samples.size(); ++i) {
    const auto [t0, p0] = samples[i];
    const auto [t1, p1] = samples[i + 1];
    record_up_to(t0);
    if (!(t1 > t0)) {
      continue;  // two samples at one instant: no time between them
    }
    const double slope = (p1 - p0) / (t1 - t0);
    double from = t0;
    while (from < t1) {
      while (piece + 1 < pieces.size() && pieces[piece].end_unix_s <= from) {
        ++piece;
      }
      const double rate = pieces.empty() ? 0.0 : pieces[piece].per_kwh;
      double to = t1;
      if (piece + 1 < pieces.size()) {
        to = std::min(to, pieces[piece].end_unix_s);  // > from, by the loop above
      }
      if (next_at < at_unix_s.size()) {
        to = std::min(to, at_unix_s[next_at]);  // > from: every earlier time is recorded
      }
      const double power_from = p0 + slope * (from - t0);
      const double power_to = p0 + slope * (to - t0);
      total += (power_from + power_to) / 2.0 * (to - from) * rate;
      from = to;
      record_up_to(from);
    }
  }
  record_up_to(std::numeric_limits<double>::infinity());
  return result;
}

std::vector<const PowerSeries*> device_power_series(const Timeline& timeline) {
  std::vector<const PowerSeries*> chosen;
  for (const PowerSeries& series : timeline.series) {
    const auto same_device = std::find_if(chosen.begin(), chosen.end(), [&](const auto* other) {
      return other->device == series.device;
    });
    if (same_device == chosen.end()) {
      chosen.push_back(&series);
    } else if (domain_rank(series.domain) < domain_rank((*same_device)->domain)) {
      *same_device = &series;
    }
  }
  return chosen;
}

Footprint carbon_footprint(const Timeline& timeline, monitor::CarbonIntensityProvider& provider,
                           const std::string& spec) {
  Footprint footprint;
  footprint.quantity = "Carbon emissions";
  footprint.unit = "gCO2eq";
  footprint.rate_name = "Carbon intensity";
  footprint.rate_unit = "gCO2eq/kWh";
  footprint.flag = "--carbon-intensity";
  footprint.spec = spec;
  const std::vector<RatePiece> pieces = pieces_over(
      timeline, footprint.flag, spec,
      [&](double start_s, double end_s) { return provider.intensity_over(start_s, end_s); },
      &monitor::CarbonIntensityPiece::gco2eq_per_kwh);
  if (auto* client = dynamic_cast<monitor::ElectricityMapsClient*>(&provider)) {
    const double now_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (timeline.start_s < now_s - kElectricityMapsHistoryS) {
      footprint.notes.push_back(
          "ElectricityMaps' history covers only the last 24 hours and this timeline starts "
          "earlier: its older hours took the nearest known hour's intensity. For an old "
          "timeline, pass a saved series (a CSV or JSON file, docs/carbon.md) instead.");
    }
    if (const std::string reason = client->last_fallback_reason(); !reason.empty()) {
      footprint.notes.push_back("ElectricityMaps: " + reason);
    }
  }
  return integrate(timeline, pieces, std::move(footprint));
}

Footprint cost_footprint(const Timeline& timeline, monitor::ElectricityPriceProvider& provider,
                         const std::string& spec) {
  Footprint footprint;
  footprint.quantity = "Electricity cost";
  footprint.unit = provider.currency();
  footprint.rate_name = "Electricity price";
  footprint.rate_unit = footprint.unit.empty() ? "per kWh" : footprint.unit + "/kWh";
  footprint.flag = "--price";
  footprint.spec = spec;
  const std::vector<RatePiece> pieces = pieces_over(
      timeline, footprint.flag, spec,
      [&](double start_s, double end_s) { return provider.price_over(start_s, end_s); },
      &monitor::ElectricityPricePiece::price_per_kwh);
  return integrate(timeline, pieces, std::move(footprint));
}

}  // namespace zeus::cli::report
