// zeus_cpp._zeus: Measurement, WindowMonitor, ZeusMonitor and the power sampler behind
// zeus_cpp.monitor.PowerMonitor.
//
// The window calls are the hot path (docs/python.md, "Performance"): they hold the GIL (a
// snapshot takes well under a microsecond), take the key as a str without pybind11's generic
// conversion, and return a Measurement (a native type, not a pybind11 class) whose
// dictionaries are only built when first read.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/monitor/power_sampler.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::python {
namespace {

// ---- Measurement: a native CPython type ------------------------------------------------------
//
// Not a pybind11 class: creating a pybind11 instance registers it in pybind11's instance map,
// which costs more than the whole window. This type holds the C++ Measurement and builds the
// Python dicts on first access (then the dicts are the truth: a caller may modify them, as with
// the reference's dataclass).

struct MeasurementObject {
  PyObject ob_base;  // PyObject_HEAD
  monitor::Measurement value;
  PyObject* gpu;   // dict, or nullptr until built
  PyObject* cpu;   // dict or None, or nullptr until built
  PyObject* dram;  // dict or None, or nullptr until built
};

PyTypeObject* measurement_type = nullptr;

MeasurementObject* as_measurement(PyObject* object) {
  return reinterpret_cast<MeasurementObject*>(object);
}

PyObject* to_dict(const monitor::EnergyByIndex& values) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr) {
    return nullptr;
  }
  for (const auto& [index, energy] : values) {
    PyObject* key = PyLong_FromLong(index);
    PyObject* item = PyFloat_FromDouble(energy);
    const int failed = (key == nullptr || item == nullptr) ? -1 : PyDict_SetItem(dict, key, item);
    Py_XDECREF(key);
    Py_XDECREF(item);
    if (failed != 0) {
      Py_DECREF(dict);
      return nullptr;
    }
  }
  return dict;
}

// An energy mapping from Python ({int: float}) for `parameter`; None -> empty. Returns false with
// a TypeError set when it is not one.
bool from_dict(PyObject* object, const char* parameter, monitor::EnergyByIndex& values) {
  values.clear();
  if (object == Py_None) {
    return true;
  }
  if (!PyDict_Check(object)) {
    PyErr_Format(PyExc_TypeError, "%s must be a dict of int to float, not %s", parameter,
                 Py_TYPE(object)->tp_name);
    return false;
  }
  PyObject* key = nullptr;
  PyObject* item = nullptr;
  Py_ssize_t position = 0;
  while (PyDict_Next(object, &position, &key, &item) != 0) {
    const long index = PyLong_Check(key) != 0 ? PyLong_AsLong(key) : -1;
    const double energy = PyFloat_AsDouble(item);
    if (PyLong_Check(key) == 0 || PyErr_Occurred() != nullptr) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s must be a dict of int to float", parameter);
      return false;
    }
    values.set(static_cast<int>(index), energy);
  }
  return true;
}

// The cached dict of one field, built on first access. New reference, or nullptr with an error.
PyObject* field(PyObject*& cache, const monitor::EnergyByIndex& values, bool none_when_empty) {
  if (cache == nullptr) {
    if (none_when_empty && values.empty()) {
      Py_INCREF(Py_None);
      cache = Py_None;
    } else {
      cache = to_dict(values);
      if (cache == nullptr) {
        return nullptr;
      }
    }
  }
  Py_INCREF(cache);
  return cache;
}

PyObject* gpu_field(MeasurementObject* self) {
  return field(self->gpu, self->value.gpu_energy_j, false);
}
PyObject* cpu_field(MeasurementObject* self) {
  return field(self->cpu, self->value.cpu_energy_j, true);
}
PyObject* dram_field(MeasurementObject* self) {
  return field(self->dram, self->value.dram_energy_j, true);
}

