// The carbon-emission and electricity-cost counters of DeviceMetrics (internal): every read's
// energy since the previous read, priced at the provider's intensity or price over that interval.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::metrics {

class CarbonCostCounters {
 public:
  // Either provider may be null (its families are then not rendered).
  CarbonCostCounters(std::shared_ptr<monitor::CarbonIntensityProvider> carbon,
                     std::shared_ptr<monitor::ElectricityPriceProvider> price);

  // Makes the devices of `devices` appear at 0 before their first interval (no provider call).
  void track(const monitor::Measurement& devices);
  // Adds the emissions and cost of `energy` (per device, used over [start_unix_s, end_unix_s]).
  // Calls the providers, which may block on HTTP: call it from the reading thread, never from a
  // scrape. A provider that throws leaves this interval out of its counters (counted as a
  // failure, logged once per streak of failures) and never propagates.
  void add(const monitor::Measurement& energy, double start_unix_s, double end_unix_s);
  // Appends the families of the providers given.
  void render(std::string& out) const;
  // From any thread: ends a provider's lookup in flight and every later one (a stopping process).
  void cancel();

 private:
  // Accumulated amounts per device family and index, and the state of one provider.
  struct Series {
    std::map<int, double> gpu, cpu, dram;
    std::optional<double> current;  // the rate in force at the end of the last counted interval
    std::uint64_t failures = 0;     // intervals left out
    std::uint64_t streak = 0;       // consecutive failures now (0: the provider answers)
  };
  // What the log lines and the failures family call one provider's series.
  struct Names {
    const char* provider;
    const char* counters;
    const char* failures_metric;
  };
  static const Names kCarbonNames;
  static const Names kPriceNames;
  static void track_into(Series& series, const monitor::Measurement& devices);
  static void record_failure(Series& series, const Names& names, const std::string& reason);
  static void record_success(Series& series, const Names& names);

  std::shared_ptr<monitor::CarbonIntensityProvider> carbon_;
  std::shared_ptr<monitor::ElectricityPriceProvider> price_;
  std::string currency_;  // the price provider's, read once
  mutable std::mutex mutex_;
  Series emissions_g_;
  Series cost_;
};

}  // namespace zeus::metrics
