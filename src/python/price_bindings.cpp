// zeus_cpp._zeus: the electricity price providers and the energy cost monitor behind
// zeus_cpp.monitor.price (which adds the reference's names and its measurement dataclass).
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "footprint.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/monitor/openei.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::python {
namespace {

using monitor::ElectricityPricePiece;
using monitor::ElectricityPriceProvider;

constexpr double kHourS = 3600.0;

// The reference's rate data ({"energy_rate_structure": [period][tier]{"rate", "adj"?},
// "energy_weekday_schedule" / "energy_weekend_schedule": 12 months x 24 hours of period
// indices, in local time}) as a tariff, by the OpenEI client's own conversion (the first tier's
// rate plus its adj). Whatever is wrong in it is the reference's "not found" (it could not be
// turned into prices), not a failed service.
monitor::TariffElectricityPrice tariff_from_reference_rates(const py::object& rates,
                                                            double offset_hours) {
  const char* const source = "get_current_electricity_prices()";
  if (!py::isinstance<py::dict>(rates)) {
    throw monitor::ElectricityPriceError(
        ErrorKind::kNotFound,
        std::string(source) + ": returned " +
            py::str(py::type::of(rates).attr("__name__")).cast<std::string>() +
            ", not the reference's dict of rate data (docs/cost.md)");
  }
  const py::dict data = rates.cast<py::dict>();
  py::dict item;
  const std::pair<const char*, const char*> keys[] = {
      {"energy_rate_structure", "energyratestructure"},
      {"energy_weekday_schedule", "energyweekdayschedule"},
      {"energy_weekend_schedule", "energyweekendschedule"},
  };
  for (const auto& [reference_key, openei_key] : keys) {
    if (!data.contains(reference_key)) {
      throw monitor::ElectricityPriceError(
          ErrorKind::kNotFound,
          std::string(source) + ": no \"" + reference_key + "\" (docs/cost.md)");
    }
    item[openei_key] = data[reference_key];
  }
  std::string text;
  try {
    text = py::module_::import("json").attr("dumps")(item).cast<std::string>();
  } catch (const py::error_already_set& error) {
    throw monitor::ElectricityPriceError(
        ErrorKind::kNotFound,
        std::string(source) + ": not plain lists, dicts and numbers (" + error.what() + ")");
  }
  try {
    return monitor::tariff_from_openei_item(text, offset_hours, source);
  } catch (const monitor::ElectricityPriceError& error) {
    throw monitor::ElectricityPriceError(ErrorKind::kNotFound, error.what());
  }
}

// A provider written in Python: it overrides price_over(start, end) -> [(start, end, price)],
// or implements the reference's get_current_electricity_prices() (OpenEI-shaped rate data in
// the provider's local time: its `timezone_offset_hours` attribute, else this machine's zone).
class PyElectricityPriceProvider : public ElectricityPriceProvider {
 public:
  std::vector<ElectricityPricePiece> price_over(double start_unix_s, double end_unix_s) override {
    const py::gil_scoped_acquire gil;
    if (const py::function over = py::get_override(this, "price_over")) {
      std::vector<ElectricityPricePiece> pieces = pieces_from_python<ElectricityPricePiece>(
          over(start_unix_s, end_unix_s), "price_over", start_unix_s, end_unix_s);
      if (pieces.empty()) {
        throw monitor::ElectricityPriceError(ErrorKind::kNotFound,
                                             "price_over() returned no price for the window");
      }
      return pieces;
    }
    if (const py::function current = py::get_override(this, "get_current_electricity_prices")) {
      const py::object self = py::cast(static_cast<ElectricityPriceProvider*>(this));
      double offset_hours = local_utc_offset_hours();
      if (py::hasattr(self, "timezone_offset_hours") &&
          !self.attr("timezone_offset_hours").is_none()) {
        offset_hours = self.attr("timezone_offset_hours").cast<double>();
      }
      return tariff_from_reference_rates(current(), offset_hours)
          .price_over(start_unix_s, end_unix_s);
    }
    throw py::type_error(
        "an ElectricityPriceProvider subclass must implement price_over(start, end) or "
        "get_current_electricity_prices()");
  }
  std::string currency() const override {
    const py::gil_scoped_acquire gil;
    if (const py::function currency = py::get_override(this, "currency")) {
      return currency().cast<std::string>();
    }
    return "";  // a Python provider that does not say
  }
};

py::list pieces_to_python(const std::vector<ElectricityPricePiece>& pieces) {
  py::list out;
  for (const ElectricityPricePiece& piece : pieces) {
    out.append(py::make_tuple(piece.start_unix_s, piece.end_unix_s, piece.price_per_kwh));
  }
  return out;
}

// The offset in which to describe `provider` as the reference's 12 x 24 schedules.
double schedule_offset_hours(const ElectricityPriceProvider& provider) {
  if (const auto* tariff = dynamic_cast<const monitor::TariffElectricityPrice*>(&provider)) {
    return tariff->timezone_offset_hours();
  }
  if (const auto* client = dynamic_cast<const monitor::OpenEIClient*>(&provider)) {
    return client->options().timezone_offset_hours.value_or(local_utc_offset_hours());
  }
  return local_utc_offset_hours();
}

// Any provider as the reference's rate data: its price at the middle of each local hour of the
// first Wednesday (weekdays) and the first Saturday (weekends) of each month of this year, one
// period per distinct price. The reference's shape has no finer days than weekday/weekend.
py::dict reference_rates_of(ElectricityPriceProvider& provider) {
  constexpr int kMonths = 12;
  constexpr int kHours = 24;
  // [month][0 weekday, 1 weekend][hour], read without the GIL (the provider may be online).
  std::vector<double> grid(static_cast<std::size_t>(kMonths) * 2 * kHours);
  without_gil([&] {
    using namespace std::chrono;
    const double offset_hours = schedule_offset_hours(provider);
    const auto now_local = floor<seconds>(system_clock::now()) +
                           seconds{static_cast<long long>(offset_hours * kHourS)};
    const year this_year = year_month_day{floor<days>(now_local)}.year();
    for (int m = 0; m < kMonths; ++m) {
      const year_month ym = this_year / std::chrono::month{static_cast<unsigned>(m + 1)};
      for (int kind = 0; kind < 2; ++kind) {
        const sys_days day{ym / (kind == 0 ? Wednesday[1] : Saturday[1])};
        const auto day_start_s = static_cast<double>(sys_seconds{day}.time_since_epoch().count());
        for (int hour = 0; hour < kHours; ++hour) {
          const double local_s = day_start_s + hour * kHourS + kHourS / 2.0;
          grid[static_cast<std::size_t>((m * 2 + kind) * kHours + hour)] =
              provider.price_at(local_s - offset_hours * kHourS);
        }
      }
    }
  });
  std::vector<double> prices;
  py::list schedules[2];
  for (int m = 0; m < kMonths; ++m) {
    for (int kind = 0; kind < 2; ++kind) {
      py::list month_indices;
      for (int hour = 0; hour < kHours; ++hour) {
        const double price = grid[static_cast<std::size_t>((m * 2 + kind) * kHours + hour)];
        std::size_t index = 0;
        while (index < prices.size() && prices[index] != price) {
          ++index;
        }
        if (index == prices.size()) {
          prices.push_back(price);
        }
        month_indices.append(index);
      }
      schedules[kind].append(month_indices);
    }
  }
  py::list structure;
  for (const double price : prices) {
    py::dict tier;
    tier["rate"] = price;
    py::list tiers;
    tiers.append(tier);
    structure.append(tiers);
  }
  py::dict out;
  out["energy_rate_structure"] = structure;
  out["energy_weekday_schedule"] = schedules[0];
  out["energy_weekend_schedule"] = schedules[1];
  return out;
}

py::list periods_to_python(const monitor::TariffElectricityPrice& tariff) {
  py::list out;
  for (const auto& period : tariff.periods()) {
    py::dict item;
    item["weekdays"] = period.weekdays;
    item["months"] = period.months;
    item["start_s"] = period.start_s;
    item["end_s"] = period.end_s;
    item["price_per_kwh"] = period.price_per_kwh;
    out.append(item);
  }
  return out;
}

}  // namespace

