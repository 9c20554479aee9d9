// zeus_cpp._zeus.ZeusMonitor.begin_window / end_window: the hot path (docs/python.md,
// "Performance").
//
// The two window calls are METH_FASTCALL functions, not pybind11 methods: they hold the GIL (a
// snapshot takes well under a microsecond), parse their arguments without pybind11's dispatch,
// take the key as a str without pybind11's generic conversion, and return a Measurement (the
// native type of measurement_type.cpp, whose dictionaries are only built when first read).
// monitor_bindings.cpp installs them on the ZeusMonitor class (add_window_calls).
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bindings.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::python {
namespace {

// ---- Error translation of the window calls -------------------------------------------------

// Sets the Python error for an exception thrown by a window call. Window misuse (duplicate or
// unknown name, a bad name for the log) is the reference's ValueError; the rest goes through
// the table.
// The reference's wording for a window that is already open or not open ("Measurement window
// 'k' already exists" / "... does not exist"), followed by the C++ monitor's advice; nullopt
// for other messages.
std::optional<std::string> reference_window_message(std::string_view what, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  const std::string duplicate = "window " + quoted + " is already open";
  const std::string unknown = "no open window named " + quoted;
  std::string rest;
  std::string verb;
  if (what.rfind(duplicate, 0) == 0) {
    verb = " already exists";
    rest = what.substr(duplicate.size());
  } else if (what.rfind(unknown, 0) == 0) {
    verb = " does not exist";
    rest = what.substr(unknown.size());
  } else {
    return std::nullopt;
  }
  // Python spells the keyword's value True.
  if (const auto at = rest.find("restart=true"); at != std::string::npos) {
    rest.replace(at, std::strlen("restart=true"), "restart=True");
  }
  return "Measurement window " + quoted + verb + rest;
}

void set_window_error(const std::string* key = nullptr) {
  try {
    throw;
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (const py::builtin_exception& error) {
    error.set_error();
  } catch (const Error& error) {
    const std::string_view what = error.what();
    if (error.kind() == ErrorKind::kInvalidArgument &&
        (what.rfind("window", 0) == 0 || what.rfind("no open window", 0) == 0)) {
      const std::optional<std::string> message =
          key != nullptr ? reference_window_message(what, *key) : std::nullopt;
      PyErr_SetString(PyExc_ValueError, message ? message->c_str() : error.what());
    } else {
      set_python_error(error);
    }
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "zeus_cpp: unknown C++ exception");
  }
}

// ---- The window methods: METH_FASTCALL, no pybind11 dispatch -------------------------------

PyTypeObject* zeus_monitor_type = nullptr;  // zeus_cpp._zeus.ZeusMonitor

// The C++ monitor of a ZeusMonitor instance (nullptr before __init__). The common case (a
// pybind11 instance of one C++ type, "simple layout") is read directly; anything else goes
// through pybind11's cast, which throws py::cast_error for a non-monitor.
monitor::ZeusMonitor* monitor_of(PyObject* self) {
  if (zeus_monitor_type != nullptr && PyObject_TypeCheck(self, zeus_monitor_type) != 0) {
    auto* instance = reinterpret_cast<py::detail::instance*>(self);
    if (instance->simple_layout) {
      return instance->simple_holder_constructed
                 ? static_cast<monitor::ZeusMonitor*>(instance->simple_value_holder[0])
                 : nullptr;
    }
  }
  return py::cast<monitor::ZeusMonitor*>(py::handle(self));
}

// Arguments (self, key, flag_a=True, flag_b=False), positional or by keyword.
struct WindowArguments {
  monitor::ZeusMonitor* monitor = nullptr;
  std::string key;
  bool sync_execution = true;
  bool flag = false;  // restart or cancel
};

bool parse_flag(PyObject* value, const char* name, bool& out) {
  if (value == Py_True || value == Py_False) {
    out = value == Py_True;
    return true;
  }
  if (std::strcmp(Py_TYPE(value)->tp_name, "numpy.bool_") == 0) {
    const int truth = PyObject_IsTrue(value);
    if (truth < 0) {
      return false;
    }
    out = truth == 1;
    return true;
  }
  PyErr_Format(PyExc_TypeError, "%s must be a bool, not %s", name, Py_TYPE(value)->tp_name);
  return false;
}

bool parse_window_arguments(const char* method, const char* flag_name, PyObject* const* args,
                            Py_ssize_t nargs, PyObject* kwnames, WindowArguments& out) {
  PyObject* values[4] = {nullptr, nullptr, nullptr, nullptr};  // self, key, sync, flag
  if (nargs > 4) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most 3 arguments (%zd given)", method, nargs - 1);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    values[i] = args[i];
  }
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < keywords; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    int slot = -1;
    if (PyUnicode_CompareWithASCIIString(name, "key") == 0) {
      slot = 1;
    } else if (PyUnicode_CompareWithASCIIString(name, "sync_execution") == 0) {
      slot = 2;
    } else if (PyUnicode_CompareWithASCIIString(name, flag_name) == 0) {
      slot = 3;
    } else {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", method, name);
      return false;
    }
    if (values[slot] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", method, name);
      return false;
    }
    values[slot] = args[nargs + i];
  }
  if (values[0] == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s() needs a ZeusMonitor", method);
    return false;
  }
  if (values[1] == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument 'key'", method);
    return false;
  }
  try {
    out.monitor = monitor_of(values[0]);
  } catch (const py::cast_error&) {
    PyErr_Format(PyExc_TypeError, "%s() needs a ZeusMonitor, not %s", method,
                 Py_TYPE(values[0])->tp_name);
    return false;
  }
  if (out.monitor == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s(): the ZeusMonitor was not initialised (__init__ not called)",
                 method);
    return false;
  }
  if (!PyUnicode_Check(values[1])) {
    PyErr_Format(PyExc_TypeError, "key must be a str, not %s", Py_TYPE(values[1])->tp_name);
    return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(values[1], &size);
  if (data == nullptr) {
    return false;
  }
  out.key.assign(data, static_cast<std::size_t>(size));
  return (values[2] == nullptr || parse_flag(values[2], "sync_execution", out.sync_execution)) &&
         (values[3] == nullptr || parse_flag(values[3], flag_name, out.flag));
}

