// What the bindings of the two footprint monitors share (carbon.cpp: CarbonEmissionMonitor,
// price.cpp: EnergyCostMonitor): both price a WindowMonitor's windows through a provider that may
// wait on the network, and both hand Python their per-device figures as {index: value} dicts.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::python {

// Runs `body` without the GIL: an HTTP provider may wait on the network for seconds, and a
// Python server in the same process must be able to answer. The providers' errors reach Python
// through the global translator (errors.cpp).
template <typename Body>
auto without_gil(Body&& body) {
  const py::gil_scoped_release release;
  return body();
}

inline py::dict energy_dict(const monitor::EnergyByIndex& values) {
  py::dict out;
  for (const auto& [index, value] : values) {
    out[py::int_(index)] = value;
  }
  return out;
}

// Binds `Monitor` (constructed from a WindowMonitor and a `Provider`) as `name`, with
// begin_window(key, sync_execution=True) and end_window(key, sync_execution=True, cancel=False),
// which returns to_tuple(measurement). The zeus_cpp.monitor module wraps it with the reference's
// names and its measurement dataclass.
template <typename Monitor, typename Provider, typename ToTuple>
void bind_footprint_monitor(py::module_& module, const char* name, ToTuple to_tuple) {
  py::class_<Monitor, std::shared_ptr<Monitor>>(module, name)
      .def(py::init([](py::handle energy_monitor, std::shared_ptr<Provider> provider) {
             return std::make_shared<Monitor>(window_monitor_from_python(energy_monitor, "monitor"),
                                              std::move(provider));
           }),
           py::arg("monitor"), py::arg("provider"))
      .def(
          "begin_window",
          [](Monitor& self, const std::string& key, bool sync_execution) {
            without_gil([&] { self.begin_window(key, {.sync_execution = sync_execution}); });
          },
          py::arg("key"), py::arg("sync_execution") = true)
      .def(
          "end_window",
          [to_tuple](Monitor& self, const std::string& key, bool sync_execution, bool cancel) {
            return to_tuple(without_gil([&] {
              return self.end_window(key, {.sync_execution = sync_execution, .cancel = cancel});
            }));
          },
          py::arg("key"), py::arg("sync_execution") = true, py::arg("cancel") = false);
}

}  // namespace zeus::python
