// `zeus report --carbon-intensity SPEC --price SPEC`: a power timeline's carbon emissions and
// electricity cost, integrated sample by sample (report_footprint.cpp), and the page's charts and
// table of them (report_footprint_page.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/report/report_model.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::cli::report {

// One stretch [start_unix_s, end_unix_s) of a rate (gCO2eq/kWh, price/kWh): a provider's piece.
struct RatePiece {
  double start_unix_s = 0.0;
  double end_unix_s = 0.0;
  double per_kwh = 0.0;
};

// ∫ power × rate dt (joules × rate per kWh, so J·rate; divide by 3.6e6 for the amount) from the
// first sample up to each of `at_unix_s` (ascending). Power is linear between consecutive
// `samples` ((Unix s, W), ascending) and zero outside them; the rate is that of the piece in
// force at each instant (pieces in time order; before the first piece the first one's rate holds,
// after the last the last one's). Each stretch between samples is cut at the piece boundaries, so
// the result is exact for piecewise-linear power.
std::vector<double> cumulative_joule_rate(const std::vector<std::pair<double, double>>& samples,
                                          const std::vector<RatePiece>& pieces,
                                          const std::vector<double>& at_unix_s);

// The power series a device's footprint integrates: device_instant (or instant), else
// device_average (or average), else the device's first series; memory_average is part of the
// device's power and never added to it. One per device, in order of first appearance.
std::vector<const PowerSeries*> device_power_series(const Timeline& timeline);

// The timeline's emissions, from one intensity_over call over its span. Throws what the provider
// throws, with `spec` named.
Footprint carbon_footprint(const Timeline& timeline, monitor::CarbonIntensityProvider& provider,
                           const std::string& spec);
// Its electricity cost, from one price_over call over its span.
Footprint cost_footprint(const Timeline& timeline, monitor::ElectricityPriceProvider& provider,
                         const std::string& spec);

}  // namespace zeus::cli::report
