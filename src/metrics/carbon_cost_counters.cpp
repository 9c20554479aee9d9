// CarbonCostCounters: per-device gCO2eq and cost counters fed by DeviceMetrics' reading thread.
#include "metrics/carbon_cost_counters.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "metrics/exposition.hpp"

namespace zeus::metrics {

const CarbonCostCounters::Names CarbonCostCounters::kCarbonNames = {
    "carbon intensity", "emission", "zeus_carbon_intensity_failures_total"};
const CarbonCostCounters::Names CarbonCostCounters::kPriceNames = {
    "electricity price", "cost", "zeus_electricity_price_failures_total"};

CarbonCostCounters::CarbonCostCounters(std::shared_ptr<monitor::CarbonIntensityProvider> carbon,
                                       std::shared_ptr<monitor::ElectricityPriceProvider> price)
    : carbon_(std::move(carbon)), price_(std::move(price)) {
  if (price_) {
    currency_ = price_->currency();
  }
}

void CarbonCostCounters::track_into(Series& series, const monitor::Measurement& devices) {
  for (const auto& [index, joules] : devices.gpu_energy_j) {
    series.gpu.try_emplace(index, 0.0);
  }
  for (const auto& [index, joules] : devices.cpu_energy_j) {
    series.cpu.try_emplace(index, 0.0);
  }
  for (const auto& [index, joules] : devices.dram_energy_j) {
    series.dram.try_emplace(index, 0.0);
  }
}

void CarbonCostCounters::track(const monitor::Measurement& devices) {
  const std::lock_guard lock(mutex_);
  track_into(emissions_g_, devices);
  track_into(cost_, devices);
}

void CarbonCostCounters::record_failure(Series& series, const Names& names,
                                        const std::string& reason) {
  ++series.failures;
  if (series.streak++ == 0) {
    // Once per streak: a service that is down for an hour must not write a line per read.
    log().warn(
        "metrics: the {} provider failed ({}); each read's energy is left out of the {} "
        "counters until it answers again ({} counts those reads)",
        names.provider, reason, names.counters, names.failures_metric);
  }
}

void CarbonCostCounters::record_success(Series& series, const Names& names) {
  if (series.streak > 0) {
    log().warn(
        "metrics: the {} provider answers again; {} read interval(s) were left out of the "
        "{} counters",
        names.provider, series.streak, names.counters);
  }
  series.streak = 0;
}

void CarbonCostCounters::add(const monitor::Measurement& energy, double start_unix_s,
                             double end_unix_s) {
  // The providers are asked without the lock: an HTTP provider may take seconds, and a scrape
  // renders under this lock.
  std::optional<monitor::CarbonEmissionMeasurement> emissions;
  std::optional<double> intensity;
  std::string carbon_error;
  if (carbon_) {
    try {
      const auto pieces = carbon_->intensity_over(start_unix_s, end_unix_s);
      emissions = monitor::CarbonEmissionMonitor::emissions_of(energy, pieces);
      if (!pieces.empty()) {
        intensity = pieces.back().gco2eq_per_kwh;
      }
    } catch (const std::exception& error) {
      carbon_error = error.what();
    }
  }
  std::optional<monitor::EnergyCostMeasurement> cost;
  std::optional<double> price;
  std::string price_error;
  if (price_) {
    try {
      const auto pieces = price_->price_over(start_unix_s, end_unix_s);
      cost = monitor::EnergyCostMonitor::cost_of(energy, pieces, currency_);
      if (!pieces.empty()) {
        price = pieces.back().price_per_kwh;
      }
    } catch (const std::exception& error) {
      price_error = error.what();
    }
  }

  const auto accumulate = [](Series& series, const monitor::EnergyByIndex& gpu,
                             const monitor::EnergyByIndex& cpu,
                             const monitor::EnergyByIndex& dram) {
    for (const auto& [index, amount] : gpu) {
      series.gpu[index] += amount;
    }
    for (const auto& [index, amount] : cpu) {
      series.cpu[index] += amount;
    }
    for (const auto& [index, amount] : dram) {
      series.dram[index] += amount;
    }
  };
  const std::lock_guard lock(mutex_);
  if (carbon_) {
    track_into(emissions_g_, energy);
    if (emissions) {
      accumulate(emissions_g_, emissions->gpu_carbon_emission_g, emissions->cpu_carbon_emission_g,
                 emissions->dram_carbon_emission_g);
      if (intensity) {
        emissions_g_.current = intensity;
      }
      record_success(emissions_g_, kCarbonNames);
    } else {
      record_failure(emissions_g_, kCarbonNames, carbon_error);
    }
  }
  if (price_) {
    track_into(cost_, energy);
    if (cost) {
      accumulate(cost_, cost->gpu_energy_cost, cost->cpu_energy_cost, cost->dram_energy_cost);
      if (price) {
        cost_.current = price;
      }
      record_success(cost_, kPriceNames);
    } else {
      record_failure(cost_, kPriceNames, price_error);
    }
  }
}

void CarbonCostCounters::cancel() {
  if (carbon_) {
    carbon_->cancel();
  }
  if (price_) {
    price_->cancel();
  }
}

void CarbonCostCounters::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  const auto line = [&out](std::string_view name, const std::string& labels, double value) {
    if (labels.empty()) {
      fmt::format_to(std::back_inserter(out), "{} {}\n", name, format_value(value));
    } else {
      fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, format_value(value));
    }
  };
  // `extra` follows the index label (",currency=..." or nothing).
  const auto per_device = [&](std::string_view name, std::string_view help,
                              const std::map<int, double>& values, const std::string& extra) {
    write_family_header(out, name, "counter", help);
    for (const auto& [index, value] : values) {
      line(name, fmt::format("index=\"{}\"{}", index, extra), value);
    }
  };
  if (carbon_) {
    per_device("zeus_gpu_carbon_emission_grams_total",
               "GPU carbon emissions since the exporter started, in grams of CO2-equivalent: the "
               "energy of each read interval times the carbon intensity over it",
               emissions_g_.gpu, "");
    per_device("zeus_cpu_carbon_emission_grams_total",
               "CPU package carbon emissions since the exporter started, in gCO2eq",
               emissions_g_.cpu, "");
    per_device("zeus_dram_carbon_emission_grams_total",
               "DRAM carbon emissions since the exporter started, in gCO2eq", emissions_g_.dram,
               "");
    write_family_header(out, "zeus_carbon_intensity_gco2eq_per_kwh", "gauge",
                        "Carbon intensity of the electricity now, in gCO2eq per kWh");
    if (emissions_g_.current) {
      line("zeus_carbon_intensity_gco2eq_per_kwh", "", *emissions_g_.current);
    }
    write_family_header(out, kCarbonNames.failures_metric, "counter",
                        "Read intervals left out of the emission counters because the carbon "
                        "intensity provider failed");
    line(kCarbonNames.failures_metric, "", static_cast<double>(emissions_g_.failures));
  }
  if (price_) {
    const std::string currency =
        currency_.empty() ? "" : fmt::format("currency=\"{}\"", escape_label_value(currency_));
    const std::string extra = currency.empty() ? "" : "," + currency;
    per_device("zeus_gpu_energy_cost_total",
               "GPU electricity cost since the exporter started, in the price's currency: the "
               "energy of each read interval times the price over it",
               cost_.gpu, extra);
    per_device("zeus_cpu_energy_cost_total",
               "CPU package electricity cost since the exporter started, in the price's currency",
               cost_.cpu, extra);
    per_device("zeus_dram_energy_cost_total",
               "DRAM electricity cost since the exporter started, in the price's currency",
               cost_.dram, extra);
    write_family_header(out, "zeus_electricity_price_per_kwh", "gauge",
                        "Electricity price now, in the price's currency per kWh");
    if (cost_.current) {
      line("zeus_electricity_price_per_kwh", currency, *cost_.current);
    }
    write_family_header(out, kPriceNames.failures_metric, "counter",
                        "Read intervals left out of the cost counters because the electricity "
                        "price provider failed");
    line(kPriceNames.failures_metric, "", static_cast<double>(cost_.failures));
  }
}

}  // namespace zeus::metrics
