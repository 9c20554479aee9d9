// zeus_cpp._zeus's SoC part, under zeus_cpp.device.soc: the process's SoC as discovered
// (device::get_soc()) and a SocSampler polling its rails (the native part of the Python Jetson).
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/monitor/soc_sampler.hpp"

namespace zeus::python {

namespace {

py::dict discovery_dict(const device::SocDiscovery& found) {
  py::list rails;
  if (found.soc) {
    for (const device::PowerRail& rail : found.soc->rails()) {
      rails.append(py::make_tuple(rail.name, std::string(device::rail_kind_name(rail.kind))));
    }
  }
  py::dict out;
  out["available"] = found.soc != nullptr;
  out["jetson"] = found.is_jetson;
  out["model"] = found.soc ? py::object(py::str(found.soc->model())) : py::object(py::none());
  out["root"] = found.root.string();
  out["message"] = found.message;
  out["rails"] = rails;
  return out;
}

}  // namespace

void bind_soc(py::module_& module) {
  module.def(
      "_soc_discovery", [] { return discovery_dict(device::get_soc()); },
      "The process's SoC as found once (ZEUS_JETSON_ROOT, else /): a dict with available, "
      "jetson, model, root, message and rails [(name, kind)].");
  py::class_<monitor::SocSampler>(module, "_SocSampler")
      .def(py::init([](double period_s) {
             const device::SocDiscovery& found = device::get_soc();
             if (!found.soc) {
               throw Error(ErrorKind::kNotSupported, found.message);
             }
             monitor::SocSamplerOptions options;
             options.period_s = period_s;
             return std::make_unique<monitor::SocSampler>(found.soc, options);
           }),
           py::arg("period_s") = monitor::kDefaultSocPeriodS,
           "Polls every rail of the process's SoC in the background.")
      .def(
          "energy_j",
          [](const monitor::SocSampler& sampler) { return sampler.read_now().energy_j; },
          py::call_guard<py::gil_scoped_release>(),
          "Each rail's energy (J) since the sampler started, every rail at one instant (its "
          "latest power held to now).")
      .def(
          "skipped",
          [](const monitor::SocSampler& sampler) {
            std::vector<std::uint64_t> skipped;
            for (std::size_t i = 0; i < sampler.soc().rails().size(); ++i) {
              skipped.push_back(sampler.skipped(i));
            }
            return skipped;
          },
          "Each rail's failed reads so far (its power held over them).")
      .def("stop", &monitor::SocSampler::stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("period_s", &monitor::SocSampler::period_s);
}

}  // namespace zeus::python