void bind_price(py::module_& module) {
  py::class_<ElectricityPriceProvider, PyElectricityPriceProvider,
             std::shared_ptr<ElectricityPriceProvider>>(
      module, "ElectricityPriceProvider",
      "Electricity price (currency per kWh) over time. Subclass it in Python with "
      "price_over(start, end) or the reference's get_current_electricity_prices().")
      .def(py::init<>())
      .def(
          "price_over",
          [](ElectricityPriceProvider& self, double start, double end) {
            return pieces_to_python(without_gil([&] { return self.price_over(start, end); }));
          },
          py::arg("start"), py::arg("end"),
          "[(start, end, price per kWh)] tiling [start, end] (Unix seconds).")
      .def(
          "price_at",
          [](ElectricityPriceProvider& self, double when) {
            return without_gil([&] { return self.price_at(when); });
          },
          py::arg("when"), "The price per kWh in force at `when` (Unix seconds).")
      .def("currency", &ElectricityPriceProvider::currency,
           "The currency of the prices (\"\" when not said).")
      .def("get_current_electricity_prices", &reference_rates_of,
           "The prices as the reference's rate data (energy_rate_structure, "
           "energy_weekday_schedule, energy_weekend_schedule: 12 months x 24 local hours).");

  py::class_<monitor::ConstantElectricityPrice, ElectricityPriceProvider,
             std::shared_ptr<monitor::ConstantElectricityPrice>>(module, "ConstantElectricityPrice")
      .def(py::init<double, std::string>(), py::arg("price_per_kwh"), py::arg("currency") = "")
      .def_property_readonly("value", &monitor::ConstantElectricityPrice::value);

  py::class_<monitor::TariffElectricityPrice, ElectricityPriceProvider,
             std::shared_ptr<monitor::TariffElectricityPrice>>(module, "TariffElectricityPrice")
      .def(py::init([](const py::list& periods, double default_price_per_kwh,
                       double timezone_offset_hours, const std::string& currency) {
             // The file's shape, read by the file's parser (one set of checks and messages).
             py::dict document;
             document["periods"] = periods;
             document["default_price_per_kwh"] = default_price_per_kwh;
             document["timezone_offset_hours"] = timezone_offset_hours;
             document["currency"] = currency;
             const std::string text =
                 py::module_::import("json").attr("dumps")(document).cast<std::string>();
             return std::make_shared<monitor::TariffElectricityPrice>(
                 monitor::TariffElectricityPrice::from_json(text, "TariffElectricityPrice"));
           }),
           py::arg("periods"), py::arg("default_price_per_kwh"),
           py::arg("timezone_offset_hours") = 0.0, py::arg("currency") = "")
      .def_static(
          "from_file",
          [](const std::string& path) {
            return std::make_shared<monitor::TariffElectricityPrice>(
                monitor::TariffElectricityPrice::from_file(path));
          },
          py::arg("path"))
      .def_static(
          "from_json",
          [](const std::string& text, const std::string& source) {
            return std::make_shared<monitor::TariffElectricityPrice>(
                monitor::TariffElectricityPrice::from_json(text, source));
          },
          py::arg("text"), py::arg("source") = "tariff")
      .def("periods", &periods_to_python)
      .def_property_readonly("default_price_per_kwh",
                             &monitor::TariffElectricityPrice::default_price_per_kwh)
      .def_property_readonly("timezone_offset_hours",
                             &monitor::TariffElectricityPrice::timezone_offset_hours);

  py::class_<monitor::OpenEIClient, ElectricityPriceProvider,
             std::shared_ptr<monitor::OpenEIClient>>(module, "_OpenEIClient")
      .def(py::init([](std::string base_url, double latitude, double longitude, std::string label,
                       std::string sector, int radius_miles, std::string api_key,
                       std::optional<double> timezone_offset_hours, double connect_timeout_s,
                       double read_timeout_s, int max_attempts, double backoff_initial_s,
                       double retry_after_failure_s, std::optional<double> fallback,
                       double total_timeout_s) {
             monitor::OpenEIOptions options;
             options.base_url = std::move(base_url);
             options.latitude = latitude;
             options.longitude = longitude;
             options.label = std::move(label);
             options.sector = std::move(sector);
             options.radius_miles = radius_miles;
             options.api_key = std::move(api_key);
             options.timezone_offset_hours = timezone_offset_hours;
             options.connect_timeout_s = connect_timeout_s;
             options.read_timeout_s = read_timeout_s;
             options.max_attempts = max_attempts;
             options.backoff_initial_s = backoff_initial_s;
             options.retry_after_failure_s = retry_after_failure_s;
             options.fallback_price_per_kwh = fallback;
             options.total_timeout_s = total_timeout_s;
             return std::make_shared<monitor::OpenEIClient>(std::move(options));
           }),
           py::arg("base_url"), py::arg("latitude"), py::arg("longitude"), py::arg("label"),
           py::arg("sector"), py::arg("radius_miles"), py::arg("api_key"),
           py::arg("timezone_offset_hours"), py::arg("connect_timeout_s"),
           py::arg("read_timeout_s"), py::arg("max_attempts"), py::arg("backoff_initial_s"),
           py::arg("retry_after_failure_s"), py::arg("fallback_price_per_kwh"),
           py::arg("total_timeout_s") = outside_services::kPriceFetchTimeoutS)
      .def(
          "fetch_tariff",
          [](monitor::OpenEIClient& self) {
            return std::make_shared<monitor::TariffElectricityPrice>(
                without_gil([&] { return self.fetch_tariff(); }));
          },
          "Fetches the rate (no fallback) and returns it as a TariffElectricityPrice.")
      .def("requests_sent", &monitor::OpenEIClient::requests_sent)
      .def("last_fallback_reason", &monitor::OpenEIClient::last_fallback_reason);

  bind_footprint_monitor<monitor::EnergyCostMonitor, ElectricityPriceProvider>(
      module, "_EnergyCostMonitor", [](const monitor::EnergyCostMeasurement& m) {
        return py::make_tuple(m.time_s, energy_dict(m.gpu_energy_j), energy_dict(m.gpu_energy_cost),
                              energy_dict(m.cpu_energy_j), energy_dict(m.cpu_energy_cost),
                              energy_dict(m.dram_energy_j), energy_dict(m.dram_energy_cost),
                              m.mean_price_per_kwh, m.currency);
      });
}

}  // namespace zeus::python
