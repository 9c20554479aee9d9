// zeus_cpp._zeus: handing a Python monitor to the C++ optimizers (window_monitor_from_python).
//
// A native monitor (ZeusMonitor, ReplayZeusMonitor, a Python subclass of WindowMonitor, whose
// trampoline forwards the calls) is used directly. Anything else that has the window methods is
// wrapped in PythonObjectMonitor, which calls the object's Python attributes: a ZeusMonitor
// subclass that overrides begin_window/end_window (the native class has no trampoline, so the C++
// calls would skip the override), a monitor class of the user's own, or a mock, as the
// reference's optimizers accept any object with these methods.
//
// Also the home of keep_python (a Python object held by C++ objects) and measurement_like (a
// duck-typed measurement). Calls measurement_type.cpp; monitor_bindings.cpp and the optimizer
// bindings call it.

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"

namespace zeus::python {
namespace {

std::string type_name(py::handle object) {
  return Py_TYPE(object.ptr())->tp_name;
}

// A number that is not a bool, as a double; nullopt otherwise.
std::optional<double> number(py::handle value) {
  if (PyBool_Check(value.ptr()) != 0 ||
      (PyFloat_Check(value.ptr()) == 0 && PyLong_Check(value.ptr()) == 0)) {
    return std::nullopt;
  }
  return value.cast<double>();
}

// `{index: joules}` of a duck-typed measurement into `out`; None leaves it empty.
void read_energy(py::handle mapping, const std::string& what, monitor::EnergyByIndex& out) {
  if (mapping.is_none()) {
    return;
  }
  if (PyDict_Check(mapping.ptr()) == 0 && !py::hasattr(mapping, "items")) {
    throw py::type_error(what + " must be a dict of {index: joules}, not " + type_name(mapping));
  }
  const py::object items = py::reinterpret_borrow<py::object>(mapping).attr("items")();
  for (const py::handle item : items) {
    const py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
    if (PyLong_Check(pair[0].ptr()) == 0 || PyBool_Check(pair[0].ptr()) != 0) {
      throw py::type_error(what + " keys must be device indices (int), not " + type_name(pair[0]));
    }
    const std::optional<double> joules = number(pair[1]);
    if (!joules || !std::isfinite(*joules)) {
      throw py::type_error(what + "[" + py::str(pair[0]).cast<std::string>() +
                           "] must be a finite number of joules, not " +
                           py::repr(pair[1]).cast<std::string>());
    }
    out.set(pair[0].cast<int>(), *joules);
  }
}

}  // namespace

std::shared_ptr<py::object> keep_python(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* pointer) {
    if (Py_IsInitialized() == 0) {
      pointer->release();
    } else {
      py::gil_scoped_acquire gil;
      pointer->release().dec_ref();
    }
    delete pointer;
  });
}

monitor::Measurement measurement_like(py::handle result, const std::string& where) {
  if (is_measurement(result)) {
    return measurement_from_python(result);
  }
  const std::string what = where + " returned " + type_name(result);
  if (!py::hasattr(result, "time") || !py::hasattr(result, "gpu_energy")) {
    throw py::type_error(what +
                         ": a Measurement (or an object with its time and gpu_energy) "
                         "is needed");
  }
  monitor::Measurement measurement;
  const std::optional<double> time_s = number(result.attr("time"));
  if (!time_s || !std::isfinite(*time_s) || *time_s < 0.0) {
    throw py::type_error(what + ": its time must be a finite number of seconds >= 0, not " +
                         py::repr(result.attr("time")).cast<std::string>());
  }
  measurement.time_s = *time_s;
  read_energy(result.attr("gpu_energy"), what + ": gpu_energy", measurement.gpu_energy_j);
  for (const auto& [name, target] : {std::pair{"cpu_energy", &measurement.cpu_energy_j},
                                     std::pair{"dram_energy", &measurement.dram_energy_j}}) {
    if (py::hasattr(result, name)) {
      read_energy(result.attr(name), what + ": " + name, *target);
    }
  }
  return measurement;
}

namespace {

class PythonObjectMonitor final : public monitor::WindowMonitor {
 public:
  PythonObjectMonitor(py::object target, std::string_view parameter)
      : target_(keep_python(std::move(target))), parameter_(parameter) {}