PyObject* begin_window_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  WindowArguments arguments;
  try {
    if (!parse_window_arguments("begin_window", "restart", args, nargs, kwnames, arguments)) {
      return nullptr;
    }
    arguments.monitor->begin_window(
        arguments.key, {.sync_execution = arguments.sync_execution, .restart = arguments.flag});
  } catch (...) {
    set_window_error(&arguments.key);
    return nullptr;
  }
  Py_RETURN_NONE;
}

// As the reference: a completed window in which a GPU measured exactly 0 J (its counter did not
// tick) calls warnings.warn with a UserWarning, each time (Python's filters decide whether it is
// shown: once per calling line by default), unless the monitor approximates such windows.
//
// Windows shorter than the counter's refresh period read 0 J on real GPUs, so this is a hot path
// too (docs/benchmarks.md): the attribute name and the message are made once (their hashes
// cached), the attribute is looked up without raising AttributeError when it is absent (the
// native class has none), and warnings.warn is called directly with the cached message (looked up
// on the module each time, so that a patched warnings.warn sees it, as it sees the reference's).
struct ZeroEnergyWarning {
  PyObject* approx_name = nullptr;  // "approx_instant_energy", interned
  PyObject* warn_name = nullptr;    // "warn", interned
  PyObject* warnings = nullptr;     // the warnings module
  PyObject* message = nullptr;
};

constexpr const char* kZeroEnergyMessage =
    "The energy consumption of one or more GPUs was measured as zero: the measurement window was "
    "shorter than the GPU's energy counter update period. Turn on approx_instant_energy in "
    "ZeusMonitor to approximate a short window's energy as instant power x window duration.";

// Made on first use and kept for the life of the process (the GIL is held). nullptr with an
// error set when the warnings module cannot be imported.
const ZeroEnergyWarning* zero_energy_warning() {
  static ZeroEnergyWarning warning;
  if (warning.message == nullptr) {
    PyObject* module = PyImport_ImportModule("warnings");
    if (module == nullptr) {
      return nullptr;
    }
    warning.warnings = module;
    warning.approx_name = PyUnicode_InternFromString("approx_instant_energy");
    warning.warn_name = PyUnicode_InternFromString("warn");
    warning.message = PyUnicode_FromString(kZeroEnergyMessage);
    if (warning.approx_name == nullptr || warning.warn_name == nullptr ||
        warning.message == nullptr) {
      warning.message = nullptr;
      return nullptr;
    }
    PyObject_Hash(warning.message);  // computed once, kept in the string
  }
  return &warning;
}

