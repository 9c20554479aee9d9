#include "cli/price_spec.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/csv.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/monitor/openei.hpp"

namespace zeus::cli {
namespace {

constexpr std::string_view kOpenEI = "openei:";
constexpr std::string_view kOpenEIForm =
    "openei:LABEL@LAT,LON[,sector=Commercial][,radius=MILES][,utc_offset=HOURS]";

[[noreturn]] void bad_openei(std::string_view spec, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("--price {}: {} (give {}; docs/cost.md)", spec, what, kOpenEIForm));
}

// openei:LABEL@LAT,LON[,key=value...] -> the client's options (key from OPENEI_API_KEY, base URL
// from OPENEI_URL). The timeouts are short: the rate is fetched when CMD has ended, and a dead
// service must not hold the summary back for long.
monitor::OpenEIOptions openei_options(std::string_view spec) {
  const std::string_view rest = spec.substr(kOpenEI.size());
  const std::size_t at = rest.rfind('@');
  if (at == std::string_view::npos || at == 0) {
    bad_openei(spec, "needs the rate's label and where, LABEL@LAT,LON");
  }
  monitor::OpenEIOptions options;
  options.label = std::string(text::trim(rest.substr(0, at)));
  const std::vector<std::string_view> fields = text::split_trimmed(rest.substr(at + 1), ',');
  if (fields.size() < 2) {
    bad_openei(spec, "needs a latitude and a longitude after '@'");
  }
  const std::optional<double> latitude = csv::to_double(fields[0]);
  const std::optional<double> longitude = csv::to_double(fields[1]);
  if (!latitude || !longitude) {
    bad_openei(spec,
               fmt::format("'{},{}' is not a latitude,longitude in degrees", fields[0], fields[1]));
  }
  options.latitude = *latitude;
  options.longitude = *longitude;
  for (std::size_t i = 2; i < fields.size(); ++i) {
    const std::size_t equals = fields[i].find('=');
    const std::string_view key =
        equals == std::string_view::npos ? fields[i] : fields[i].substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : fields[i].substr(equals + 1);
    if (key == "sector" && !value.empty()) {
      options.sector = std::string(value);
    } else if (key == "radius" && csv::to_double(value) &&
               std::floor(*csv::to_double(value)) == *csv::to_double(value)) {
      const double miles = *csv::to_double(value);
      if (miles < 0 || miles > 200) {
        bad_openei(spec, fmt::format("radius {} is not from 0 to 200 miles", value));
      }
      options.radius_miles = static_cast<int>(miles);
    } else if (key == "utc_offset" && csv::to_double(value)) {
      options.timezone_offset_hours = *csv::to_double(value);
    } else {
      bad_openei(spec, fmt::format("'{}' is not sector=NAME, radius=MILES (a whole number) or "
                                   "utc_offset=HOURS",
                                   fields[i]));
    }
  }
  const char* key = std::getenv("OPENEI_API_KEY");
  if (key == nullptr || *key == '\0') {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--price {}: set OPENEI_API_KEY to an OpenEI API key (free at "
                            "https://openei.org/services/api/signup)",
                            spec));
  }
  options.api_key = key;
  if (const char* url = std::getenv("OPENEI_URL"); url != nullptr && *url != '\0') {
    options.base_url = url;
  }
  // As for --carbon-intensity: a service that never answers, or trickles, costs at most 6 s (the
  // library's deadline is 30 s).
  options.total_timeout_s = outside_services::kCliFetchTimeoutS;
  options.connect_timeout_s = 2.0;
  options.read_timeout_s = 3.0;
  options.max_attempts = 2;
  options.backoff_initial_s = 0.25;
  return options;
}

}  // namespace

std::shared_ptr<monitor::ElectricityPriceProvider> price_provider_from_spec(std::string_view spec) {
  constexpr std::string_view kHint =
      "give a price per kWh (e.g. 0.15), a JSON tariff file or openei:LABEL@LAT,LON";
  if (spec.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "--price is empty; " + std::string(kHint));
  }
  if (const std::optional<double> price_per_kwh = csv::to_double(spec)) {
    if (!std::isfinite(*price_per_kwh) || *price_per_kwh < 0.0) {
      throw Error(ErrorKind::kInvalidArgument, "--price " + std::string(spec) +
                                                   " is not a price: " + std::string(kHint) +
                                                   " (a finite number >= 0)");
    }
    return std::make_shared<monitor::ConstantElectricityPrice>(*price_per_kwh);
  }
  if (spec.starts_with(kOpenEI)) {
    monitor::OpenEIOptions options = openei_options(spec);
    try {
      return std::make_shared<monitor::OpenEIClient>(std::move(options));
    } catch (const Error& error) {
      // The client's messages name the option, never the key.
      bad_openei(spec, error.what());
    }
  }
  try {
    return std::make_shared<monitor::TariffElectricityPrice>(
        monitor::TariffElectricityPrice::from_file(std::string(spec)));
  } catch (const Error& error) {
    throw Error(
        error.kind() == ErrorKind::kNotFound ? ErrorKind::kNotFound : ErrorKind::kInvalidArgument,
        "--price: " + std::string(error.what()) + " (" + std::string(kHint) + ")");
  }
}

}  // namespace zeus::cli
