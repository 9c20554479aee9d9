// Bindings of the power-limit optimizer (zeus::PowerLimitOptimizer), its selectors, the Reducer
// interface (a trampoline lets Python supply a torch.distributed reducer), the Zeus cost and the
// power-limit profile file. zeus_cpp.optimizer.power_limit wraps these in the reference's API.
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"
#include "zeus/runtime/reducer.hpp"

namespace zeus::python {
namespace {

using optimizer::OptimumSelector;
using optimizer::PowerLimitMeasurement;

// ---- Argument checks: a wrong type is a TypeError, a bad value a ValueError; both name the
// parameter. ----

std::string type_name(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
}

bool is_bool(py::handle object) {
  return PyBool_Check(object.ptr()) != 0;
}

double number_arg(py::handle object, const char* name) {
  if (is_bool(object) || !(PyFloat_Check(object.ptr()) || PyLong_Check(object.ptr()) ||
                           py::hasattr(object, "__float__"))) {
    throw py::type_error(std::string(name) + " must be a number, not " + type_name(object));
  }
  const double value = object.cast<double>();
  if (!std::isfinite(value)) {
    throw py::value_error(std::string(name) + " must be a finite number, got " +
                          py::repr(object).cast<std::string>());
  }
  return value;
}

long long int_arg(py::handle object, const char* name) {
  if (is_bool(object) || !PyIndex_Check(object.ptr())) {
    throw py::type_error(std::string(name) + " must be an int, not " + type_name(object));
  }
  return py::int_(py::reinterpret_borrow<py::object>(object)).cast<long long>();
}

int int_in_range(py::handle object, const char* name, long long minimum) {
  const long long value = int_arg(object, name);
  if (value < minimum) {
    throw py::value_error(std::string(name) + " must be at least " + std::to_string(minimum) +
                          ", got " + std::to_string(value));
  }
  if (value > 1'000'000'000LL) {
    throw py::value_error(std::string(name) + " is too large: " + std::to_string(value));
  }
  return static_cast<int>(value);
}

// An int for an option that the C++ side checks (PowerLimitOptimizerOptions): a TypeError for
// another type; only a value past the range of a C++ int is refused here.
int int_option(py::handle object, const char* name) {
  const long long value = int_arg(object, name);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    throw py::value_error(std::string(name) + " is out of range: " + std::to_string(value));
  }
  return static_cast<int>(value);
}

// A C++ object owned by a Python object, kept alive (with its Python part, for a Python
// subclass) as long as C++ holds the returned pointer. Released with the GIL held.
template <class T>
std::shared_ptr<T> shared_from_python(py::handle object) {
  auto held = object.cast<std::shared_ptr<T>>();
  T* raw = held.get();
  auto* keep = new py::object(py::reinterpret_borrow<py::object>(object));
  return std::shared_ptr<T>(raw, [held = std::move(held), keep](T*) mutable {
    if (Py_IsInitialized() == 0) {
      keep->release();  // the interpreter is gone: nothing to release
      delete keep;
      return;
    }
    py::gil_scoped_acquire gil;
    held.reset();
    delete keep;
  });
}

// ---- Selectors ----

// Lets a Python class derive from OptimumSelector and implement select().
class PyOptimumSelector : public OptimumSelector {
 public:
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override {
    PYBIND11_OVERRIDE_PURE(int, OptimumSelector, select, measurements);
  }
  std::string describe() const override {
    py::gil_scoped_acquire gil;
    if (py::function override = py::get_override(this, "describe")) {
      return override().cast<std::string>();
    }
    if (py::function select = py::get_override(this, "select")) {
      // A bound method: name the Python class.
      return type_name(select.attr("__self__"));
    }
    return "OptimumSelector";
  }
};

// The reference's selectors, with their parameters readable (the policy core's are private).
class ZeusCost final : public OptimumSelector {
 public:
  ZeusCost(double eta_knob, int world_size)
      : impl_(eta_knob, world_size), eta_knob_(eta_knob), world_size_(world_size) {}
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override {
    return impl_.select(measurements);
  }
  std::string describe() const override { return impl_.describe(); }
  double eta_knob() const { return eta_knob_; }
  int world_size() const { return world_size_; }

