// The OpenEI utility-rates client: one query for the rates near a place, the item with the
// user's label, and its energy schedule converted into a TariffElectricityPrice (docs/cost.md).
// Every value read from the answer is checked before it becomes a price, and the API key never
// leaves the request: messages name the service without the query.
#include "zeus/monitor/openei.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/text.hpp"
#include "monitor/apportion.hpp"
#include "monitor/http_fetch.hpp"

namespace zeus::monitor {
namespace {

constexpr const char* kWho = "OpenEI client";
constexpr int kMonths = 12;
constexpr int kHours = 24;
constexpr const char* kMonthNames[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr const char* kSectors[] = {"Residential", "Commercial", "Industrial", "Lighting"};

[[noreturn]] void bad_option(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: {}", kWho, what));
}

// The sector as the service spells it ("commercial" -> "Commercial"); "" when not one of them.
std::string canonical_sector(std::string_view sector) {
  for (const char* known : kSectors) {
    const std::string_view name = known;
    if (text::ascii_iequals(name, sector)) {
      return known;
    }
  }
  return "";
}

// ---- Conversion of one rate item ------------------------------------------------------------

using HourPrices = std::array<double, kHours>;
using YearSchedule = std::array<HourPrices, kMonths>;

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  throw ElectricityPriceError(
      ErrorKind::kUnavailable,
      fmt::format("{}: {} (the service's answer is malformed)", source, what));
}

// The price of each period of "energyratestructure": its first tier's rate + adj.
std::vector<double> period_prices(const nlohmann::json& item, const std::string& source) {
  if (!item.contains("energyratestructure") || item["energyratestructure"].is_null()) {
    throw ElectricityPriceError(
        ErrorKind::kNotFound,
        fmt::format("{}: has no \"energyratestructure\" (no energy charge: a flat or demand-only "
                    "rate cannot be priced per kWh)",
                    source));
  }
  const nlohmann::json& structure = item["energyratestructure"];
  if (!structure.is_array() || structure.empty()) {
    malformed(source, "\"energyratestructure\" is not a non-empty list of periods");
  }
  std::vector<double> prices;
  for (std::size_t i = 0; i < structure.size(); ++i) {
    const nlohmann::json& tiers = structure[i];
    if (!tiers.is_array() || tiers.empty() || !tiers[0].is_object()) {
      malformed(source,
                fmt::format("energyratestructure period {} is not a non-empty list of tiers", i));
    }
    // The first tier: the price of the first kWh of the billing period. Later tiers apply only
    // after a consumption ("max") that one measurement cannot know.
    const nlohmann::json& tier = tiers[0];
    if (!tier.contains("rate") || !tier["rate"].is_number()) {
      malformed(source,
                fmt::format("energyratestructure period {} tier 0 has no number \"rate\"", i));
    }
    double adj = 0.0;
    if (tier.contains("adj") && !tier["adj"].is_null()) {
      if (!tier["adj"].is_number()) {
        malformed(source,
                  fmt::format("energyratestructure period {} tier 0 \"adj\" is not a number", i));
      }
      adj = tier["adj"].get<double>();
    }
    const double rate = tier["rate"].get<double>();
    const double price = rate + adj;
    if (!std::isfinite(rate) || !std::isfinite(adj) || !std::isfinite(price) || price < 0.0) {
      malformed(source, fmt::format("energyratestructure period {} tier 0: rate {} + adj {} is "
                                    "not a finite price >= 0",
                                    i, rate, adj));
    }
    prices.push_back(price);
  }
  return prices;
}

// A 12 × 24 schedule of period indices -> prices per month and hour.
YearSchedule schedule_prices(const nlohmann::json& item, const char* key,
                             const std::vector<double>& prices, const std::string& source) {
  if (!item.contains(key) || item[key].is_null()) {
    throw ElectricityPriceError(
        ErrorKind::kNotFound,
        fmt::format("{}: has no \"{}\" (when each period applies)", source, key));
  }
  const nlohmann::json& months = item[key];
  if (!months.is_array() || months.size() != kMonths) {
    malformed(source, fmt::format("\"{}\" is not a list of 12 months", key));
  }
  YearSchedule schedule{};
  for (int month = 0; month < kMonths; ++month) {
    const nlohmann::json& hours = months[static_cast<std::size_t>(month)];
    if (!hours.is_array() || hours.size() != kHours) {
      malformed(source, fmt::format("\"{}\" {} ({}) is not a list of 24 hours", key, month,
                                    kMonthNames[month]));
    }
    for (int hour = 0; hour < kHours; ++hour) {
      const nlohmann::json& index = hours[static_cast<std::size_t>(hour)];
      if (!index.is_number_integer() || index.get<std::int64_t>() < 0 ||
          index.get<std::int64_t>() >= static_cast<std::int64_t>(prices.size())) {
        malformed(source,
                  fmt::format("\"{}\" {} ({}) hour {}: {} is not a period index from 0 to {}", key,
                              month, kMonthNames[month], hour, index.dump(), prices.size() - 1));
      }
      schedule[month][hour] = prices[index.get<std::size_t>()];
    }
  }
  return schedule;
}

TariffElectricityPrice tariff_from_item(const nlohmann::json& item, double timezone_offset_hours,
                                        const std::string& source) {
  if (!item.is_object()) {
    malformed(source, "the rate is not a JSON object");
  }
  const std::vector<double> prices = period_prices(item, source);
  const std::pair<unsigned, YearSchedule> day_types[] = {
      {0x1fu, schedule_prices(item, "energyweekdayschedule", prices, source)},  // mon-fri
      {0x60u, schedule_prices(item, "energyweekendschedule", prices, source)},  // sat, sun
  };
  // The default price is the one in force for most hours of a year, so that only the other
  // stretches need a period.
  std::map<double, double> hours_at_price;
  for (const auto& [weekdays, schedule] : day_types) {
    const double days = weekdays == 0x1fu ? 5.0 : 2.0;
    for (const HourPrices& month : schedule) {
      for (const double price : month) {
        hours_at_price[price] += days;
      }
    }
  }
  double default_price = 0.0;
  double most_hours = -1.0;
  for (const auto& [price, hours] : hours_at_price) {
    if (hours > most_hours) {
      default_price = price;
      most_hours = hours;
    }
  }
  std::vector<TariffElectricityPrice::Period> periods;
  for (const auto& [weekdays, schedule] : day_types) {
    // Months with the same day share their periods (a season).
    unsigned done = 0;
    for (int month = 0; month < kMonths; ++month) {
      if ((done & (1u << month)) != 0) {
        continue;
      }
      unsigned months = 0;
      for (int other = month; other < kMonths; ++other) {
        if (schedule[other] == schedule[month]) {
          months |= 1u << other;
        }
      }
      done |= months;
      const HourPrices& day = schedule[month];
      for (int start = 0; start < kHours;) {
        int end = start + 1;
        while (end < kHours && day[end] == day[start]) {
          ++end;
        }
        if (day[start] != default_price) {
          periods.push_back({weekdays, months, start * 3600, end * 3600, day[start]});
        }
        start = end;
      }
    }
  }
  return TariffElectricityPrice(std::move(periods), default_price, timezone_offset_hours, "USD",
                                source);
}

}  // namespace

TariffElectricityPrice tariff_from_openei_item(std::string_view item_json,
                                               double timezone_offset_hours,
                                               const std::string& source) {
  nlohmann::json item;
  try {
    item = nlohmann::json::parse(item_json);
  } catch (const nlohmann::json::exception&) {
    malformed(source, "not valid JSON");
  }
  return tariff_from_item(item, timezone_offset_hours, source);
}

// ---- Client ------------------------------------------------------------------------------------

struct OpenEIClient::Impl {
  OpenEIOptions options;
  double timezone_offset_hours = 0.0;
  http::Url base;
  web::FetchOptions fetch_options;
  std::unique_ptr<http::Client> client;  // its cancel() ends a fetch
  std::mutex fetch_mutex;                // one fetch at a time; the others then find its result
  mutable std::mutex mutex;
  std::shared_ptr<TariffElectricityPrice> tariff;  // set once, then only read
  std::optional<std::int64_t> last_failure_ns;
  std::string last_failure;
  ErrorKind last_failure_kind = ErrorKind::kUnavailable;
  int requests = 0;
  std::string fallback_reason;

