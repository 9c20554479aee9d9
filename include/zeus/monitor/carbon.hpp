// Carbon emissions of measurement windows: energy (from a WindowMonitor) times the carbon
// intensity of the electricity (gCO2eq per kWh) in force while it was used, from a provider.
//
// Providers: a constant, an offline time series (CSV or JSON file), or an ElectricityMaps-style
// web service. Times given to providers are Unix seconds (UTC wall time); the monitor reads them
// from an injected wall clock (system_clock() by default; a ManualClock started at a Unix time in
// tests). docs/carbon.md says how the number is computed.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/wall_window_times.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::monitor {

// A provider could not give an intensity: kind kUnavailable (the service failed: network, timeout,
// HTTP status, malformed body; nothing known to fall back on) or kNotFound (the answer lacks the
// value). A distinct type so that callers (the Python binding) can tell it from energy errors.
class CarbonIntensityError : public Error {
 public:
  using Error::Error;
};

// The largest carbon intensity any provider accepts, in gCO2eq/kWh. The dirtiest grids are below
// 1,500; the bound turns a unit mistake or a corrupt file (1e308) into an error instead of
// infinite emissions.
inline constexpr double kMaxGco2eqPerKwh = 1e5;

// What every provider accepts as an intensity: finite, from 0 to kMaxGco2eqPerKwh.
inline bool valid_gco2eq_per_kwh(double gco2eq_per_kwh) {
  return std::isfinite(gco2eq_per_kwh) && gco2eq_per_kwh >= 0.0 &&
         gco2eq_per_kwh <= kMaxGco2eqPerKwh;
}

// One stretch of time with one intensity: [start_unix_s, end_unix_s).
struct CarbonIntensityPiece {
  double start_unix_s = 0.0;
  double end_unix_s = 0.0;
  double gco2eq_per_kwh = 0.0;
};

class CarbonIntensityProvider {
 public:
  virtual ~CarbonIntensityProvider() = default;
  // Pieces that tile [start_unix_s, end_unix_s] exactly, in time order (one piece when the
  // interval lies in one stretch of the provider; one zero-length piece when start == end).
  // Throws Error(kInvalidArgument) when end < start, and CarbonIntensityError (kUnavailable:
  // HTTP provider, nothing known and no fallback; kNotFound) when no intensity can be given.
  virtual std::vector<CarbonIntensityPiece> intensity_over(double start_unix_s,
                                                           double end_unix_s) = 0;
  // The length of the provider's stretches (0 for a constant), as the reference's update_period.
  virtual double update_period_s() const = 0;
  // From any thread: ends a lookup of a web service in flight and makes later ones fail at once
  // (what is cached, or the fallback, still answers). For a process that is stopping. A provider
  // that never waits on anything need not do anything.
  virtual void cancel() {}

  // The intensity in force at `unix_s`.
  double intensity_at(double unix_s);
};

class ConstantCarbonIntensity final : public CarbonIntensityProvider {
 public:
  // Throws Error(kInvalidArgument) for a negative or non-finite value.
  explicit ConstantCarbonIntensity(double gco2eq_per_kwh);
  std::vector<CarbonIntensityPiece> intensity_over(double start_unix_s, double end_unix_s) override;
  double update_period_s() const override { return 0.0; }
  double value() const { return gco2eq_per_kwh_; }

 private:
  double gco2eq_per_kwh_;
};

// A time series of (timestamp, intensity) points; each value holds from its timestamp to the
// next one's. Before the first point the first value holds, after the last the last one
// (documented: a series that does not cover the run is extended, not an error).
class OfflineCarbonIntensity final : public CarbonIntensityProvider {
 public:
  struct Point {
    double unix_s = 0.0;
    double gco2eq_per_kwh = 0.0;
  };
  // Points must be strictly increasing in time, intensities finite and >= 0, at least one.
  explicit OfflineCarbonIntensity(std::vector<Point> points, std::string source = "series");
  // A CSV file with columns `timestamp,gco2eq_per_kwh` (ISO 8601 UTC or Unix seconds), or, when
  // the file name ends in ".json", a JSON array of {"timestamp", "gco2eq_per_kwh"} objects or an
  // ElectricityMaps history response ({"history": [{"datetime", "carbonIntensity"}]}). Throws
  // Error(kInvalidArgument) naming file:line (CSV) or file and entry (JSON) for a bad row, an
  // unsorted or duplicate timestamp, or an empty series; text::read_file's errors otherwise.
  static OfflineCarbonIntensity from_file(const std::filesystem::path& path);

  std::vector<CarbonIntensityPiece> intensity_over(double start_unix_s, double end_unix_s) override;
  double update_period_s() const override;
  const std::vector<Point>& points() const { return points_; }

 private:
  std::vector<Point> points_;
};

// "2026-12-01T22:00:00Z", "...:00.5Z", "...+02:00", "2026-12-01 22:00:00" (UTC assumed), or a
// plain number (Unix seconds). nullopt when not one of those.
std::optional<double> parse_timestamp(std::string_view text);

