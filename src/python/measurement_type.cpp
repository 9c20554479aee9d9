// zeus_cpp._zeus.Measurement: what a window measured, as a native CPython type.
//
// Not a pybind11 class: creating a pybind11 instance registers it in pybind11's instance map,
// which costs more than the whole window (docs/python.md, "Performance"). This type holds the C++
// Measurement and builds the Python dicts on first access (then the dicts are the truth: a caller
// may modify them, as with the reference's dataclass).
//
// The bottom of the monitor bindings: it calls nothing of theirs. window_calls.cpp returns these
// from the fast window calls, monitor_adapter.cpp reads them back from Python monitors, and the
// pybind11 type caster of bindings.hpp converts them for every other binding.
#include <new>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "zeus/monitor/measurement.hpp"

namespace zeus::python {
namespace {

struct MeasurementObject {
  PyObject ob_base;  // PyObject_HEAD
  monitor::Measurement value;
  PyObject* gpu;   // dict, or nullptr until built
  PyObject* cpu;   // dict or None, or nullptr until built
  PyObject* dram;  // dict or None, or nullptr until built
  PyObject* soc;   // a JetsonMeasurement (or what was given) or None, or nullptr until built
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
// The SoC's energy as the reference gives it: a JetsonMeasurement in mJ (built by
// zeus_cpp.device.soc.jetson from the rails), or None without a SoC. New reference.
PyObject* soc_field(MeasurementObject* self) {
  if (self->soc == nullptr) {
    if (!self->value.soc_energy) {
      Py_INCREF(Py_None);
      self->soc = Py_None;
    } else {
      try {
        py::list rails;
        for (const monitor::RailEnergy& rail : self->value.soc_energy->rails) {
          rails.append(py::make_tuple(rail.name, std::string(device::rail_kind_name(rail.kind)),
                                      rail.energy_j));
        }
        py::object built = py::module_::import("zeus_cpp.device.soc.jetson")
                               .attr("JetsonMeasurement")
                               .attr("_from_rails")(rails, self->value.soc_energy->skipped_reads);
        self->soc = built.release().ptr();
      } catch (py::error_already_set& error) {
        error.restore();
        return nullptr;
      }
    }
  }
  Py_INCREF(self->soc);
  return self->soc;
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

PyObject* new_measurement(monitor::Measurement&& value) {
  PyObject* object = measurement_type->tp_alloc(measurement_type, 0);
  if (object == nullptr) {
    return nullptr;
  }
  MeasurementObject* self = as_measurement(object);
  new (&self->value) monitor::Measurement(std::move(value));
  self->gpu = nullptr;
  self->cpu = nullptr;
  self->dram = nullptr;
  self->soc = nullptr;
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
  Py_XDECREF(self->soc);
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
  Py_INCREF(soc);
  Py_XSETREF(self->soc, soc);
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
PyObject* get_soc(PyObject* object, void*) {
  return soc_field(as_measurement(object));
}
int set_soc(PyObject* object, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "soc_energy cannot be deleted");
    return -1;
  }
  Py_INCREF(value);
  Py_XSETREF(as_measurement(object)->soc, value);
  return 0;
}
// Not one of the reference's fields: a fresh dict on each read, from the monitor's bounds and
// the window's time (None for a measurement made otherwise, whose error is unknown).
PyObject* get_gpu_error(PyObject* object, void*) {
  const monitor::Measurement& value = as_measurement(object)->value;
  if (value.gpu_error_bounds == nullptr) {
    Py_RETURN_NONE;
  }
  return to_dict(value.gpu_energy_error_j());
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
  result.gpu_error_bounds = self->value.gpu_error_bounds;
  result.soc_energy = self->value.soc_energy;  // a SoC field set from Python stays in Python
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
  py::object soc = py::reinterpret_steal<py::object>(soc_field(self));
  if (!time || !gpu || !cpu || !dram || !soc) {
    return nullptr;
  }
  return PyUnicode_FromFormat(
      "%s(time=%R, gpu_energy=%R, cpu_energy=%R, dram_energy=%R, soc_energy=%R)",
      _PyType_Name(Py_TYPE(object)), time.ptr(), gpu.ptr(), cpu.ptr(), dram.ptr(), soc.ptr());
}

PyObject* measurement_richcompare(PyObject* left, PyObject* right, int op) {
  if ((op != Py_EQ && op != Py_NE) || PyObject_TypeCheck(right, measurement_type) == 0) {
    Py_RETURN_NOTIMPLEMENTED;
  }
  MeasurementObject* a = as_measurement(left);
  MeasurementObject* b = as_measurement(right);
  bool equal = a->value.time_s == b->value.time_s;
  PyObject* (*fields[])(MeasurementObject*) = {gpu_field, cpu_field, dram_field, soc_field};
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
  PyObject* soc = soc_field(self);
  PyObject* result = nullptr;
  if (gpu != nullptr && cpu != nullptr && dram != nullptr && soc != nullptr) {
    result = Py_BuildValue("O(dOOOO)", reinterpret_cast<PyObject*>(Py_TYPE(object)),
                           self->value.time_s, gpu, cpu, dram, soc);
  }
  Py_XDECREF(gpu);
  Py_XDECREF(cpu);
  Py_XDECREF(dram);
  Py_XDECREF(soc);
  return result;
}

PyGetSetDef measurement_getset[] = {
    {"time", get_time, set_time, "Elapsed time (s).", nullptr},
    {"gpu_energy", get_gpu, set_gpu, "Energy (J) per GPU index.", nullptr},
    {"cpu_energy", get_cpu, set_cpu, "Energy (J) per CPU package index, or None without CPU data.",
     nullptr},
    {"dram_energy", get_dram, set_dram,
     "DRAM energy (J) per CPU package index, or None without DRAM data.", nullptr},
    {"soc_energy", get_soc, set_soc,
     "The SoC's energy (a Jetson: zeus_cpp.device.soc.jetson.JetsonMeasurement, mJ), or None "
     "without a SoC.",
     nullptr},
    {"total_energy", get_total, nullptr,
     "Total GPU energy (J), as the reference (CPU and DRAM not included).", nullptr},
    {"gpu_energy_error", get_gpu_error, nullptr,
     "A zeus_cpp addition: the bound on each GPU energy's error (J) per GPU index, from the "
     "GPU's sensor and the window's length (docs/monitor.md, \"Error bounds\"); None when the "
     "Measurement was not made by a ZeusMonitor.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyMethodDef measurement_methods[] = {
    {"__reduce__", measurement_reduce, METH_NOARGS, "Pickle support."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void bind_measurement(py::module_& module) {
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

}  // namespace zeus::python
