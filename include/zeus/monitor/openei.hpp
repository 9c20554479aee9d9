// Electricity prices from an OpenEI-compatible utility-rates service (the U.S. Utility Rate
// Database): GET <base_url>/utility_rates?version=latest&format=json&detail=full&lat=&lon=&
// radius=&sector=&api_key=, the item whose "label" is the one asked for, and its energy rate
// structure with the weekday/weekend schedules (12 months × 24 hours of period indices in the
// utility's local time). The rate is converted once into a TariffElectricityPrice, which then
// does all the time-of-use arithmetic. docs/cost.md says what is asked, how the schedule becomes
// prices and what happens when the service fails.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::monitor {

struct OpenEIOptions {
  std::string base_url = "https://api.openei.org";  // GET <base_url>/utility_rates?...
  double latitude = 0.0;
  double longitude = 0.0;
  std::string label;                   // the rate's "label" (required)
  std::string sector = "Residential";  // Residential, Commercial, Industrial, Lighting
  int radius_miles = 0;                // 0..200
  std::string api_key;                 // required by the service; never hard-coded
  // The utility's local time, as hours east of UTC; default: this machine's current UTC offset.
  std::optional<double> timezone_offset_hours;
  double connect_timeout_s = 2.0;
  double read_timeout_s = 10.0;
  int max_attempts = 3;                 // per fetch; 5xx, timeouts and refused connections retry
  double backoff_initial_s = 0.5;       // then doubled per attempt, on the injected clock
  double retry_after_failure_s = 60.0;  // no new fetch this soon after a failed one
  // A fetch's attempts and pauses together, however slowly the service answers.
  double total_timeout_s = outside_services::kPriceFetchTimeoutS;
  // When the service fails and nothing is cached: this constant; without it,
  // ElectricityPriceError(kUnavailable).
  std::optional<double> fallback_price_per_kwh;
  std::shared_ptr<Clock> clock;  // sleeps/now; system_clock() when null
  // A larger answer is a failure (kUnavailable), read no further than that.
  std::size_t max_body_bytes = outside_services::kPriceMaxBodyBytes;
};

// The OpenEI client. The tariff is fetched on first use and cached for the client's lifetime
// (a utility's rate changes rarely; a restart picks up a new one). Thread-safe.
class OpenEIClient final : public ElectricityPriceProvider {
 public:
  // Throws Error(kInvalidArgument) for bad options (naming the option).
  explicit OpenEIClient(OpenEIOptions options);
  ~OpenEIClient() override;

  std::vector<ElectricityPricePiece> price_over(double start_unix_s, double end_unix_s) override;
  std::string currency() const override;  // "USD" (OpenEI's rates are US utilities)
  void cancel() override;

  // Fetches the rate (no fallback; cached after the first success) and returns it as a tariff.
  // Throws ElectricityPriceError: kUnavailable (HTTP/network/timeout/5xx after retries,
  // malformed JSON or a malformed rate in it, a body over the size limit), kNotFound (no item
  // with the label, or it lacks the schedule/structure). The API key is never in a message.
  TariffElectricityPrice fetch_tariff();
  // How many HTTP requests were sent (attempts, for tests).
  int requests_sent() const;
  // Why the last fallback was used ("" when none was).
  std::string last_fallback_reason() const;
  const OpenEIOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Converts one OpenEI rate item (the JSON object of one "items" entry) into a tariff: per month
// × day type × hour, the price is the first tier's rate + adj. Throws ElectricityPriceError
// (kNotFound for a missing structure/schedule, kUnavailable for a malformed one) naming `source`
// and what is wrong.
TariffElectricityPrice tariff_from_openei_item(std::string_view item_json,
                                               double timezone_offset_hours,
                                               const std::string& source);

}  // namespace zeus::monitor
