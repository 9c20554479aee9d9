#include "cli/carbon_spec.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/csv.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"

namespace zeus::cli {

std::shared_ptr<monitor::CarbonIntensityProvider> carbon_provider_from_spec(std::string_view spec) {
  if (spec.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "--carbon-intensity is empty; give gCO2eq/kWh (e.g. 350), a time series file "
                "(timestamp,gco2eq_per_kwh) or electricitymaps:ZONE");
  }
  if (const std::optional<double> number = csv::to_double(spec)) {
    const double value = *number;
    if (!monitor::valid_gco2eq_per_kwh(value)) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--carbon-intensity " + std::string(spec) +
                      " is not a carbon intensity: give gCO2eq/kWh from 0 to 100000");
    }
    return std::make_shared<monitor::ConstantCarbonIntensity>(value);
  }
  constexpr std::string_view kElectricityMaps = "electricitymaps:";
  if (spec.starts_with(kElectricityMaps)) {
    monitor::ElectricityMapsOptions options;
    // The emissions are asked for once, when CMD has finished: a hung or trickling service must
    // not hold the summary back for long (the library's deadline is 15 s; this one 6 s).
    options.total_timeout_s = outside_services::kCliFetchTimeoutS;
    options.read_timeout_s = 3.0;
    options.max_attempts = 2;
    options.backoff_initial_s = 0.25;
    options.zone = std::string(spec.substr(kElectricityMaps.size()));
    if (options.zone.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--carbon-intensity electricitymaps: needs a zone, e.g. electricitymaps:DE");
    }
    if (const char* token = std::getenv("ELECTRICITYMAPS_TOKEN")) {
      options.auth_token = token;
    }
    if (const char* url = std::getenv("ELECTRICITYMAPS_URL"); url != nullptr && *url != '\0') {
      options.base_url = url;
    }
    try {
      return std::make_shared<monitor::ElectricityMapsClient>(std::move(options));
    } catch (const Error& error) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--carbon-intensity " + std::string(spec) + ": " + error.what());
    }
  }
  try {
    return std::make_shared<monitor::OfflineCarbonIntensity>(
        monitor::OfflineCarbonIntensity::from_file(std::string(spec)));
  } catch (const Error& error) {
    throw Error(
        error.kind() == ErrorKind::kNotFound ? ErrorKind::kNotFound : ErrorKind::kInvalidArgument,
        "--carbon-intensity: " + std::string(error.what()) +
            " (give gCO2eq/kWh, a time series file or electricitymaps:ZONE)");
  }
}

}  // namespace zeus::cli