 private:
  optimizer::ZeusCostSelector impl_;
  double eta_knob_;
  int world_size_;
};

class MaxSlowdownConstraint final : public OptimumSelector {
 public:
  explicit MaxSlowdownConstraint(double factor) : impl_(factor), factor_(factor) {}
  int select(const std::vector<PowerLimitMeasurement>& measurements) const override {
    return impl_.select(measurements);
  }
  std::string describe() const override { return impl_.describe(); }
  double factor() const { return factor_; }

 private:
  optimizer::MaxSlowdownSelector impl_;
  double factor_;
};

// select() on an empty list is a ValueError (as min() of an empty list is in the reference).
int select_checked(const OptimumSelector& selector,
                   const std::vector<PowerLimitMeasurement>& measurements) {
  if (measurements.empty()) {
    throw py::value_error("measurements must not be empty");
  }
  return selector.select(measurements);
}

std::vector<PowerLimitMeasurement> measurements_arg(py::handle object, const char* name) {
  if (py::isinstance<py::str>(object) || !py::hasattr(object, "__iter__")) {
    throw py::type_error(std::string(name) + " must be a list of PowerLimitMeasurement, not " +
                         type_name(object));
  }
  std::vector<PowerLimitMeasurement> result;
  std::size_t position = 0;
  for (py::handle item : py::iter(object)) {
    if (!py::isinstance<PowerLimitMeasurement>(item)) {
      throw py::type_error(std::string(name) + "[" + std::to_string(position) +
                           "] must be a PowerLimitMeasurement, not " + type_name(item));
    }
    result.push_back(item.cast<PowerLimitMeasurement>());
    ++position;
  }
  return result;
}

std::string measurement_repr(const PowerLimitMeasurement& m) {
  return "PowerLimitMeasurement(power_limit=" + std::to_string(m.power_limit_w) +
         ", energy=" + py::repr(py::float_(m.energy_j)).cast<std::string>() +
         ", time=" + py::repr(py::float_(m.time_s)).cast<std::string>() + ")";
}

// ---- Reducer ----

class PyReducer : public runtime::Reducer {
 public:
  double sum(double value) override {
    PYBIND11_OVERRIDE_PURE(double, runtime::Reducer, sum, value);
  }
  double max(double value) override {
    PYBIND11_OVERRIDE_PURE(double, runtime::Reducer, max, value);
  }
  int world_size() const override { PYBIND11_OVERRIDE_PURE(int, runtime::Reducer, world_size, ); }
};

// ---- The optimizer ----

// Owns the C++ optimizer so that close() can restore the maximum power limit (its destructor,
// which leaves the GPUs alone while another live optimizer manages them) before the Python object
// goes away (the Python wrapper calls it at exit).
class PowerLimitOptimizerHandle {
 public:
  explicit PowerLimitOptimizerHandle(std::unique_ptr<runtime::PowerLimitOptimizer> impl)
      : impl_(std::move(impl)) {}

  runtime::PowerLimitOptimizer& get() const {
    if (!impl_) {
      throw py::value_error("the power-limit optimizer was closed");
    }
    return *impl_;
  }
  void close() { impl_.reset(); }
  bool closed() const { return !impl_; }

 private:
  std::unique_ptr<runtime::PowerLimitOptimizer> impl_;
};

// The state as (name, power limit in mW, steps or None).
py::tuple state_tuple(const runtime::PowerLimitOptimizerState& state) {
  return std::visit(
      [](const auto& s) -> py::tuple {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, runtime::plo_state::Ready>) {
          return py::make_tuple("Ready", s.next_power_limit_mw, s.steps);
        } else if constexpr (std::is_same_v<S, runtime::plo_state::Warmup>) {
          return py::make_tuple("Warmup", s.power_limit_mw, s.steps);
        } else if constexpr (std::is_same_v<S, runtime::plo_state::Profiling>) {
          return py::make_tuple("Profiling", s.power_limit_mw, s.steps);
        } else {
          return py::make_tuple("Done", s.optimal_power_limit_mw, py::none());
        }
      },
      state);
}

