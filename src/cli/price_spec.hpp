// zeus monitor --price SPEC: which electricity price provider (docs/cost.md).
#pragma once

#include <memory>
#include <string_view>

#include "zeus/monitor/price.hpp"

namespace zeus::cli {

// SPEC is a number (a constant price per kWh, currency not said), a JSON tariff file
// (monitor::TariffElectricityPrice::from_file) or
// openei:LABEL@LAT,LON[,sector=NAME][,radius=MILES][,utc_offset=HOURS] (monitor::OpenEIClient;
// the key from OPENEI_API_KEY, the service's URL from OPENEI_URL when set; nothing is fetched
// here). Throws Error(kInvalidArgument, or kNotFound for a missing file) naming --price and what
// is wrong; a missing key is kInvalidArgument.
std::shared_ptr<monitor::ElectricityPriceProvider> price_provider_from_spec(std::string_view spec);

}  // namespace zeus::cli
