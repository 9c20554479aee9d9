// zeus monitor --carbon-intensity SPEC: which carbon-intensity provider (docs/carbon.md).
#pragma once

#include <memory>
#include <string_view>

#include "zeus/monitor/carbon.hpp"

namespace zeus::cli {

// SPEC is a number (a constant gCO2eq/kWh), "electricitymaps:ZONE" (the ElectricityMaps API,
// token from ELECTRICITYMAPS_TOKEN, base URL from ELECTRICITYMAPS_URL), or a CSV/JSON time
// series file (monitor::OfflineCarbonIntensity::from_file). Throws Error(kInvalidArgument)
// naming --carbon-intensity and what is wrong.
std::shared_ptr<monitor::CarbonIntensityProvider> carbon_provider_from_spec(std::string_view spec);

}  // namespace zeus::cli
