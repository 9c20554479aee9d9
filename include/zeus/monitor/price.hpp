// Electricity cost of measurement windows: energy (from a WindowMonitor) times the price of the
// electricity (currency units per kWh) in force while it was used, from a provider.
//
// Providers: a constant, an offline time-of-use tariff file (periods in the tariff's local
// time), or an OpenEI utility rate (zeus/monitor/openei.hpp, converted into such a tariff).
// Times given to providers are Unix seconds (UTC wall time);
// the monitor reads them from an injected wall clock (system_clock() by default). docs/cost.md
// says how the number is computed and documents the tariff format.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/wall_window_times.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::monitor {

// A provider could not give a price (kNotFound, kUnavailable).
class ElectricityPriceError : public Error {
 public:
  using Error::Error;
};

// One stretch of time with one price: [start_unix_s, end_unix_s).
struct ElectricityPricePiece {
  double start_unix_s = 0.0;
  double end_unix_s = 0.0;
  double price_per_kwh = 0.0;
};

class ElectricityPriceProvider {
 public:
  virtual ~ElectricityPriceProvider() = default;
  // Pieces that tile [start_unix_s, end_unix_s] exactly, in time order (one zero-length piece
  // when start == end). Throws Error(kInvalidArgument) when end < start.
  virtual std::vector<ElectricityPricePiece> price_over(double start_unix_s, double end_unix_s) = 0;
  // The currency of the prices ("" when not said: the numbers are then currency-agnostic).
  virtual std::string currency() const = 0;
  // From any thread: ends a lookup of a web service in flight and makes later ones fail at once
  // (what is cached, or the fallback, still answers). For a process that is stopping. A provider
  // that never waits on anything need not do anything.
  virtual void cancel() {}

  // The price in force at `unix_s`.
  double price_at(double unix_s);
};

class ConstantElectricityPrice final : public ElectricityPriceProvider {
 public:
  // Throws Error(kInvalidArgument) for a negative or non-finite price.
  explicit ConstantElectricityPrice(double price_per_kwh, std::string currency = "");
  std::vector<ElectricityPricePiece> price_over(double start_unix_s, double end_unix_s) override;
  std::string currency() const override { return currency_; }
  double value() const { return price_per_kwh_; }

 private:
  double price_per_kwh_;
  std::string currency_;
};

// A time-of-use tariff: periods of the week (optionally only in some months: seasons) in the
// tariff's local time (a fixed UTC offset), each with a price; outside every period the default
// price holds. When periods overlap, the first one listed wins.
class TariffElectricityPrice final : public ElectricityPriceProvider {
 public:
  struct Period {
    unsigned weekdays = 0x7f;  // bit 0 Monday ... bit 6 Sunday
    unsigned months = 0xfff;   // bit 0 January ... bit 11 December (of the local date)
    int start_s = 0;           // seconds after local midnight, [0, 86400)
    int end_s = 86400;         // (start_s, 86400]
    double price_per_kwh = 0.0;
  };
  // Throws Error(kInvalidArgument) for a bad period, price or offset (naming `source`).
  TariffElectricityPrice(std::vector<Period> periods, double default_price_per_kwh,
                         double timezone_offset_hours, std::string currency = "",
                         std::string source = "tariff");
  // The JSON tariff format of docs/cost.md. Throws Error(kInvalidArgument) naming the file and
  // what is wrong in it; text::read_file's errors otherwise.
  static TariffElectricityPrice from_file(const std::filesystem::path& path);
  static TariffElectricityPrice from_json(std::string_view text, const std::string& source);

  std::vector<ElectricityPricePiece> price_over(double start_unix_s, double end_unix_s) override;
  std::string currency() const override { return currency_; }
  const std::vector<Period>& periods() const { return periods_; }
  double default_price_per_kwh() const { return default_price_per_kwh_; }
  double timezone_offset_hours() const { return timezone_offset_hours_; }

 private:
  std::vector<Period> periods_;
  double default_price_per_kwh_;
  double timezone_offset_hours_;
  std::string currency_;
};

// "mon-fri", "sat,sun", "mon", "all" (case-insensitive) -> weekday bits (bit 0 Monday); 0 when
// not one of those.
unsigned parse_weekdays(std::string_view text);
// "jun-sep", "jan,feb,dec", "nov-feb", "all" (case-insensitive) -> month bits (bit 0 January); 0
// when not one of those.
unsigned parse_months(std::string_view text);

struct EnergyCostMeasurement {
  double time_s = 0.0;
  EnergyByIndex gpu_energy_j;
  EnergyByIndex gpu_energy_cost;
  EnergyByIndex cpu_energy_j;
  EnergyByIndex cpu_energy_cost;
  EnergyByIndex dram_energy_j;
  EnergyByIndex dram_energy_cost;
  // The time-weighted mean price over the window (currency per kWh).
  double mean_price_per_kwh = 0.0;
  std::string currency;

  double total_cost() const {
    return gpu_energy_cost.sum() + cpu_energy_cost.sum() + dram_energy_cost.sum();
  }
};

// Windows of a WindowMonitor with their electricity cost: the window's energy per device is
// apportioned to the provider's pieces by time (docs/cost.md). Thread-safe.
class EnergyCostMonitor {
 public:
  EnergyCostMonitor(std::shared_ptr<WindowMonitor> monitor,
                    std::shared_ptr<ElectricityPriceProvider> provider,
                    std::shared_ptr<Clock> wall_clock = nullptr);

  void begin_window(const std::string& name, BeginWindowOptions options = {});
  // Closes the energy monitor's window first (also when the provider then throws).
  EnergyCostMeasurement end_window(const std::string& name, EndWindowOptions options = {});

  static EnergyCostMeasurement cost_of(const Measurement& measurement,
                                       const std::vector<ElectricityPricePiece>& pieces,
                                       const std::string& currency = "");

  const std::shared_ptr<WindowMonitor>& monitor() const { return monitor_; }
  const std::shared_ptr<ElectricityPriceProvider>& provider() const { return provider_; }

 private:
  std::shared_ptr<WindowMonitor> monitor_;
  std::shared_ptr<ElectricityPriceProvider> provider_;
  WallWindowTimes times_;
};

}  // namespace zeus::monitor
