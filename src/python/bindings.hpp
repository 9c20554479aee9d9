// Shared declarations of the zeus_cpp._zeus extension module.
//
// module.cpp defines the module and calls every bind_* function below, errors first (the other
// parts use its helpers at import time). Each bind_* adds its classes and functions to `module`.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::python {

namespace py = pybind11;

void bind_errors(py::module_& module);
void bind_device(py::module_& module);
void bind_monitor(py::module_& module);
void bind_optimizer(py::module_& module);
void bind_bso(py::module_& module);
void bind_metrics(py::module_& module);

// ---- Errors (errors.cpp) -------------------------------------------------------------------
//
// Every zeus::Error that reaches Python is translated by a translator registered in
// bind_errors(), through the one table of errors.cpp (documented in docs/python.md):
//   - zeus::bso::TrainFailedError  -> ZeusBSOTrainFailError
//   - zeus::bso::ServerError       -> ZeusBSORuntimError
//   - zeus::bso::ValidationError   -> ZeusBSOConfigError
//   - zeus::monitor::CarbonIntensityError -> ZeusCarbonIntensityNotFoundError (kNotFound)
//                                     or ZeusCarbonIntensityHTTPError
//   - zeus::monitor::ElectricityPriceError -> ZeusElectricityPriceHTTPError (kUnavailable)
//                                     or ZeusElectricityPriceNotFoundError
//   - any other zeus::Error        -> by ErrorKind, in the CPU family (ZeusCPU...Error) when
//                                     its subject() is ErrorSubject::kCpu, else in the GPU
//                                     family (ZeusGPU...Error).
// The classes are the pure-Python ones of zeus_cpp.exception.

// Which family of classes a zeus::Error is translated to.
enum class ErrorFamily {
  kGpu,  // ZeusGPU...Error (the default)
  kCpu,  // ZeusCPU...Error
};

// The class `name` of zeus_cpp.exception (e.g. "ZeusBSOTrainFailError"). Throws
// std::invalid_argument for an unknown name (a programming error). Needs the GIL.
py::object exception_class(std::string_view name);

// Raises the Python exception class `name` of zeus_cpp.exception with `message`: sets the
// Python error and throws py::error_already_set, which pybind11 passes through to Python. For
// example, from a binding: throw_python_error("ZeusBSOTrainFailError", error.what());
[[noreturn]] void throw_python_error(std::string_view name, const std::string& message);

// Sets the Python error indicator to what the global translator gives for `error` (for code
// that returns to Python without going through pybind11's dispatcher).
void set_python_error(const Error& error);

// Raises the Python class the table gives for `error` (what the global translator does; for use
// where a specific family is known).
[[noreturn]] void throw_translated(const Error& error, ErrorFamily family = ErrorFamily::kGpu);

// ---- Devices (device.cpp) -------------------------------------------------------------------

// What zeus_cpp._zeus.GPUs holds (std::shared_ptr holder): the process's GPUs (get_gpus()), or
// an explicit set (_zeus._benchmark_gpus()).
struct PyGpus {
  device::Gpus gpus;
  std::string backend;  // "nvml", "amdsmi", "simulated" or "none"
};

// ---- Monitors ------------------------------------------------------------------------------
//
// Four files, each calling only the ones after it:
//   monitor_bindings.cpp  bind_monitor: WindowMonitor, ZeusMonitor and the monitor helpers
//   window_calls.cpp      ZeusMonitor's begin_window/end_window, the fast path
//   monitor_adapter.cpp   Python monitors and objects handed to C++
//   measurement_type.cpp  the native Measurement type
// (power_sampler.cpp, PowerSampler, stands apart.)
//
// zeus::WindowMonitor is bound as zeus_cpp._zeus.WindowMonitor with a std::shared_ptr holder;
// zeus::ZeusMonitor as zeus_cpp._zeus.ZeusMonitor (a subclass, also std::shared_ptr-held;
// zeus_cpp.monitor.ZeusMonitor is a thin Python subclass of it). A Python class deriving from
// WindowMonitor may implement begin_window/end_window/gpu_indices itself (a trampoline forwards
// the calls).

// ---- Measurement (measurement_type.cpp) ----
//
// zeus_cpp._zeus.Measurement (zeus_cpp.monitor.Measurement) is a native CPython type, created by
// bind_measurement (before any binding that returns one). The Python Measurement for a C++
// measurement, and back (reading the dicts when Python code has modified them).
// measurement_from_python throws py::type_error for anything else. A pybind11 type caster
// (below) uses them, so bound functions may simply take or return zeus::Measurement.
void bind_measurement(py::module_& module);
py::object measurement_to_python(monitor::Measurement measurement);
monitor::Measurement measurement_from_python(py::handle object);
bool is_measurement(py::handle object);

// ---- Handing monitors to C++ (monitor_adapter.cpp) ----
//
// To hand a monitor to C++ code that keeps a std::shared_ptr<WindowMonitor> (the power-limit
// optimizer, the BSO client), use window_monitor_from_python(): the returned pointer also keeps
// the Python object alive (a Python subclass's C++ part cannot outlive its Python object) and
// releases it with the GIL held. A native monitor is used directly; any other object with
// begin_window and end_window methods and a gpu_indices (a ZeusMonitor subclass overriding the
// window methods, a class of the user's own, a mock) is called through its Python attributes, so
// overrides are never bypassed. Throws py::type_error naming `parameter` when `object` has no
// window methods.
std::shared_ptr<monitor::WindowMonitor> window_monitor_from_python(
    py::handle object, std::string_view parameter = "monitor");

// What a monitor's end_window returned, as a C++ measurement: a zeus_cpp Measurement, or any
// object with the reference's Measurement fields (time, gpu_energy, and optionally cpu_energy,
// dram_energy). Throws py::type_error starting with `where` (e.g. "monitor.end_window('k')").
monitor::Measurement measurement_like(py::handle result, const std::string& where);

// Holds a Python object in C++ objects that may be released on any thread: the reference is
// dropped with the GIL held (and not at all once the interpreter is gone).
std::shared_ptr<py::object> keep_python(py::object object);

// ---- The window calls (window_calls.cpp) ----
//
// Installs begin_window and end_window on `zeus_monitor_class` (zeus_cpp._zeus.ZeusMonitor) as
// METH_FASTCALL functions that read the C++ ZeusMonitor of an instance directly.
void add_window_calls(py::handle zeus_monitor_class);

}  // namespace zeus::python

namespace pybind11::detail {

template <>
struct type_caster<zeus::monitor::Measurement> {
  PYBIND11_TYPE_CASTER(zeus::monitor::Measurement, const_name("Measurement"));

  bool load(handle source, bool /*convert*/) {
    if (!zeus::python::is_measurement(source)) {
      return false;
    }
    value = zeus::python::measurement_from_python(source);
    return true;
  }
  static handle cast(zeus::monitor::Measurement source, return_value_policy /*policy*/,
                     handle /*parent*/) {
    return zeus::python::measurement_to_python(std::move(source)).release();
  }
};

}  // namespace pybind11::detail
