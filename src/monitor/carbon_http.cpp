// The ElectricityMaps-compatible carbon intensity client: bounded time per fetch (a deadline on
// all its attempts, however slowly the service answers), a bounded body, a bounded number of
// attempts with backoff on the injected clock, cancel() for a stopping process, a cache by
// hour, and a fallback so that a failing service never blocks or aborts a measurement when any
// value is known (docs/carbon.md).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "monitor/apportion.hpp"
#include "monitor/http_fetch.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/carbon.hpp"

namespace zeus::monitor {
namespace {

constexpr std::int64_t kHourS = 3600;

// The start (Unix s) of the UTC hour holding `unix_s`: the cache's key.
std::int64_t hour_start_unix_s(double unix_s) {
  return static_cast<std::int64_t>(std::floor(unix_s / static_cast<double>(kHourS))) * kHourS;
}

void check_emission_factor_type(const std::string& type) {
  if (type != "direct" && type != "lifecycle") {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("ElectricityMaps client: emission_factor_type '{}' is not 'direct' "
                            "or 'lifecycle'",
                            type));
  }
}

}  // namespace

struct ElectricityMapsClient::Impl {
  ElectricityMapsOptions options;
  http::Url base;  // http://127.0.0.1:8080/v3
  web::FetchOptions fetch_options;
  std::unique_ptr<http::Client> client;  // its cancel() ends a fetch
  mutable std::mutex mutex;
  std::map<std::int64_t, double> cache;  // hour start -> intensity
  std::optional<std::int64_t> last_failure_ns;
  int requests = 0;
  std::string fallback_reason;

  std::string query() const {
    const std::lock_guard lock(mutex);  // estimate and emission_factor_type may change
    http::Fields params;
    if (!options.zone.empty()) {
      params.emplace_back("zone", options.zone);
    } else {
      params.emplace_back("lat", fmt::format("{}", *options.latitude));
      params.emplace_back("lon", fmt::format("{}", *options.longitude));
    }
    params.emplace_back("disableEstimations", options.estimate ? "false" : "true");
    params.emplace_back("emissionFactorType", options.emission_factor_type);
    return http::query_string(params);
  }

  // One GET with retries. Returns the parsed body or throws Error(kUnavailable).
  nlohmann::json get(const std::string& endpoint) {
    const std::string path = "/carbon-intensity/" + endpoint + "?" + query();
    http::Fields headers;
    if (!options.auth_token.empty()) {
      headers.emplace_back("auth-token", options.auth_token);
    }
    try {
      return web::get_json(*client, path, headers, endpoint, fetch_options, [this] {
        const std::lock_guard lock(mutex);
        ++requests;
      });
    } catch (const web::FetchFailure& failure) {
      throw CarbonIntensityError(
          ErrorKind::kUnavailable,
          fmt::format("carbon intensity service {}{}: {}", base.base(), path, failure.message));
    }
  }
};

ElectricityMapsClient::ElectricityMapsClient(ElectricityMapsOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!options.clock) {
    options.clock = system_clock();
  }
  if (options.zone.empty() && (!options.latitude || !options.longitude)) {
    throw Error(ErrorKind::kInvalidArgument,
                "ElectricityMaps client: give a zone (e.g. \"DE\") or both latitude and longitude");
  }
  check_emission_factor_type(options.emission_factor_type);
  impl_->fetch_options.connect_timeout_s = options.connect_timeout_s;
  impl_->fetch_options.read_timeout_s = options.read_timeout_s;
  impl_->fetch_options.max_attempts = options.max_attempts;
  impl_->fetch_options.backoff_initial_s = options.backoff_initial_s;
  impl_->fetch_options.total_timeout_s = options.total_timeout_s;
  impl_->fetch_options.max_body_bytes = options.max_body_bytes;
  impl_->fetch_options.clock = options.clock;
  web::check_fetch_options(impl_->fetch_options, "ElectricityMaps client");
  if (options.max_body_bytes == 0) {
    throw Error(ErrorKind::kInvalidArgument, "ElectricityMaps client: max_body_bytes must be > 0");
  }
  if (options.fallback_gco2eq_per_kwh && !valid_gco2eq_per_kwh(*options.fallback_gco2eq_per_kwh)) {
    throw Error(ErrorKind::kInvalidArgument,
                "ElectricityMaps client: the fallback intensity must be a finite value >= 0 and "
                "at most 100000 gCO2eq/kWh");
  }
  impl_->base = http::parse_url(options.base_url, {"ElectricityMaps", true});
  impl_->client =
      std::make_unique<http::Client>(impl_->base, web::client_options_of(impl_->fetch_options));
  impl_->options = std::move(options);
}

