// `zeus report`'s charts and table of a timeline's carbon emissions and electricity cost: the
// cumulative amount per device (and in all) with the rate, stepped, on a second axis.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cli/report/report_footprint.hpp"
#include "cli/report/report_page.hpp"
#include "zeus/common/units.hpp"

namespace zeus::cli::report {
namespace {

// `value` to `digits` significant digits: amounts run from micro-cents to kilograms, so a fixed
// step would lose the small ones.
double significant(double value, int digits) {
  if (value == 0.0 || !std::isfinite(value)) {
    return value;
  }
  const double scale =
      std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(value)))));
  return std::round(value * scale) / scale;
}

// Six significant digits in fixed notation (a table of grams and cents reads badly in
// exponents), trailing zeros dropped.
std::string amount_text(double value) {
  if (value == 0.0 || !std::isfinite(value)) {
    return fmt::format("{}", value);
  }
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  std::string text = fmt::format("{:.{}f}", value, std::clamp(5 - magnitude, 0, 15));
  if (text.find('.') != std::string::npos) {
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') {
      text.pop_back();
    }
  }
  return text;
}

std::string with_unit(const Footprint& footprint) {
  return footprint.unit.empty() ? std::string("currency units") : footprint.unit;
}

json footprint_chart(const Footprint& footprint, const Timeline& timeline, const json& bands) {
  const double origin_s = timeline.start_s;
  json spec{{"kind", "footprint"},
            {"title", fmt::format("{} (cumulative)", footprint.quantity)},
            {"y_title", fmt::format("Cumulative {} ({})",
                                    footprint.quantity == "Carbon emissions" ? "emissions" : "cost",
                                    with_unit(footprint))},
            {"rate_title", fmt::format("{} ({})", footprint.rate_name, footprint.rate_unit)},
            {"unit", footprint.unit},
            {"series", json::array()},
            {"rate", json::array()},
            {"bands", bands},
            {"totals", json::object()},
            {"energy_j", json::object()}};
  const auto curve = [&](const std::vector<double>& cumulative) {
    json points = json::array();
    for (std::size_t i = 0; i < cumulative.size(); ++i) {
      points.push_back(
          {significant(footprint.times_unix_s[i] - origin_s, 9), significant(cumulative[i], 7)});
    }
    return points;
  };
  for (const DeviceFootprint& device : footprint.devices) {
    spec["series"].push_back({{"label", device.device}, {"points", curve(device.cumulative)}});
    spec["totals"][device.device] = device.amount;
    spec["energy_j"][device.device] = device.energy_j;
  }
  if (footprint.devices.size() > 1) {
    spec["series"].push_back({{"label", "total"}, {"points", curve(footprint.total_cumulative)}});
  }
  spec["totals"]["total"] = footprint.amount;
  spec["energy_j"]["total"] = footprint.energy_j;
  spec["mean_rate"] = footprint.mean_rate;
  for (const auto& [time_s, rate] : footprint.rate_steps) {
    spec["rate"].push_back({significant(time_s - origin_s, 9), rate});
  }
  // The last rate holds to the end of the timeline.
  if (!footprint.rate_steps.empty()) {
    spec["rate"].push_back(
        {significant(timeline.end_s - origin_s, 9), footprint.rate_steps.back().second});
  }
  return spec;
}

std::string chart_caption(const Footprint& footprint) {
  std::string domains;
  for (const DeviceFootprint& device : footprint.devices) {
    if (domains.find(device.domain) == std::string::npos) {
      domains += (domains.empty() ? "" : ", ") + device.domain;
    }
  }
  return fmt::format(
      "{} up to each instant, per device{}: its power ({}) times the {} in force at that "
      "instant ({} {}), integrated over time; the {} ({}), stepped, on the right axis.",
      footprint.quantity, footprint.devices.size() > 1 ? " and in all" : "", domains,
      footprint.rate_name == "Carbon intensity" ? "carbon intensity" : "electricity price",
      footprint.flag, footprint.spec,
      footprint.rate_name == "Carbon intensity" ? "intensity" : "price", footprint.rate_unit);
}

// One row per device, then the total: energy, then each footprint's amount.
void totals_table(Page& page, const std::vector<const Footprint*>& footprints) {
  const Footprint& first = *footprints.front();
  page.html(
      "<table class=\"footprint\"><thead><tr><th>device</th><th>power series</th>"
      "<th>energy (J)</th><th>energy (kWh)</th>");
  for (const Footprint* footprint : footprints) {
    page.html(fmt::format("<th>{} ({})</th>", escape_html(footprint->quantity),
                          escape_html(with_unit(*footprint))));
  }
  page.html("</tr></thead><tbody>\n");
  for (std::size_t i = 0; i < first.devices.size(); ++i) {
    const DeviceFootprint& device = first.devices[i];
    page.html(
        fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{:.3f}</td><td "
                    "class=\"num\">{}</td>",
                    escape_html(device.device), escape_html(device.domain), device.energy_j,
                    amount_text(units::kilowatt_hours_from_joules(device.energy_j))));
    for (const Footprint* footprint : footprints) {
      page.html(
          fmt::format("<td class=\"num\">{}</td>", amount_text(footprint->devices.at(i).amount)));
    }
    page.html("</tr>\n");
  }
  page.html(
      fmt::format("<tr class=\"total\"><td>total</td><td></td><td class=\"num\">{:.3f}</td>"
                  "<td class=\"num\">{}</td>",
                  first.energy_j, amount_text(units::kilowatt_hours_from_joules(first.energy_j))));
  for (const Footprint* footprint : footprints) {
    page.html(fmt::format("<td class=\"num\">{}</td>", amount_text(footprint->amount)));
  }
  page.html("</tr>\n</tbody></table>\n<p>");
  for (const Footprint* footprint : footprints) {
    page.html(fmt::format(
        "{} over the timeline: {} {} on average (time-weighted), {} {} per kWh "
        "used (energy-weighted). ",
        escape_html(footprint->rate_name), amount_text(footprint->mean_rate),
        escape_html(footprint->rate_unit),
        amount_text(first.energy_j > 0.0
                        ? footprint->amount / units::kilowatt_hours_from_joules(first.energy_j)
                        : footprint->mean_rate),
        escape_html(with_unit(*footprint))));
  }
  page.html("</p>\n");
  for (const Footprint* footprint : footprints) {
    for (const std::string& note : footprint->notes) {
      page.html(fmt::format("<p class=\"note\">{}</p>\n", escape_html(note)));
    }
  }
}

}  // namespace

void footprint_section(Page& page, const Timeline& timeline, const json& bands) {
  std::vector<const Footprint*> footprints;
  for (const std::optional<Footprint>* footprint : {&timeline.carbon, &timeline.cost}) {
    if (footprint->has_value()) {
      footprints.push_back(&**footprint);
    }
  }
  if (footprints.empty()) {
    return;
  }
  for (const Footprint* footprint : footprints) {
    page.chart(footprint_chart(*footprint, timeline, bands), chart_caption(*footprint));
  }
  totals_table(page, footprints);
}

}  // namespace zeus::cli::report
