// What the bindings of the two footprint monitors share (carbon.cpp: CarbonEmissionMonitor,
// price.cpp: EnergyCostMonitor): both price a WindowMonitor's windows through a provider that may
// wait on the network, and both hand Python their per-device figures as {index: value} dicts.
#pragma once

#include <pybind11/pybind11.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

// A Python provider's answer to `method`(start, end) as pieces: an iterable of (start, end,
// value) numbers, every one finite, each value non-negative (as the constant providers require),
// the pieces in time order, joined without gaps or overlaps, and covering [start, end]. Anything
// else is a TypeError or ValueError that names the method and the piece, instead of pybind11's
// "Unable to cast" or a figure silently weighed over part of the window.
template <typename Piece>
std::vector<Piece> pieces_from_python(const py::object& returned, const char* method,
                                      double start_unix_s, double end_unix_s) {
  // Joins and ends may differ by rounding when a provider computes them; a microsecond is far
  // below any tariff or intensity period.
  constexpr double kSlackS = 1e-6;
  const std::string name = std::string(method) + "()";
  if (py::isinstance<py::str>(returned) || py::isinstance<py::bytes>(returned) ||
      py::isinstance<py::dict>(returned) || !py::hasattr(returned, "__iter__")) {
    throw py::type_error(name + " must return a list of (start, end, value) tuples, not " +
                         std::string(Py_TYPE(returned.ptr())->tp_name));
  }
  std::vector<Piece> pieces;
  for (const py::handle item : returned) {
    std::tuple<double, double, double> numbers;
    try {
      numbers = item.cast<std::tuple<double, double, double>>();
    } catch (const py::cast_error&) {
      throw py::type_error(name + " must return (start, end, value) tuples of numbers, but gave " +
                           py::repr(item).cast<std::string>());
    }
    const auto [start_s, end_s, value] = numbers;
    if (!std::isfinite(start_s) || !std::isfinite(end_s) || !std::isfinite(value) || value < 0.0 ||
        end_s < start_s) {
      throw py::value_error(name + " gave " + py::repr(item).cast<std::string>() +
                            ": each piece needs finite start <= end and a finite, non-negative "
                            "value");
    }
    if (!pieces.empty() && std::abs(start_s - pieces.back().end_unix_s) > kSlackS) {
      throw py::value_error(name + " gave pieces that do not join: one ends at " +
                            std::to_string(pieces.back().end_unix_s) + ", the next starts at " +
                            std::to_string(start_s) + " (they must follow each other in time)");
    }
    pieces.push_back(Piece{start_s, end_s, value});
  }
  if (!pieces.empty() && (pieces.front().start_unix_s > start_unix_s + kSlackS ||
                          pieces.back().end_unix_s < end_unix_s - kSlackS)) {
    throw py::value_error(name + " gave pieces from " +
                          std::to_string(pieces.front().start_unix_s) + " to " +
                          std::to_string(pieces.back().end_unix_s) + " for the window " +
                          std::to_string(start_unix_s) + " to " + std::to_string(end_unix_s) +
                          ": they must cover all of it");
  }
  return pieces;
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