struct ElectricityMapsOptions {
  std::string base_url = "https://api.electricitymap.org/v3";  // tests: "http://127.0.0.1:PORT"
  std::string zone;  // e.g. "DE"; when empty, latitude/longitude are sent
  std::optional<double> latitude;
  std::optional<double> longitude;
  std::string auth_token;                       // sent as the `auth-token` header when not empty
  bool estimate = false;                        // disableEstimations = !estimate
  std::string emission_factor_type = "direct";  // or "lifecycle"
  double connect_timeout_s = 2.0;
  double read_timeout_s = 5.0;
  int max_attempts = 3;               // per fetch; 5xx, timeouts and refused connections retry
  double backoff_initial_s = 0.5;     // then doubled per attempt, on the injected clock
  double retry_after_failure_s = 60;  // no new fetch this soon after a failed one
  // A fetch's attempts and pauses together, however slowly the service answers.
  double total_timeout_s = outside_services::kCarbonFetchTimeoutS;
  // A larger answer is a failure (kUnavailable), read no further than that.
  std::size_t max_body_bytes = outside_services::kCarbonMaxBodyBytes;
  // When the service fails: the last known value (nearest earlier hour, else nearest later);
  // when nothing is known yet, this constant; without it, Error(kUnavailable).
  std::optional<double> fallback_gco2eq_per_kwh;
  std::shared_ptr<Clock> clock;  // for backoff sleeps and "now"; system_clock() when null
};

// ElectricityMaps v3 carbon-intensity client: GET <base>/carbon-intensity/latest and
// <base>/carbon-intensity/history (the last 24 hours, hourly). Values are cached by hour (UTC
// hour floor); an hour once known is not fetched again. Thread-safe.
class ElectricityMapsClient final : public CarbonIntensityProvider {
 public:
  // Throws Error(kInvalidArgument) for neither zone nor lat/lon, a bad URL or bad options.
  explicit ElectricityMapsClient(ElectricityMapsOptions options);
  ~ElectricityMapsClient() override;

  std::vector<CarbonIntensityPiece> intensity_over(double start_unix_s, double end_unix_s) override;
  double update_period_s() const override { return 3600.0; }
  void cancel() override;

  // GET latest (no fallback): the current intensity. Throws CarbonIntensityError: kUnavailable
  // for an HTTP or network failure after the retries, kNotFound for a response without the value.
  double fetch_latest();
  // GET history (no fallback): hour start (Unix s) -> intensity. Throws as fetch_latest().
  std::map<std::int64_t, double> fetch_history();
  // Changes what is asked (the reference lets a user set these attributes); a change empties
  // the cache. Throws Error(kInvalidArgument) for a type other than "direct" or "lifecycle".
  void set_query(bool estimate, const std::string& emission_factor_type);
  bool estimate() const;
  std::string emission_factor_type() const;
  // The cached hours.
  std::map<std::int64_t, double> cached() const;
  // How many HTTP requests were sent (attempts, for tests).
  int requests_sent() const;
  // Why the last fallback was used ("" when none was).
  std::string last_fallback_reason() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct CarbonEmissionMeasurement {
  double time_s = 0.0;
  EnergyByIndex gpu_energy_j;
  EnergyByIndex gpu_carbon_emission_g;
  EnergyByIndex cpu_energy_j;
  EnergyByIndex cpu_carbon_emission_g;
  EnergyByIndex dram_energy_j;
  EnergyByIndex dram_carbon_emission_g;
  // The time-weighted mean intensity over the window (gCO2eq/kWh).
  double mean_gco2eq_per_kwh = 0.0;

  double total_carbon_emission_g() const {
    return gpu_carbon_emission_g.sum() + cpu_carbon_emission_g.sum() + dram_carbon_emission_g.sum();
  }
};

// Windows of a WindowMonitor with their carbon emissions. The window's energy per device is
// apportioned to the provider's pieces by time (energy × Σ piece_share × intensity): exact for a
// constant power draw, an approximation otherwise (docs/carbon.md). Thread-safe.
class CarbonEmissionMonitor {
 public:
  CarbonEmissionMonitor(std::shared_ptr<WindowMonitor> monitor,
                        std::shared_ptr<CarbonIntensityProvider> provider,
                        std::shared_ptr<Clock> wall_clock = nullptr);

  void begin_window(const std::string& name, BeginWindowOptions options = {});
  // Closes the window of the energy monitor first (it is closed even when the provider then
  // throws; the provider's error propagates).
  CarbonEmissionMeasurement end_window(const std::string& name, EndWindowOptions options = {});

  // The emissions of `measurement` taken over [start_unix_s, end_unix_s].
  static CarbonEmissionMeasurement emissions_of(const Measurement& measurement,
                                                const std::vector<CarbonIntensityPiece>& pieces);

  const std::shared_ptr<WindowMonitor>& monitor() const { return monitor_; }
  const std::shared_ptr<CarbonIntensityProvider>& provider() const { return provider_; }

 private:
  std::shared_ptr<WindowMonitor> monitor_;
  std::shared_ptr<CarbonIntensityProvider> provider_;
  WallWindowTimes times_;
};

}  // namespace zeus::monitor
