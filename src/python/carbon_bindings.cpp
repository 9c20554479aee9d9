// zeus_cpp._zeus: the carbon intensity providers and the carbon emission monitor behind
// zeus_cpp.monitor.carbon (which adds the reference's names and its measurement dataclass).
#include <pybind11/stl.h>

#include <cmath>
#include <map>
#include <utility>

#include "bindings.hpp"
#include "footprint.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/monitor/carbon.hpp"

namespace zeus::python {
namespace {

using monitor::CarbonIntensityPiece;
using monitor::CarbonIntensityProvider;

double unix_seconds_of(py::handle key) {
  if (py::hasattr(key, "timestamp")) {
    return key.attr("timestamp")().cast<double>();
  }
  return key.cast<double>();
}

// A provider written in Python: it overrides intensity_over(start, end) -> [(start, end,
// value)], or implements the reference's get_recent_carbon_intensity() -> {datetime: value}
// (each value then holds until the next key, as an offline series).
class PyCarbonIntensityProvider : public CarbonIntensityProvider {
 public:
  std::vector<CarbonIntensityPiece> intensity_over(double start_unix_s,
                                                   double end_unix_s) override {
    const py::gil_scoped_acquire gil;
    if (const py::function over = py::get_override(this, "intensity_over")) {
      return pieces_from_python<CarbonIntensityPiece>(over(start_unix_s, end_unix_s),
                                                      "intensity_over", start_unix_s, end_unix_s);
    }
    if (const py::function recent = py::get_override(this, "get_recent_carbon_intensity")) {
      std::map<double, double> sorted;
      for (const auto& [key, value] : recent().cast<py::dict>()) {
        sorted[unix_seconds_of(key)] = value.cast<double>();
      }
      std::vector<monitor::OfflineCarbonIntensity::Point> points;
      for (const auto& [unix_s, value] : sorted) {
        points.push_back({unix_s, value});
      }
      return monitor::OfflineCarbonIntensity(std::move(points), "get_recent_carbon_intensity()")
          .intensity_over(start_unix_s, end_unix_s);
    }
    throw py::type_error(
        "a CarbonIntensityProvider subclass must implement intensity_over(start, end) or "
        "get_recent_carbon_intensity()");
  }
  double update_period_s() const override {
    const py::gil_scoped_acquire gil;
    if (const py::function period = py::get_override(this, "update_period_s")) {
      return period().cast<double>();
    }
    return 0.0;  // a Python provider that does not say
  }
};

py::list pieces_to_python(const std::vector<CarbonIntensityPiece>& pieces) {
  py::list out;
  for (const CarbonIntensityPiece& piece : pieces) {
    out.append(py::make_tuple(piece.start_unix_s, piece.end_unix_s, piece.gco2eq_per_kwh));
  }
  return out;
}

}  // namespace

void bind_carbon(py::module_& module) {
  py::class_<CarbonIntensityProvider, PyCarbonIntensityProvider,
             std::shared_ptr<CarbonIntensityProvider>>(
      module, "CarbonIntensityProvider",
      "Carbon intensity (gCO2eq/kWh) over time. Subclass it in Python with intensity_over(start, "
      "end) or the reference's get_recent_carbon_intensity().")
      .def(py::init<>())
      .def(
          "intensity_over",
          [](CarbonIntensityProvider& self, double start, double end) {
            return pieces_to_python(without_gil([&] { return self.intensity_over(start, end); }));
          },
          py::arg("start"), py::arg("end"),
          "[(start, end, gCO2eq/kWh)] tiling [start, end] (Unix seconds).")
      .def(
          "intensity_at",
          [](CarbonIntensityProvider& self, double when) {
            return without_gil([&] { return self.intensity_at(when); });
          },
          py::arg("when"))
      .def("update_period_s", &CarbonIntensityProvider::update_period_s);

  py::class_<monitor::ConstantCarbonIntensity, CarbonIntensityProvider,
             std::shared_ptr<monitor::ConstantCarbonIntensity>>(module, "ConstantCarbonIntensity")
      .def(py::init<double>(), py::arg("gco2eq_per_kwh"))
      .def_property_readonly("value", &monitor::ConstantCarbonIntensity::value);

  py::class_<monitor::OfflineCarbonIntensity, CarbonIntensityProvider,
             std::shared_ptr<monitor::OfflineCarbonIntensity>>(module, "OfflineCarbonIntensity")
      .def(py::init([](const std::vector<std::pair<double, double>>& points) {
             std::vector<monitor::OfflineCarbonIntensity::Point> converted;
             for (const auto& [unix_s, value] : points) {
               converted.push_back({unix_s, value});
             }
             return std::make_shared<monitor::OfflineCarbonIntensity>(std::move(converted));
           }),
           py::arg("points"))
      .def_static(
          "from_file",
          [](const std::string& path) {
            return std::make_shared<monitor::OfflineCarbonIntensity>(
                monitor::OfflineCarbonIntensity::from_file(path));
          },
          py::arg("path"))
      .def("points", [](const monitor::OfflineCarbonIntensity& self) {
        std::vector<std::pair<double, double>> out;
        for (const auto& point : self.points()) {
          out.emplace_back(point.unix_s, point.gco2eq_per_kwh);
        }
        return out;
      });

  py::class_<monitor::ElectricityMapsClient, CarbonIntensityProvider,
             std::shared_ptr<monitor::ElectricityMapsClient>>(module, "_ElectricityMapsClient")
      .def(py::init([](std::string base_url, std::string zone, std::optional<double> latitude,
                       std::optional<double> longitude, std::string auth_token, bool estimate,
                       std::string emission_factor_type, double connect_timeout_s,
                       double read_timeout_s, int max_attempts, double backoff_initial_s,
                       double retry_after_failure_s, std::optional<double> fallback,
                       double total_timeout_s) {
             monitor::ElectricityMapsOptions options;
             options.base_url = std::move(base_url);
             options.zone = std::move(zone);
             options.latitude = latitude;
             options.longitude = longitude;
             options.auth_token = std::move(auth_token);
             options.estimate = estimate;
             options.emission_factor_type = std::move(emission_factor_type);
             options.connect_timeout_s = connect_timeout_s;
             options.read_timeout_s = read_timeout_s;
             options.max_attempts = max_attempts;
             options.backoff_initial_s = backoff_initial_s;
             options.retry_after_failure_s = retry_after_failure_s;
             options.fallback_gco2eq_per_kwh = fallback;
             options.total_timeout_s = total_timeout_s;
             return std::make_shared<monitor::ElectricityMapsClient>(std::move(options));
           }),
           py::arg("base_url"), py::arg("zone"), py::arg("latitude"), py::arg("longitude"),
           py::arg("auth_token"), py::arg("estimate"), py::arg("emission_factor_type"),
           py::arg("connect_timeout_s"), py::arg("read_timeout_s"), py::arg("max_attempts"),
           py::arg("backoff_initial_s"), py::arg("retry_after_failure_s"),
           py::arg("fallback_gco2eq_per_kwh"),
           py::arg("total_timeout_s") = outside_services::kCarbonFetchTimeoutS)
      .def("fetch_latest",
           [](monitor::ElectricityMapsClient& self) {
             return without_gil([&] { return self.fetch_latest(); });
           })
      .def("fetch_history",
           [](monitor::ElectricityMapsClient& self) {
             return without_gil([&] { return self.fetch_history(); });
           })
      .def("set_query", &monitor::ElectricityMapsClient::set_query, py::arg("estimate"),
           py::arg("emission_factor_type"))
      .def("_estimate", &monitor::ElectricityMapsClient::estimate)
      .def("_emission_factor_type", &monitor::ElectricityMapsClient::emission_factor_type)
      .def("cached", &monitor::ElectricityMapsClient::cached)
      .def("requests_sent", &monitor::ElectricityMapsClient::requests_sent)
      .def("last_fallback_reason", &monitor::ElectricityMapsClient::last_fallback_reason);

  bind_footprint_monitor<monitor::CarbonEmissionMonitor, CarbonIntensityProvider>(
      module, "_CarbonEmissionMonitor", [](const monitor::CarbonEmissionMeasurement& m) {
        return py::make_tuple(m.time_s, energy_dict(m.gpu_energy_j),
                              energy_dict(m.gpu_carbon_emission_g), energy_dict(m.cpu_energy_j),
                              energy_dict(m.cpu_carbon_emission_g), energy_dict(m.dram_energy_j),
                              energy_dict(m.dram_carbon_emission_g), m.mean_gco2eq_per_kwh);
      });
}

}  // namespace zeus::python