// Replaces a field with `value` (a dict, or None where allowed). 0, or -1 with an error.
int set_field(PyObject*& cache, monitor::EnergyByIndex& values, PyObject* value, const char* name) {
  if (value == nullptr) {
    PyErr_Format(PyExc_AttributeError, "%s cannot be deleted", name);
    return -1;
  }
  if (!from_dict(value, name, values)) {
    return -1;
  }
  Py_INCREF(value);
  Py_XSETREF(cache, value);
  return 0;
}

PyObject* new_measurement(monitor::Measurement value) {
  PyObject* object = measurement_type->tp_alloc(measurement_type, 0);
  if (object == nullptr) {
    return nullptr;
  }
  MeasurementObject* self = as_measurement(object);
  new (&self->value) monitor::Measurement(std::move(value));
  self->gpu = nullptr;
  self->cpu = nullptr;
  self->dram = nullptr;
  return object;
}

PyObject* measurement_new(PyTypeObject* type, PyObject* /*args*/, PyObject* /*kwargs*/) {
  PyObject* object = type->tp_alloc(type, 0);
  if (object != nullptr) {
    new (&as_measurement(object)->value) monitor::Measurement();
  }
  return object;
}

void measurement_dealloc(PyObject* object) {
  MeasurementObject* self = as_measurement(object);
  self->value.~Measurement();
  Py_XDECREF(self->gpu);
  Py_XDECREF(self->cpu);
  Py_XDECREF(self->dram);
  PyTypeObject* type = Py_TYPE(object);
  type->tp_free(object);
  Py_DECREF(type);  // a heap type
}

int measurement_init(PyObject* object, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"time",        "gpu_energy", "cpu_energy",
                                   "dram_energy", "soc_energy", nullptr};
  PyObject* time = nullptr;
  PyObject* gpu = nullptr;
  PyObject* cpu = Py_None;
  PyObject* dram = Py_None;
  PyObject* soc = Py_None;
  if (PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOO:Measurement", const_cast<char**>(keywords),
                                  &time, &gpu, &cpu, &dram, &soc) == 0) {
    return -1;
  }
  if (PyBool_Check(time) || (PyFloat_Check(time) == 0 && PyLong_Check(time) == 0)) {
    PyErr_Format(PyExc_TypeError, "time must be a number, not %s", Py_TYPE(time)->tp_name);
    return -1;
  }
  if (soc != Py_None) {
    PyErr_SetString(PyExc_ValueError, "soc_energy must be None: zeus_cpp measures no SoC");
    return -1;
  }
  if (gpu == Py_None) {
    PyErr_SetString(PyExc_TypeError, "gpu_energy must be a dict of int to float, not None");
    return -1;
  }
  MeasurementObject* self = as_measurement(object);
  self->value.time_s = PyFloat_AsDouble(time);
  if (set_field(self->gpu, self->value.gpu_energy_j, gpu, "gpu_energy") != 0 ||
      set_field(self->cpu, self->value.cpu_energy_j, cpu, "cpu_energy") != 0 ||
      set_field(self->dram, self->value.dram_energy_j, dram, "dram_energy") != 0) {
    return -1;
  }
  return 0;
}

PyObject* get_time(PyObject* object, void*) {
  return PyFloat_FromDouble(as_measurement(object)->value.time_s);
}
int set_time(PyObject* object, PyObject* value, void*) {
  if (value == nullptr || PyBool_Check(value) ||
      (PyFloat_Check(value) == 0 && PyLong_Check(value) == 0)) {
    PyErr_SetString(PyExc_TypeError, "time must be a number");
    return -1;
  }
  as_measurement(object)->value.time_s = PyFloat_AsDouble(value);
  return PyErr_Occurred() != nullptr ? -1 : 0;
}
PyObject* get_gpu(PyObject* object, void*) {
  return gpu_field(as_measurement(object));
}
PyObject* get_cpu(PyObject* object, void*) {
  return cpu_field(as_measurement(object));
}
PyObject* get_dram(PyObject* object, void*) {
  return dram_field(as_measurement(object));
}
int set_gpu(PyObject* object, PyObject* value, void*) {
  MeasurementObject* self = as_measurement(object);
  if (value == Py_None) {
    PyErr_SetString(PyExc_TypeError, "gpu_energy must be a dict of int to float, not None");
    return -1;
  }
  return set_field(self->gpu, self->value.gpu_energy_j, value, "gpu_energy");
}
int set_cpu(PyObject* object, PyObject* value, void*) {
  MeasurementObject* self = as_measurement(object);
  return set_field(self->cpu, self->value.cpu_energy_j, value, "cpu_energy");
}
int set_dram(PyObject* object, PyObject* value, void*) {
  MeasurementObject* self = as_measurement(object);
  return set_field(self->dram, self->value.dram_energy_j, value, "dram_energy");
}
PyObject* get_soc(PyObject*, void*) {
  Py_RETURN_NONE;
}

