// zeus_cpp._zeus: the monitor classes. WindowMonitor (the interface the optimizers use, with a
// trampoline for Python subclasses), ZeusMonitor (whose window calls are window_calls.cpp's fast
// path) and the helpers the tests and the Python package use to hand monitors to C++
// (monitor_adapter.cpp).
//
// Calls measurement_type.cpp, window_calls.cpp and monitor_adapter.cpp; none of them calls back.
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::python {
namespace {

// ---- The Python synchronisation hook -------------------------------------------------------

monitor::SyncHook python_sync_hook(py::object callable) {
  std::shared_ptr<py::object> kept = keep_python(std::move(callable));
  return [kept](const std::vector<int>& gpu_indices) {
    py::gil_scoped_acquire gil;
    (*kept)(py::cast(gpu_indices));
  };
}

// ---- WindowMonitor trampoline --------------------------------------------------------------

class PyWindowMonitor : public monitor::WindowMonitor {
 public:
  void begin_window(const std::string& name, monitor::BeginWindowOptions options) override {
    // The Python API keeps the reference's keyword arguments.
    const bool sync_execution = options.sync_execution;
    const bool restart = options.restart;
    PYBIND11_OVERRIDE_PURE(void, monitor::WindowMonitor, begin_window, name, sync_execution,
                           restart);
  }

  monitor::Measurement end_window(const std::string& name,
                                  monitor::EndWindowOptions options) override {
    py::gil_scoped_acquire gil;
    const py::function override =
        py::get_override(static_cast<const monitor::WindowMonitor*>(this), "end_window");
    if (!override) {
      py::pybind11_fail("WindowMonitor.end_window is not implemented");
    }
    return measurement_from_python(override(name, options.sync_execution, options.cancel));
  }

  // The Python object's `gpu_indices` (an attribute, a property or a method).
  const std::vector<int>& gpu_indices() const override {
    py::gil_scoped_acquire gil;
    const py::handle self = py::detail::get_object_handle(
        this, py::detail::get_type_info(typeid(monitor::WindowMonitor)));
    py::object value = self.attr("gpu_indices");
    if (PyCallable_Check(value.ptr()) != 0) {
      value = value();
    }
    gpu_indices_ = value.cast<std::vector<int>>();
    return gpu_indices_;
  }

 private:
  mutable std::vector<int> gpu_indices_;
};

}  // namespace

void bind_monitor(py::module_& module) {
  // ---- WindowMonitor ----
  py::class_<monitor::WindowMonitor, PyWindowMonitor, std::shared_ptr<monitor::WindowMonitor>>(
      module, "WindowMonitor",
      "The window interface the optimizers use. Subclass it in Python (implementing "
      "begin_window, end_window and a gpu_indices attribute) to feed them other measurements.")
      .def(py::init<>());

  // ---- ZeusMonitor ----
  py::class_<monitor::ZeusMonitor, monitor::WindowMonitor, std::shared_ptr<monitor::ZeusMonitor>>
      zeus_monitor(module, "ZeusMonitor",
                   "Native part of zeus_cpp.monitor.ZeusMonitor (construct that one: it checks the "
                   "arguments and resolves sync_execution_with).");
  zeus_monitor.def(py::init([](std::optional<std::vector<int>> gpu_indices,
                               std::optional<std::vector<int>> cpu_indices,
                               bool approx_instant_energy, std::optional<std::string> log_file,
                               const py::object& sync, const std::shared_ptr<PyGpus>& gpus) {
                     monitor::ZeusMonitorOptions options;
                     options.gpu_indices = std::move(gpu_indices);
                     options.cpu_indices = std::move(cpu_indices);
                     options.approx_instant_energy = approx_instant_energy;
                     // A 0 J window is warned about through Python's warnings
                     // (window_calls.cpp), not also in the native log.
                     options.warn_zero_energy = false;
                     if (log_file) {
                       options.log_file = *log_file;
                     }
                     if (!sync.is_none()) {
                       options.sync = python_sync_hook(sync);
                     }
                     try {
                       if (gpus) {  // explicit GPUs (benchmarks, tests); no CPU
                         return std::make_shared<monitor::ZeusMonitor>(
                             gpus->gpus, std::vector<std::shared_ptr<device::Cpu>>{},
                             std::move(options));
                       }
                       return std::make_shared<monitor::ZeusMonitor>(std::move(options));
                     } catch (const Error& error) {
                       if (error.kind() == ErrorKind::kIo) {
                         PyErr_SetString(PyExc_OSError, error.what());
                         throw py::error_already_set();
                       }
                       throw;
                     }
                   }),
                   py::arg("gpu_indices"), py::arg("cpu_indices"), py::arg("approx_instant_energy"),
                   py::arg("log_file"), py::arg("sync"), py::arg("gpus") = nullptr);
  // The hot path: begin_window/end_window as METH_FASTCALL functions (window_calls.cpp).
  add_window_calls(zeus_monitor);
  zeus_monitor
      .def("reset_windows", &monitor::ZeusMonitor::reset_windows, "Drops every open window.")
      .def("open_windows", &monitor::ZeusMonitor::open_windows,
           "The names of the open windows, sorted.")
      .def_property_readonly(
          "_measures_soc",
          [](const monitor::ZeusMonitor& self) { return self.soc_sampler() != nullptr; },
          "Whether the windows measure a SoC's rails (Measurement.soc_energy).")
      .def_property_readonly(
          "gpu_indices", [](const monitor::ZeusMonitor& self) { return self.gpu_indices(); },
          "The GPU indices measured, in order.")
      .def_property_readonly(
          "cpu_indices", [](const monitor::ZeusMonitor& self) { return self.cpu_indices(); },
          "The CPU package indices measured, in order.")
      .def_property_readonly(
          "gpu_energy_scope",
          [](const monitor::ZeusMonitor& self) {
            std::map<int, std::string> scopes;
            for (const auto& [index, scope] : self.gpu_energy_scopes()) {
              scopes[index] = std::string(device::measured_scope_name(scope));
            }
            return scopes;
          },
          "What each GPU's energy covers, by GPU index: 'gpu', or 'module' (GPU + CPU + memory "
          "of a Grace superchip: CPU energy of the same window is already part of it).")
      .def(
          "cross_check",
          [](const monitor::ZeusMonitor& self, double duration_s, double poll_period_s) {
            std::vector<monitor::CounterPowerCheck> checks;
            {
              py::gil_scoped_release release;
              checks = self.cross_check({.duration_s = duration_s, .poll_period_s = poll_period_s});
            }
            py::list result;
            for (const monitor::CounterPowerCheck& check : checks) {
              py::dict entry;
              entry["gpu_index"] = check.gpu_index;
              entry["duration_s"] = check.duration_s;
              entry["counter_energy_j"] = check.counter_energy_j;
              entry["power_energy_j"] = check.power_energy_j;
              entry["power_samples"] = check.power_samples;
              entry["difference"] = check.difference;
              entry["disagrees"] = check.disagrees;
              entry["trust"] = monitor::trust_name(check.trust);
              entry["reason"] = check.reason;
              result.append(std::move(entry));
            }
            return result;
          },
          py::arg("duration_s") = 1.0, py::arg("poll_period_s") = 0.01,
          "A zeus_cpp addition: compares each GPU's energy counter with its instant power polled "
          "every poll_period_s for duration_s, and says which to trust (a list of dicts, one per "
          "GPU with a counter; a disagreement over 10% is also logged as a warning).");

  // Drives any monitor through the C++ WindowMonitor interface, as the optimizers do (tests
  // use it to check the trampoline and window_monitor_from_python).
  module.def(
      "_window_roundtrip",
      [](py::handle monitor, const std::string& key) {
        const std::shared_ptr<monitor::WindowMonitor> native = window_monitor_from_python(monitor);
        native->begin_window(key);
        monitor::Measurement measurement = native->end_window(key);
        return py::make_tuple(native->gpu_indices(), measurement_to_python(std::move(measurement)));
      },
      py::arg("monitor"), py::arg("key"));
  // The check the optimizers make, for the Python constructors that read the monitor first.
  module.def(
      "_check_window_monitor",
      [](py::handle monitor, const std::string& parameter) {
        static_cast<void>(window_monitor_from_python(monitor, parameter));
      },
      py::arg("monitor"), py::arg("parameter") = "monitor");
  module.def(
      "_as_measurement",
      [](py::handle result, const std::string& where) {
        return measurement_to_python(measurement_like(result, where));
      },
      py::arg("result"), py::arg("where"),
      "A monitor's end_window result as a Measurement (see measurement_like in bindings.hpp).");
}

}  // namespace zeus::python