// The object's attribute `name` when it has one (a new reference), nullptr without raising when
// it has none; nullptr with an error set when reading it failed otherwise.
PyObject* optional_attribute(PyObject* object, PyObject* name) {
  PyObject* value = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  static_cast<void>(PyObject_GetOptionalAttr(object, name, &value));
#else
  static_cast<void>(_PyObject_LookupAttr(object, name, &value));
#endif
  return value;
}

bool warn_if_zero_energy(PyObject* self, const monitor::Measurement& measurement) {
  if (measurement.time_s <= 0.0) {
    return true;
  }
  bool zero = false;
  for (const auto& [index, energy_j] : measurement.gpu_energy_j) {
    zero = zero || energy_j == 0.0;
  }
  if (!zero) {
    return true;
  }
  const ZeroEnergyWarning* warning = zero_energy_warning();
  if (warning == nullptr) {
    return false;
  }
  if (PyObject* approx = optional_attribute(self, warning->approx_name); approx != nullptr) {
    const int truth = PyObject_IsTrue(approx);
    Py_DECREF(approx);
    if (truth == 1) {
      return true;
    }
  }
  PyErr_Clear();  // an attribute that cannot be read or judged is not approximating
  PyObject* warn = PyObject_GetAttr(warning->warnings, warning->warn_name);
  if (warn == nullptr) {
    return false;
  }
  PyObject* arguments[] = {warning->message, PyExc_UserWarning};
  PyObject* result = PyObject_Vectorcall(warn, arguments, 2, nullptr);
  Py_DECREF(warn);
  Py_XDECREF(result);
  return result != nullptr;
}

PyObject* end_window_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  WindowArguments arguments;
  try {
    if (!parse_window_arguments("end_window", "cancel", args, nargs, kwnames, arguments)) {
      return nullptr;
    }
    monitor::Measurement measurement = arguments.monitor->end_window(
        arguments.key, {.sync_execution = arguments.sync_execution, .cancel = arguments.flag});
    if (!arguments.flag && !warn_if_zero_energy(args[0], measurement)) {
      return nullptr;  // warnings turned into errors
    }
    return measurement_to_python(std::move(measurement)).release().ptr();
  } catch (...) {
    set_window_error(&arguments.key);
    return nullptr;
  }
}

PyMethodDef begin_window_def = {
    "begin_window", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(begin_window_fast)),
    METH_FASTCALL | METH_KEYWORDS,
    "begin_window(self, key, sync_execution=True, restart=False)\n--\n\n"
    "Opens the window `key`: ValueError if it is open, unless restart=True (which discards "
    "it). With sync_execution, waits for the GPUs first (see sync_execution_with)."};

PyMethodDef end_window_def = {
    "end_window", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(end_window_fast)),
    METH_FASTCALL | METH_KEYWORDS,
    "end_window(self, key, sync_execution=True, cancel=False)\n--\n\n"
    "Closes the window `key` and returns its Measurement (ValueError if it is not open). "
    "cancel=True returns zeros and logs nothing."};

// Adds `definition` to `cls` as a method (a PyCFunction bound like a Python function).
void add_fast_method(py::handle cls, PyMethodDef* definition) {
  py::object function =
      py::reinterpret_steal<py::object>(PyCFunction_NewEx(definition, nullptr, nullptr));
  if (!function) {
    throw py::error_already_set();
  }
  py::object method = py::reinterpret_steal<py::object>(PyInstanceMethod_New(function.ptr()));
  if (!method) {
    throw py::error_already_set();
  }
  py::setattr(cls, definition->ml_name, method);
}
}  // namespace

void add_window_calls(py::handle zeus_monitor_class) {
  zeus_monitor_type = reinterpret_cast<PyTypeObject*>(zeus_monitor_class.ptr());
  add_fast_method(zeus_monitor_class, &begin_window_def);
  add_fast_method(zeus_monitor_class, &end_window_def);
}

}  // namespace zeus::python