// Sum of the GPU energy (J): from the dict once Python has it (it may have been modified).
PyObject* get_total(PyObject* object, void*) {
  MeasurementObject* self = as_measurement(object);
  if (self->gpu == nullptr) {
    return PyFloat_FromDouble(self->value.gpu_energy_j.sum());
  }
  monitor::EnergyByIndex values;
  if (!from_dict(self->gpu, "gpu_energy", values)) {
    return nullptr;
  }
  return PyFloat_FromDouble(values.sum());
}

// The measurement with the dicts' current contents.
bool current_value(MeasurementObject* self, monitor::Measurement& result) {
  result.time_s = self->value.time_s;
  return from_dict(self->gpu != nullptr ? self->gpu : Py_None, "gpu_energy", result.gpu_energy_j) &&
         (self->gpu != nullptr || (result.gpu_energy_j = self->value.gpu_energy_j, true)) &&
         (self->cpu == nullptr ? (result.cpu_energy_j = self->value.cpu_energy_j, true)
                               : from_dict(self->cpu, "cpu_energy", result.cpu_energy_j)) &&
         (self->dram == nullptr ? (result.dram_energy_j = self->value.dram_energy_j, true)
                                : from_dict(self->dram, "dram_energy", result.dram_energy_j));
}

PyObject* measurement_repr(PyObject* object) {
  MeasurementObject* self = as_measurement(object);
  py::object time = py::reinterpret_steal<py::object>(get_time(object, nullptr));
  py::object gpu = py::reinterpret_steal<py::object>(gpu_field(self));
  py::object cpu = py::reinterpret_steal<py::object>(cpu_field(self));
  py::object dram = py::reinterpret_steal<py::object>(dram_field(self));
  if (!time || !gpu || !cpu || !dram) {
    return nullptr;
  }
  return PyUnicode_FromFormat(
      "%s(time=%R, gpu_energy=%R, cpu_energy=%R, dram_energy=%R, soc_energy=None)",
      _PyType_Name(Py_TYPE(object)), time.ptr(), gpu.ptr(), cpu.ptr(), dram.ptr());
}

PyObject* measurement_richcompare(PyObject* left, PyObject* right, int op) {
  if ((op != Py_EQ && op != Py_NE) || PyObject_TypeCheck(right, measurement_type) == 0) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  MeasurementObject* a = as_measurement(left);
  MeasurementObject* b = as_measurement(right);
  bool equal = a->value.time_s == b->value.time_s;
  PyObject* (*fields[])(MeasurementObject*) = {gpu_field, cpu_field, dram_field};
  for (auto* get : fields) {
    if (!equal) {
      break;
    }
    PyObject* x = get(a);
    PyObject* y = get(b);
    const int same = (x == nullptr || y == nullptr) ? -1 : PyObject_RichCompareBool(x, y, Py_EQ);
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (same < 0) {
      return nullptr;
    }
    equal = same == 1;
  }
  return PyBool_FromLong((op == Py_EQ) == equal ? 1 : 0);
}