  // The service without the query: the query holds the API key.
  std::string where() const {
    return fmt::format("OpenEI utility rates service {}/utility_rates", base.base());
  }
  std::string source() const { return fmt::format("OpenEI rate '{}'", options.label); }

  // A service may echo what it was sent; the key must not reach a message.
  std::string redact(std::string text) const {
    for (std::size_t at = text.find(options.api_key); at != std::string::npos;
         at = text.find(options.api_key, at)) {
      text.replace(at, options.api_key.size(), "<api key>");
    }
    return text;
  }

  std::shared_ptr<TariffElectricityPrice> cached() const {
    const std::lock_guard lock(mutex);
    return tariff;
  }

  // The cached tariff, else one fetched now. With `respect_retry_window`, no fetch within
  // retry_after_failure_s of a failed one (then null). Throws fetch()'s errors, recorded first.
  std::shared_ptr<TariffElectricityPrice> tariff_or_fetch(bool respect_retry_window) {
    // Under fetch_mutex: a caller that waited for another's fetch finds its result here.
    const std::lock_guard fetching(fetch_mutex);
    {
      const std::lock_guard lock(mutex);
      if (tariff) {
        return tariff;
      }
      if (respect_retry_window && !web::retry_window_passed(*options.clock, last_failure_ns,
                                                            options.retry_after_failure_s)) {
        return nullptr;
      }
    }
    try {
      auto fetched = std::make_shared<TariffElectricityPrice>(fetch());
      const std::lock_guard lock(mutex);
      tariff = fetched;
      last_failure_ns.reset();
      return fetched;
    } catch (const ElectricityPriceError& error) {
      const std::lock_guard lock(mutex);
      last_failure_ns = options.clock->now_ns();
      last_failure = error.what();
      last_failure_kind = error.kind();
      throw;
    }
  }