ElectricityMapsClient::~ElectricityMapsClient() = default;

void ElectricityMapsClient::cancel() {
  impl_->client->cancel();
}

double ElectricityMapsClient::fetch_latest() {
  const nlohmann::json body = impl_->get("latest");
  if (!body.is_object() || !body.contains("carbonIntensity") ||
      !body["carbonIntensity"].is_number() ||
      !valid_gco2eq_per_kwh(body["carbonIntensity"].get<double>())) {
    throw CarbonIntensityError(ErrorKind::kNotFound,
                               "carbon intensity service: the latest response has no number "
                               "'carbonIntensity' from 0 to 100000");
  }
  return body["carbonIntensity"].get<double>();
}

std::map<std::int64_t, double> ElectricityMapsClient::fetch_history() {
  const nlohmann::json body = impl_->get("history");
  if (!body.is_object() || !body.contains("history") || !body["history"].is_array()) {
    throw CarbonIntensityError(
        ErrorKind::kNotFound,
        "carbon intensity service: the history response has no 'history' array");
  }
  std::map<std::int64_t, double> hours;  // hour start (Unix s) -> intensity
  for (const nlohmann::json& entry : body["history"]) {
    // Hours the service could not compute come as null: skipped, not an error.
    if (!entry.is_object() || !entry.contains("datetime") || !entry["datetime"].is_string() ||
        !entry.contains("carbonIntensity") || !entry["carbonIntensity"].is_number()) {
      continue;
    }
    const std::optional<double> when = parse_timestamp(entry["datetime"].get<std::string>());
    const double value = entry["carbonIntensity"].get<double>();
    if (when && valid_gco2eq_per_kwh(value)) {
      hours[hour_start_unix_s(*when)] = value;
    }
  }
  return hours;
}

void ElectricityMapsClient::set_query(bool estimate, const std::string& emission_factor_type) {
  check_emission_factor_type(emission_factor_type);
  const std::lock_guard lock(impl_->mutex);
  if (impl_->options.estimate == estimate &&
      impl_->options.emission_factor_type == emission_factor_type) {
    return;
  }
  impl_->options.estimate = estimate;
  impl_->options.emission_factor_type = emission_factor_type;
  // The cached values answered the old question.
  impl_->cache.clear();
  impl_->last_failure_ns.reset();
}

bool ElectricityMapsClient::estimate() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->options.estimate;
}

std::string ElectricityMapsClient::emission_factor_type() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->options.emission_factor_type;
}

std::map<std::int64_t, double> ElectricityMapsClient::cached() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->cache;
}

int ElectricityMapsClient::requests_sent() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::string ElectricityMapsClient::last_fallback_reason() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->fallback_reason;
}