PyObject* measurement_reduce(PyObject* object, PyObject*) {
  MeasurementObject* self = as_measurement(object);
  PyObject* gpu = gpu_field(self);
  PyObject* cpu = cpu_field(self);
  PyObject* dram = dram_field(self);
  PyObject* result = nullptr;
  if (gpu != nullptr && cpu != nullptr && dram != nullptr) {
    result = Py_BuildValue("O(dOOO)", reinterpret_cast<PyObject*>(Py_TYPE(object)),
                           self->value.time_s, gpu, cpu, dram);
  }
  Py_XDECREF(gpu);
  Py_XDECREF(cpu);
  Py_XDECREF(dram);
  return result;
}

PyGetSetDef measurement_getset[] = {
    {"time", get_time, set_time, "Elapsed time (s).", nullptr},
    {"gpu_energy", get_gpu, set_gpu, "Energy (J) per GPU index.", nullptr},
    {"cpu_energy", get_cpu, set_cpu, "Energy (J) per CPU package index, or None without CPU data.",
     nullptr},
    {"dram_energy", get_dram, set_dram,
     "DRAM energy (J) per CPU package index, or None without DRAM data.", nullptr},
    {"soc_energy", get_soc, nullptr, "Always None (zeus_cpp measures no SoC).", nullptr},
    {"total_energy", get_total, nullptr,
     "Total GPU energy (J), as the reference (CPU and DRAM not included).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef measurement_methods[] = {
    {"__reduce__", measurement_reduce, METH_NOARGS, "Pickle support."},
    {nullptr, nullptr, 0, nullptr},
};

void create_measurement_type(py::module_& module) {
  static PyType_Slot slots[] = {
      {Py_tp_doc,
       const_cast<char*>(
           "Measurement(time, gpu_energy, cpu_energy=None, dram_energy=None, soc_energy=None)\n"
           "--\n\n"
           "What a window measured: time (s) and energy (J) per GPU, CPU package and DRAM.")},
      {Py_tp_new, reinterpret_cast<void*>(measurement_new)},
      {Py_tp_init, reinterpret_cast<void*>(measurement_init)},
      {Py_tp_dealloc, reinterpret_cast<void*>(measurement_dealloc)},
      {Py_tp_repr, reinterpret_cast<void*>(measurement_repr)},
      {Py_tp_richcompare, reinterpret_cast<void*>(measurement_richcompare)},
      {Py_tp_hash, reinterpret_cast<void*>(PyObject_HashNotImplemented)},
      {Py_tp_getset, measurement_getset},
      {Py_tp_methods, measurement_methods},
      {0, nullptr},
  };
  static PyType_Spec spec = {
      "zeus_cpp._zeus.Measurement",
      static_cast<int>(sizeof(MeasurementObject)),
      0,
      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
      slots,
  };
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) {
    throw py::error_already_set();
  }
  measurement_type = reinterpret_cast<PyTypeObject*>(type);
  Py_INCREF(type);  // kept for the life of the process
  module.add_object("Measurement", type);
}

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
// tick) is a Python UserWarning, unless the monitor approximates such windows. Only looked at
// when a zero is found, so the common path costs one pass over the GPU energies.
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
  PyObject* approx = PyObject_GetAttrString(self, "approx_instant_energy");
  if (approx == nullptr) {
    PyErr_Clear();
  } else {
    const int truth = PyObject_IsTrue(approx);
    Py_DECREF(approx);
    if (truth == 1) {
      return true;
    }
    PyErr_Clear();
  }
  return PyErr_WarnEx(PyExc_UserWarning,
                      "The energy consumption of one or more GPUs was measured as zero: the "
                      "measurement window was shorter than the GPU's energy counter update "
                      "period. Turn on approx_instant_energy in ZeusMonitor to approximate a "
                      "short window's energy as instant power x window duration.",
                      1) == 0;
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
    return new_measurement(std::move(measurement));
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

// ---- Power sampler (PowerMonitor) ----------------------------------------------------------

// A PowerSampler over the process's GPUs, with times converted to wall-clock seconds
// (time.time(), as the reference's timelines).
struct PySampler {
  std::unique_ptr<monitor::PowerSampler> sampler;
  double wall_offset_s = 0.0;  // wall-clock seconds minus steady-clock seconds