  // GET, pick the item with the label, convert it. Throws ElectricityPriceError.
  TariffElectricityPrice fetch() {
    http::Fields params;
    params.emplace_back("version", "latest");
    params.emplace_back("format", "json");
    params.emplace_back("api_key", options.api_key);
    params.emplace_back("lat", fmt::format("{}", options.latitude));
    params.emplace_back("lon", fmt::format("{}", options.longitude));
    params.emplace_back("radius", fmt::format("{}", options.radius_miles));
    params.emplace_back("detail", "full");
    params.emplace_back("sector", options.sector);
    const std::string path = "/utility_rates?" + http::query_string(params);
    nlohmann::json body;
    try {
      body = web::get_json(*client, path, {}, "utility_rates", fetch_options, [this] {
        const std::lock_guard lock(mutex);
        ++requests;
      });
    } catch (const web::FetchFailure& failure) {
      const bool key_refused = failure.http_status == 401 || failure.http_status == 403;
      throw ElectricityPriceError(ErrorKind::kUnavailable,
                                  redact(fmt::format("{}: {}{}", where(), failure.message,
                                                     key_refused ? " (check the API key)" : "")));
    }
    if (body.is_object() && body.contains("error")) {
      const nlohmann::json& error = body["error"];
      const std::string message =
          error.is_object() && error.contains("message") && error["message"].is_string()
              ? error["message"].get<std::string>()
              : error.dump();
      throw ElectricityPriceError(
          ErrorKind::kUnavailable,
          redact(fmt::format("{}: the service says: {}", where(), message)));
    }
    if (!body.is_object() || !body.contains("items") || !body["items"].is_array()) {
      throw ElectricityPriceError(
          ErrorKind::kUnavailable,
          fmt::format("{}: the answer has no \"items\" list (malformed answer)", where()));
    }
    for (const nlohmann::json& item : body["items"]) {
      if (item.is_object() && item.contains("label") && item["label"].is_string() &&
          item["label"].get<std::string>() == options.label) {
        std::string name = source();
        if (item.contains("name") && item["name"].is_string()) {
          name += fmt::format(" (\"{}\"", item["name"].get<std::string>());
          if (item.contains("utility") && item["utility"].is_string()) {
            name += fmt::format(", {}", item["utility"].get<std::string>());
          }
          name += ")";
        }
        return tariff_from_item(item, timezone_offset_hours, redact(name));
      }
    }
    throw ElectricityPriceError(
        ErrorKind::kNotFound,
        fmt::format("{}: no {} rate labelled '{}' within {} miles of {}, {} ({} rates found; the "
                    "label is the id at the end of the rate's openei.org page)",
                    where(), options.sector, options.label, options.radius_miles, options.latitude,
                    options.longitude, body["items"].size()));
  }
};

OpenEIClient::OpenEIClient(OpenEIOptions options) : impl_(std::make_unique<Impl>()) {
  if (!options.clock) {
    options.clock = system_clock();
  }
  if (options.label.empty()) {
    bad_option("give the rate's label (the id at the end of its openei.org page)");
  }
  if (options.api_key.empty()) {
    bad_option("give an API key (free at https://openei.org/services/api/signup)");
  }
  if (!std::isfinite(options.latitude) || std::abs(options.latitude) > 90.0 ||
      !std::isfinite(options.longitude) || std::abs(options.longitude) > 180.0) {
    bad_option(fmt::format("latitude {} and longitude {} must be within ±90 and ±180",
                           options.latitude, options.longitude));
  }
  if (options.radius_miles < 0 || options.radius_miles > 200) {
    bad_option(fmt::format("radius {} miles is not from 0 to 200", options.radius_miles));
  }
  const std::string sector = canonical_sector(options.sector);
  if (sector.empty()) {
    bad_option(fmt::format("sector '{}' is not Residential, Commercial, Industrial or Lighting",
                           options.sector));
  }
  options.sector = sector;
  if (options.timezone_offset_hours && (!std::isfinite(*options.timezone_offset_hours) ||
                                        std::abs(*options.timezone_offset_hours) > 14.0)) {
    bad_option(fmt::format("timezone offset {} hours is not between -14 and 14",
                           *options.timezone_offset_hours));
  }
  if (options.fallback_price_per_kwh && !valid_rate(*options.fallback_price_per_kwh)) {
    bad_option("the fallback price must be a finite value >= 0");
  }
  if (!(options.retry_after_failure_s >= 0.0) || options.max_body_bytes == 0) {
    bad_option("retry_after_failure_s must be >= 0 and max_body_bytes > 0");
  }
  impl_->fetch_options.connect_timeout_s = options.connect_timeout_s;
  impl_->fetch_options.read_timeout_s = options.read_timeout_s;
  impl_->fetch_options.max_attempts = options.max_attempts;
  impl_->fetch_options.backoff_initial_s = options.backoff_initial_s;
  impl_->fetch_options.max_body_bytes = options.max_body_bytes;
  impl_->fetch_options.total_timeout_s = options.total_timeout_s;
  impl_->fetch_options.clock = options.clock;
  web::check_fetch_options(impl_->fetch_options, kWho);
  impl_->base = http::parse_url(options.base_url, {"OpenEI", true});
  impl_->client =
      std::make_unique<http::Client>(impl_->base, web::client_options_of(impl_->fetch_options));
  impl_->timezone_offset_hours = options.timezone_offset_hours.value_or(local_utc_offset_hours());
  impl_->options = std::move(options);
}

OpenEIClient::~OpenEIClient() = default;

void OpenEIClient::cancel() {
  impl_->client->cancel();
}

std::string OpenEIClient::currency() const {
  return "USD";
}

TariffElectricityPrice OpenEIClient::fetch_tariff() {
  return *impl_->tariff_or_fetch(false);
}

std::vector<ElectricityPricePiece> OpenEIClient::price_over(double start_unix_s,
                                                            double end_unix_s) {
  check_rate_interval("electricity price", start_unix_s, end_unix_s);
  Impl& impl = *impl_;
  if (const std::shared_ptr<TariffElectricityPrice> tariff = impl.cached()) {
    return tariff->price_over(start_unix_s, end_unix_s);
  }
  try {
    if (const std::shared_ptr<TariffElectricityPrice> tariff = impl.tariff_or_fetch(true)) {
      return tariff->price_over(start_unix_s, end_unix_s);
    }
  } catch (const ElectricityPriceError&) {
    // Recorded by tariff_or_fetch; the fallback below decides.
  }
  const std::lock_guard lock(impl.mutex);
  if (impl.options.fallback_price_per_kwh) {
    impl.fallback_reason =
        fmt::format("no rate known ({}); used the fallback price", impl.last_failure);
    return {{start_unix_s, end_unix_s, *impl.options.fallback_price_per_kwh}};
  }
  throw ElectricityPriceError(
      impl.last_failure_kind,
      fmt::format("no electricity price known ({}); give a fallback price or use a tariff file",
                  impl.last_failure));
}

int OpenEIClient::requests_sent() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::string OpenEIClient::last_fallback_reason() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->fallback_reason;
}

const OpenEIOptions& OpenEIClient::options() const {
  return impl_->options;
}

}  // namespace zeus::monitor