// zeus::Error from the optimizer's constructor: bad options and GPUs whose ranges differ are
// ValueErrors (as in the reference); device errors go through the exception table.
[[noreturn]] void rethrow_constructor_error(const Error& error) {
  if (error.kind() == ErrorKind::kInvalidArgument) {
    throw py::value_error(error.what());
  }
  throw_translated(error);
}

std::unique_ptr<PowerLimitOptimizerHandle> make_optimizer(
    const py::object& monitor, const py::object& selector, const py::object& wait_steps,
    const py::object& warmup_steps, const py::object& profile_steps, const py::object& pl_step,
    const py::object& profile_path, const py::object& reducer, bool restore_on_signal) {
  runtime::PowerLimitOptimizerOptions options;
  // Their values are checked by the optimizer's constructor (a ValueError naming the option).
  options.wait_steps = int_option(wait_steps, "wait_steps");
  options.warmup_steps = int_option(warmup_steps, "warmup_steps");
  options.profile_steps = int_option(profile_steps, "profile_steps");
  options.pl_step_w = int_option(pl_step, "pl_step");
  if (!selector.is_none()) {
    if (!py::isinstance<OptimumSelector>(selector)) {
      throw py::type_error("optimum_selector must be an OptimumSelector or None, not " +
                           type_name(selector));
    }
    options.selector = shared_from_python<OptimumSelector>(selector);
  }
  if (!reducer.is_none()) {
    if (!py::isinstance<runtime::Reducer>(reducer)) {
      throw py::type_error("reducer must be a Reducer or None, not " + type_name(reducer));
    }
    options.reducer = shared_from_python<runtime::Reducer>(reducer);
  }
  if (!profile_path.is_none()) {
    py::object os = py::module_::import("os");
    if (!py::isinstance<py::str>(profile_path) &&
        !py::isinstance(profile_path, os.attr("PathLike"))) {
      throw py::type_error("profile_path must be a str, an os.PathLike or None, not " +
                           type_name(profile_path));
    }
    options.profile_path = os.attr("fspath")(profile_path).cast<std::string>();
  }
  options.restore_on_signal = restore_on_signal;
  std::shared_ptr<monitor::WindowMonitor> window_monitor =
      window_monitor_from_python(monitor, "monitor");
  try {
    return std::make_unique<PowerLimitOptimizerHandle>(
        std::make_unique<runtime::PowerLimitOptimizer>(std::move(window_monitor),
                                                       device::get_gpus(), std::move(options)));
  } catch (const Error& error) {
    rethrow_constructor_error(error);
  }
}

std::vector<PowerLimitMeasurement> load_profile(const std::filesystem::path& path) {
  try {
    return runtime::load_power_limit_profile(path).measurements;
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNotFound) {
      PyErr_SetString(PyExc_FileNotFoundError, error.what());
      throw py::error_already_set();
    }
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw py::value_error(error.what());
    }
    PyErr_SetString(PyExc_OSError, error.what());
    throw py::error_already_set();
  }
}

void save_profile(const std::filesystem::path& path,
                  const std::vector<PowerLimitMeasurement>& measurements) {
  try {
    runtime::save_power_limit_profile(path, runtime::PowerLimitProfile{measurements});
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw py::value_error(error.what());  // a measurement that would not load back
    }
    PyErr_SetString(PyExc_OSError, error.what());
    throw py::error_already_set();
  }
}

}  // namespace

