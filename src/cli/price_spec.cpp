#include "price_spec.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include "zeus/common/error.hpp"

namespace zeus::cli {

std::shared_ptr<monitor::ElectricityPriceProvider> price_provider_from_spec(std::string_view spec) {
  constexpr std::string_view kHint = "give a price per kWh (e.g. 0.15) or a JSON tariff file";
  if (spec.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "--price is empty; " + std::string(kHint));
  }
  double price_per_kwh = 0.0;
  const auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), price_per_kwh);
  if (ec == std::errc() && end == spec.data() + spec.size()) {
    if (!std::isfinite(price_per_kwh) || price_per_kwh < 0.0) {
      throw Error(ErrorKind::kInvalidArgument, "--price " + std::string(spec) +
                                                   " is not a price: " + std::string(kHint) +
                                                   " (a finite number >= 0)");
    }
    return std::make_shared<monitor::ConstantElectricityPrice>(price_per_kwh);
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