  void begin_window(const std::string& name, monitor::BeginWindowOptions options) override {
    py::gil_scoped_acquire gil;
    // Only what differs from the reference's defaults is passed, so that a monitor whose
    // methods take fewer keywords (begin_window(self, key)) still works.
    py::dict keywords;
    if (!options.sync_execution) {
      keywords["sync_execution"] = false;
    }
    if (options.restart) {
      keywords["restart"] = true;
    }
    target_->attr("begin_window")(name, **keywords);
  }

  monitor::Measurement end_window(const std::string& name,
                                  monitor::EndWindowOptions options) override {
    py::gil_scoped_acquire gil;
    py::dict keywords;
    if (!options.sync_execution) {
      keywords["sync_execution"] = false;
    }
    if (options.cancel) {
      keywords["cancel"] = true;
    }
    const py::object result = target_->attr("end_window")(name, **keywords);
    return measurement_like(result, parameter_ + ".end_window('" + name + "')");
  }

  // The object's `gpu_indices` (an attribute, a property or a method), read on each call.
  const std::vector<int>& gpu_indices() const override {
    py::gil_scoped_acquire gil;
    py::object value = target_->attr("gpu_indices");
    if (PyCallable_Check(value.ptr()) != 0) {
      value = value();
    }
    std::vector<int> indices;
    try {
      indices = value.cast<std::vector<int>>();
    } catch (const py::cast_error&) {
      throw py::type_error(parameter_ + ".gpu_indices must be a list of GPU indices (int), not " +
                           py::repr(value).cast<std::string>());
    }
    gpu_indices_ = std::move(indices);
    return gpu_indices_;
  }

 private:
  std::shared_ptr<py::object> target_;
  std::string parameter_;
  mutable std::vector<int> gpu_indices_;
};

bool callable_attribute(py::handle object, const char* name) {
  if (!py::hasattr(object, name)) {
    return false;
  }
  return PyCallable_Check(object.attr(name).ptr()) != 0;
}

// True when a native monitor's Python class replaces one of the window methods that C++ calls
// without a trampoline (every registered class but WindowMonitor itself).
bool overrides_native_window_methods(py::handle object) {
  const py::detail::type_info* registered = py::detail::get_type_info(Py_TYPE(object.ptr()));
  if (registered == nullptr ||
      registered == py::detail::get_type_info(typeid(monitor::WindowMonitor))) {
    return false;  // the trampoline forwards to the Python methods
  }
  const py::handle native_type(reinterpret_cast<PyObject*>(registered->type));
  const py::handle own_type(reinterpret_cast<PyObject*>(Py_TYPE(object.ptr())));
  for (const char* name : {"begin_window", "end_window", "gpu_indices"}) {
    if (!own_type.attr(name).is(native_type.attr(name))) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::shared_ptr<monitor::WindowMonitor> window_monitor_from_python(py::handle object,
                                                                   std::string_view parameter) {
  // The object's own type, not isinstance(): a MagicMock(spec=ZeusMonitor) claims the class
  // through __class__ but has no C++ part.
  PyTypeObject* window_monitor_type =
      py::detail::get_type_info(typeid(monitor::WindowMonitor))->type;
  if (PyType_IsSubtype(Py_TYPE(object.ptr()), window_monitor_type) != 0 &&
      !overrides_native_window_methods(object)) {
    auto inner = object.cast<std::shared_ptr<monitor::WindowMonitor>>();
    std::shared_ptr<py::object> keep = keep_python(py::reinterpret_borrow<py::object>(object));
    monitor::WindowMonitor* raw = inner.get();
    return std::shared_ptr<monitor::WindowMonitor>(raw,
                                                   [inner, keep](monitor::WindowMonitor*) mutable {
                                                     inner.reset();
                                                     keep.reset();
                                                   });
  }
  if (!callable_attribute(object, "begin_window") || !callable_attribute(object, "end_window") ||
      !py::hasattr(object, "gpu_indices")) {
    throw py::type_error(std::string(parameter) +
                         " must be a monitor: an object with begin_window and end_window methods "
                         "and gpu_indices (a ZeusMonitor, for example), not " +
                         type_name(object));
  }
  return std::make_shared<PythonObjectMonitor>(py::reinterpret_borrow<py::object>(object),
                                               parameter);
}

}  // namespace zeus::python