  std::int64_t to_steady_ns(double wall_s) const {
    return static_cast<std::int64_t>((wall_s - wall_offset_s) * 1e9);
  }
  std::optional<std::int64_t> to_steady_ns(std::optional<double> wall_s) const {
    return wall_s ? std::optional<std::int64_t>(to_steady_ns(*wall_s)) : std::nullopt;
  }
  double to_wall_s(std::int64_t steady_ns) const {
    return static_cast<double>(steady_ns) * 1e-9 + wall_offset_s;
  }
};

}  // namespace

// Keeps a Python object in C++ objects that may be released on any thread: the reference is
// dropped with the GIL held (and not at all once the interpreter is gone).
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

py::object measurement_to_python(monitor::Measurement measurement) {
  PyObject* object = new_measurement(std::move(measurement));
  if (object == nullptr) {
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(object);
}

bool is_measurement(py::handle object) {
  return measurement_type != nullptr && PyObject_TypeCheck(object.ptr(), measurement_type) != 0;
}

monitor::Measurement measurement_from_python(py::handle object) {
  if (!is_measurement(object)) {
    throw py::type_error(std::string("a zeus_cpp Measurement is needed, not ") +
                         Py_TYPE(object.ptr())->tp_name);
  }
  monitor::Measurement result;
  if (!current_value(as_measurement(object.ptr()), result)) {
    throw py::error_already_set();
  }
  return result;
}

void bind_monitor(py::module_& module) {
  create_measurement_type(module);

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
  zeus_monitor_type = reinterpret_cast<PyTypeObject*>(zeus_monitor.ptr());
  // The hot path: begin_window/end_window as METH_FASTCALL functions (see above).
  add_fast_method(zeus_monitor, &begin_window_def);
  add_fast_method(zeus_monitor, &end_window_def);
  zeus_monitor
      .def("reset_windows", &monitor::ZeusMonitor::reset_windows, "Drops every open window.")
      .def("open_windows", &monitor::ZeusMonitor::open_windows,
           "The names of the open windows, sorted.")
      .def_property_readonly(
          "gpu_indices", [](const monitor::ZeusMonitor& self) { return self.gpu_indices(); },
          "The GPU indices measured, in order.")
      .def_property_readonly(
          "cpu_indices", [](const monitor::ZeusMonitor& self) { return self.cpu_indices(); },
          "The CPU package indices measured, in order.");

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

  // ---- Power sampler ----
  py::class_<PySampler>(module, "PowerSampler",
                        "Native part of zeus_cpp.monitor.PowerMonitor (a background thread).")
      .def(py::init([](std::optional<std::vector<int>> gpu_indices,
                       const std::vector<std::string>& domains, std::optional<double> period_s,
                       std::optional<std::size_t> max_samples, bool temperature) {
             monitor::PowerSamplerOptions options;
             options.temperature = temperature;
             if (gpu_indices) {
               options.gpu_indices = *gpu_indices;
             }
             options.domains.clear();
             for (const std::string& domain : domains) {
               options.domains.push_back(monitor::parse_power_domain(domain));
             }
             options.period_s = period_s;
             if (max_samples) {
               options.max_samples_per_series = *max_samples;
             }
             auto result = std::make_unique<PySampler>();
             const auto wall =
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch());
             result->wall_offset_s = wall.count() - steady_clock()->now_s();
             py::gil_scoped_release release;  // inferring the period polls for a while
             result->sampler =
                 std::make_unique<monitor::PowerSampler>(device::get_gpus(), std::move(options));
             return result;
           }),
           py::arg("gpu_indices"), py::arg("domains"), py::arg("period_s"), py::arg("max_samples"),
           py::arg("temperature") = false)
      .def_property_readonly("period_s",
                             [](const PySampler& self) { return self.sampler->period_s(); })
      .def_property_readonly("gpu_indices",
                             [](const PySampler& self) { return self.sampler->gpu_indices(); })
      .def_property_readonly("domains",
                             [](const PySampler& self) {
                               std::vector<std::string> names;
                               for (const monitor::PowerDomain domain : self.sampler->domains()) {
                                 names.emplace_back(monitor::power_domain_name(domain));
                               }
                               return names;
                             })
      .def_property_readonly("dropped_samples",
                             [](const PySampler& self) { return self.sampler->dropped_samples(); })
      .def(
          "timeline",
          [](const PySampler& self, const std::string& domain, int gpu_index,
             std::optional<double> start_time, std::optional<double> end_time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> start_ns = self.to_steady_ns(start_time);
            const std::optional<std::int64_t> end_ns = self.to_steady_ns(end_time);
            const std::vector<monitor::PowerSample> samples = self.sampler->timeline(
                monitor::parse_power_domain(domain), gpu_index, start_ns, end_ns);
            py::array_t<double> array({static_cast<py::ssize_t>(samples.size()), py::ssize_t{2}});
            auto view = array.mutable_unchecked<2>();
            for (std::size_t i = 0; i < samples.size(); ++i) {
              const auto row = static_cast<py::ssize_t>(i);
              view(row, 0) = self.to_wall_s(samples[i].time_ns);
              view(row, 1) = samples[i].power_w;
            }
            return array;
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("start_time") = py::none(),
          py::arg("end_time") = py::none(),
          "Samples as an (n, 2) float64 array of (time.time() seconds, W).")
      .def(
          "power",
          [](const PySampler& self, const std::string& domain, int gpu_index,
             std::optional<double> time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> time_ns = self.to_steady_ns(time);
            return self.sampler->power_w(monitor::parse_power_domain(domain), gpu_index, time_ns);
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("time") = py::none(),
          "The power (W) in force at `time` (the latest when None), or None.")
      .def(
          "energy",
          [](const PySampler& self, const std::string& domain, int gpu_index, double start_time,
             double end_time) -> double {
            self.sampler->rethrow_if_failed();
            const monitor::PowerDomain parsed = monitor::parse_power_domain(domain);
            const std::int64_t start_ns = self.to_steady_ns(start_time);
            const std::int64_t end_ns = self.to_steady_ns(end_time);
            if (const auto exact = self.sampler->energy_j(parsed, gpu_index, start_ns, end_ns)) {
              return *exact;
            }
            const double end =
                self.sampler->cumulative_energy_j(parsed, gpu_index, end_ns).value_or(0.0);
            const double start =
                self.sampler->cumulative_energy_j(parsed, gpu_index, start_ns).value_or(0.0);
            return end > start ? end - start : 0.0;
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("start_time"), py::arg("end_time"),
          "Energy (J) of the held power signal over [start_time, end_time].")
      .def(
          "temperature_timeline",
          [](const PySampler& self, int gpu_index, std::optional<double> start_time,
             std::optional<double> end_time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> start_ns = self.to_steady_ns(start_time);
            const std::optional<std::int64_t> end_ns = self.to_steady_ns(end_time);
            py::list result;
            for (const monitor::TemperatureSample& sample :
                 self.sampler->temperature_timeline(gpu_index, start_ns, end_ns)) {
              result.append(py::make_tuple(self.to_wall_s(sample.time_ns), sample.temperature_c));
            }
            return result;
          },
          py::arg("gpu_index"), py::arg("start_time") = py::none(),
          py::arg("end_time") = py::none(),
          "The temperature changes as a list of (time.time() seconds, degrees C).")
      .def(
          "temperature",
          [](const PySampler& self, int gpu_index, std::optional<double> time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> time_ns = self.to_steady_ns(time);
            return self.sampler->temperature_c(gpu_index, time_ns);
          },
          py::arg("gpu_index"), py::arg("time") = py::none(),
          "The temperature (degrees C) in force at `time` (the latest when None), or None.")
      .def("sample_once", [](PySampler& self) { self.sampler->sample_once(); })
      .def(
          "stop",
          [](PySampler& self) {
            py::gil_scoped_release release;
            self.sampler->stop();
          },
          "Stops the thread (idempotent).");
}

}  // namespace zeus::python