std::vector<CarbonIntensityPiece> ElectricityMapsClient::intensity_over(double start_unix_s,
                                                                        double end_unix_s) {
  check_rate_interval("carbon intensity", start_unix_s, end_unix_s);
  Impl& impl = *impl_;
  const std::int64_t first_hour_unix_s = hour_start_unix_s(start_unix_s);
  const std::int64_t last_hour_unix_s = hour_start_unix_s(end_unix_s);
  const auto missing = [&] {
    const std::lock_guard lock(impl.mutex);
    for (std::int64_t hour_unix_s = first_hour_unix_s; hour_unix_s <= last_hour_unix_s;
         hour_unix_s += kHourS) {
      if (impl.cache.count(hour_unix_s) == 0) {
        return true;
      }
    }
    return false;
  };
  const auto may_fetch = [&] {
    const std::lock_guard lock(impl.mutex);
    return web::retry_window_passed(*impl.options.clock, impl.last_failure_ns,
                                    impl.options.retry_after_failure_s);
  };
  std::string failure;
  ErrorKind failure_kind = ErrorKind::kUnavailable;
  const auto fetch = [&](auto&& body) {
    try {
      body();
    } catch (const Error& error) {
      failure = error.what();
      failure_kind =
          error.kind() == ErrorKind::kNotFound ? ErrorKind::kNotFound : ErrorKind::kUnavailable;
      const std::lock_guard lock(impl.mutex);
      impl.last_failure_ns = impl.options.clock->now_ns();
    }
  };
  if (missing() && may_fetch()) {
    fetch([&] {
      const std::map<std::int64_t, double> hours = fetch_history();
      const std::lock_guard lock(impl.mutex);
      for (const auto& [hour_unix_s, value] : hours) {
        impl.cache[hour_unix_s] = value;
      }
    });
  }
  // The current hour is often not in the history yet: ask for the latest value.
  const std::int64_t now_hour_unix_s = hour_start_unix_s(impl.options.clock->now_s());
  bool want_latest = false;
  {
    const std::lock_guard lock(impl.mutex);
    want_latest = last_hour_unix_s >= now_hour_unix_s && impl.cache.count(now_hour_unix_s) == 0;
  }
  if (want_latest && failure.empty() && may_fetch()) {
    fetch([&] {
      const double value = fetch_latest();
      const std::lock_guard lock(impl.mutex);
      impl.cache[now_hour_unix_s] = value;
    });
  }

  const std::lock_guard lock(impl.mutex);
  std::vector<CarbonIntensityPiece> pieces;
  for (std::int64_t hour_unix_s = first_hour_unix_s; hour_unix_s <= last_hour_unix_s;
       hour_unix_s += kHourS) {
    const double piece_start = std::max(start_unix_s, static_cast<double>(hour_unix_s));
    const double piece_end = std::min(end_unix_s, static_cast<double>(hour_unix_s + kHourS));
    if (piece_end < piece_start || (piece_end == piece_start && !pieces.empty())) {
      continue;
    }
    double value = 0.0;
    const auto found = impl.cache.find(hour_unix_s);
    if (found != impl.cache.end()) {
      value = found->second;
    } else if (!impl.cache.empty()) {
      // The last known value: the nearest earlier hour, else the nearest later one.
      auto next = impl.cache.upper_bound(hour_unix_s);
      value = next == impl.cache.begin() ? next->second : std::prev(next)->second;
      impl.fallback_reason =
          fmt::format("hour {} not known ({}); used the last known value", hour_unix_s,
                      failure.empty() ? "not in the service's answers" : failure);
    } else if (impl.options.fallback_gco2eq_per_kwh) {
      value = *impl.options.fallback_gco2eq_per_kwh;
      impl.fallback_reason = fmt::format("no value known ({}); used the fallback constant",
                                         failure.empty() ? "no data" : failure);
    } else {
      // kNotFound when the service answered without the value (the reference's NotFound
      // error), kUnavailable when it failed.
      throw CarbonIntensityError(
          failure.empty() ? ErrorKind::kUnavailable : failure_kind,
          fmt::format("no carbon intensity known for {} ({}); give a fallback intensity "
                      "or use an offline series",
                      hour_unix_s, failure.empty() ? "the service returned no data" : failure));
    }
    pieces.push_back({piece_start, piece_end, value});
  }
  return pieces;
}

}  // namespace zeus::monitor