void bind_optimizer(py::module_& module) {
  // PowerLimitMeasurement(power_limit: int (W), energy: float (J), time: float (s)).
  py::class_<PowerLimitMeasurement>(module, "PowerLimitMeasurement",
                                    "GPU energy (J) and time (s) measured at one power limit (W).")
      .def(py::init(
               [](const py::object& power_limit, const py::object& energy, const py::object& time) {
                 PowerLimitMeasurement m;
                 m.power_limit_w = int_in_range(power_limit, "power_limit", 1);
                 m.energy_j = number_arg(energy, "energy");
                 m.time_s = number_arg(time, "time");
                 return m;
               }),
           py::arg("power_limit"), py::arg("energy"), py::arg("time"))
      .def_readwrite("power_limit", &PowerLimitMeasurement::power_limit_w)
      .def_readwrite("energy", &PowerLimitMeasurement::energy_j)
      .def_readwrite("time", &PowerLimitMeasurement::time_s)
      .def("__repr__", &measurement_repr)
      .def("__eq__",
           [](const PowerLimitMeasurement& a, py::handle b) {
             if (!py::isinstance<PowerLimitMeasurement>(b)) {
               return false;
             }
             const auto other = b.cast<PowerLimitMeasurement>();
             return a.power_limit_w == other.power_limit_w && a.energy_j == other.energy_j &&
                    a.time_s == other.time_s;
           })
      .def(py::pickle(
          [](const PowerLimitMeasurement& m) {
            return py::make_tuple(m.power_limit_w, m.energy_j, m.time_s);
          },
          [](const py::tuple& t) {
            return PowerLimitMeasurement{t[0].cast<int>(), t[1].cast<double>(),
                                         t[2].cast<double>()};
          }));

  py::class_<OptimumSelector, PyOptimumSelector, std::shared_ptr<OptimumSelector>>(
      module, "OptimumSelector",
      "Base class of power-limit selectors: select(measurements) returns a power limit (W).")
      .def(py::init<>())
      .def(
          "select",
          [](const OptimumSelector& self, const py::object& measurements) {
            return select_checked(self, measurements_arg(measurements, "measurements"));
          },
          py::arg("measurements"))
      .def("describe", &OptimumSelector::describe)
      .def("__repr__", &OptimumSelector::describe);

  py::class_<optimizer::EnergySelector, OptimumSelector,
             std::shared_ptr<optimizer::EnergySelector>>(module, "Energy",
                                                         "The power limit with the least energy.")
      .def(py::init<>());
  py::class_<optimizer::TimeSelector, OptimumSelector, std::shared_ptr<optimizer::TimeSelector>>(
      module, "Time", "The power limit with the shortest time.")
      .def(py::init<>());
  py::class_<ZeusCost, OptimumSelector, std::shared_ptr<ZeusCost>>(
      module, "ZeusCost",
      "The power limit with the least Zeus cost eta*E + (1-eta)*max_power*T, max_power = the "
      "largest measured power limit times world_size.")
      .def(py::init([](const py::object& eta_knob, const py::object& world_size) {
             const double eta = number_arg(eta_knob, "eta_knob");
             if (eta < 0.0 || eta > 1.0) {
               throw py::value_error("eta_knob must be between 0 and 1, got " +
                                     py::repr(py::float_(eta)).cast<std::string>());
             }
             return std::make_shared<ZeusCost>(eta, int_in_range(world_size, "world_size", 1));
           }),
           py::arg("eta_knob"), py::arg("world_size") = 1)
      .def_property_readonly("eta_knob", &ZeusCost::eta_knob)
      .def_property_readonly("world_size", &ZeusCost::world_size);
  py::class_<MaxSlowdownConstraint, OptimumSelector, std::shared_ptr<MaxSlowdownConstraint>>(
      module, "MaxSlowdownConstraint",
      "The lowest power limit whose time is within `factor` of the time at the highest one.")
      .def(py::init([](const py::object& factor) {
             const double value = number_arg(factor, "factor");
             if (value < 1.0) {
               throw py::value_error("factor must be at least 1.0, got " +
                                     py::repr(py::float_(value)).cast<std::string>());
             }
             return std::make_shared<MaxSlowdownConstraint>(value);
           }),
           py::arg("factor"))
      .def_property_readonly("factor", &MaxSlowdownConstraint::factor);

  py::class_<runtime::Reducer, PyReducer, std::shared_ptr<runtime::Reducer>>(
      module, "Reducer",
      "Combines per-process values across a data-parallel job: sum(value), max(value), "
      "world_size().")
      .def(py::init<>())
      .def("sum", &runtime::Reducer::sum, py::arg("value"))
      .def("max", &runtime::Reducer::max, py::arg("value"))
      .def("world_size", &runtime::Reducer::world_size);
  py::class_<runtime::LocalReducer, runtime::Reducer, std::shared_ptr<runtime::LocalReducer>>(
      module, "LocalReducer", "One process: values are returned unchanged.")
      .def(py::init<>());

  // The defaults of the C++ options, the only copy: GlobalPowerLimitOptimizer's signature reads
  // them from here.
  const runtime::PowerLimitOptimizerOptions defaults;
  py::dict default_options;
  default_options["wait_steps"] = defaults.wait_steps;
  default_options["warmup_steps"] = defaults.warmup_steps;
  default_options["profile_steps"] = defaults.profile_steps;
  default_options["pl_step"] = defaults.pl_step_w;
  module.attr("_POWER_LIMIT_OPTIMIZER_DEFAULTS") = default_options;
  py::class_<PowerLimitOptimizerHandle>(
      module, "_PowerLimitOptimizer",
      "The C++ power-limit optimizer; use zeus_cpp.optimizer.power_limit."
      "GlobalPowerLimitOptimizer.")
      .def(py::init(&make_optimizer), py::arg("monitor"), py::arg("optimum_selector") = py::none(),
           py::arg("wait_steps") = defaults.wait_steps,
           py::arg("warmup_steps") = defaults.warmup_steps,
           py::arg("profile_steps") = defaults.profile_steps,
           py::arg("pl_step") = defaults.pl_step_w, py::arg("profile_path") = py::none(),
           py::arg("reducer") = py::none(), py::arg("restore_on_signal") = false)
      .def("on_step_begin",
           [](const PowerLimitOptimizerHandle& self) { self.get().on_step_begin(); })
      .def("on_epoch_end", [](const PowerLimitOptimizerHandle& self) { self.get().on_epoch_end(); })
      .def_property_readonly(
          "state",
          [](const PowerLimitOptimizerHandle& self) { return state_tuple(self.get().state()); })
      .def_property_readonly(
          "power_limits",
          [](const PowerLimitOptimizerHandle& self) { return self.get().power_limits_mw(); })
      .def_property_readonly(
          "measurements",
          [](const PowerLimitOptimizerHandle& self) { return self.get().measurements(); })
      .def_property_readonly(
          "optimal_power_limit",
          [](const PowerLimitOptimizerHandle& self) { return self.get().optimal_power_limit_mw(); })
      .def_property_readonly("closed", &PowerLimitOptimizerHandle::closed)
      .def("close", &PowerLimitOptimizerHandle::close,
           "Releases the GPUs, restoring the maximum power limit unless another live optimizer "
           "manages them or the limit was changed since; idempotent.");

  module.def(
      "zeus_cost",
      [](double energy, double time, double eta_knob, double max_power) {
        if (!(eta_knob >= 0.0 && eta_knob <= 1.0)) {
          throw py::value_error("eta_knob must be between 0 and 1, got " +
                                py::repr(py::float_(eta_knob)).cast<std::string>());
        }
        return optimizer::zeus_cost(energy, time, eta_knob, max_power);
      },
      py::arg("energy"), py::arg("time"), py::arg("eta_knob"), py::arg("max_power"),
      "eta_knob * energy + (1 - eta_knob) * max_power * time.");
  module.def("load_power_limit_profile", &load_profile, py::arg("path"),
             "The measurements of a power-limit profile file.");
  module.def("save_power_limit_profile", &save_profile, py::arg("path"), py::arg("measurements"),
             "Writes a power-limit profile file.");
}

}  // namespace zeus::python
