// zeus_cpp._zeus._ReplayMonitor: the C++ monitor::ReplayMonitor (a ZeusMonitor CSV log played
// back, one row per completed window) for zeus_cpp.utils.testing.ReplayZeusMonitor. Bound as a
// WindowMonitor, so the optimizers take it like any monitor and call the C++ methods directly.
//
// Errors, as the reference's ReplayZeusMonitor raises them to Python: a missing or unreadable log
// is FileNotFoundError / PermissionError / OSError, a malformed one ValueError (naming the line);
// a duplicate or unknown window, a row whose name does not match, or an exhausted log is a
// RuntimeError. (Called from C++, e.g. inside an optimizer, the same errors are the core's
// zeus::Error, translated by the module's translator.)
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/replay_monitor.hpp"

namespace zeus::python {
namespace {

[[noreturn]] void raise_python(PyObject* type, const Error& error) {
  PyErr_SetString(type, error.what());
  throw py::error_already_set();
}

[[noreturn]] void raise_open_error(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kNotFound:
      raise_python(PyExc_FileNotFoundError, error);
    case ErrorKind::kNoPermission:
      raise_python(PyExc_PermissionError, error);
    case ErrorKind::kIo:
      raise_python(PyExc_OSError, error);
    default:
      raise_python(PyExc_ValueError, error);
  }
}

}  // namespace

void bind_replay(py::module_& module) {
  py::class_<monitor::ReplayMonitor, monitor::WindowMonitor,
             std::shared_ptr<monitor::ReplayMonitor>>(
      module, "_ReplayMonitor",
      "Native part of zeus_cpp.utils.testing.ReplayZeusMonitor (construct that one).")
      .def(py::init([](const std::string& log_file, bool match_window_name) {
             try {
               return std::make_shared<monitor::ReplayMonitor>(log_file, match_window_name);
             } catch (const Error& error) {
               raise_open_error(error);
             }
           }),
           py::arg("log_file"), py::arg("match_window_name") = true)
      .def(
          "begin_window",
          [](monitor::ReplayMonitor& self, const std::string& key, bool sync_execution,
             bool restart) {
            try {
              self.begin_window(key, {.sync_execution = sync_execution, .restart = restart});
            } catch (const Error& error) {
              raise_python(PyExc_RuntimeError, error);
            }
          },
          py::arg("key"), py::arg("sync_execution") = true, py::arg("restart") = false)
      .def(
          "end_window",
          [](monitor::ReplayMonitor& self, const std::string& key, bool sync_execution,
             bool cancel) {
            try {
              return self.end_window(key, {.sync_execution = sync_execution, .cancel = cancel});
            } catch (const Error& error) {
              raise_python(PyExc_RuntimeError, error);
            }
          },
          py::arg("key"), py::arg("sync_execution") = true, py::arg("cancel") = false)
      .def_property_readonly(
          "gpu_indices", [](const monitor::ReplayMonitor& self) { return self.gpu_indices(); },
          "The GPU indices of the log's gpu<i>_energy columns, in order.")
      .def_property_readonly("rows_left", &monitor::ReplayMonitor::rows_left,
                             "How many rows the next end_window calls may still consume.");
}

}  // namespace zeus::python
