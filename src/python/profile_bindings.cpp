// zeus_cpp._zeus: the thermally stable profiler (zeus/monitor/profile.hpp) for zeus_cpp.profile.
//
// The profiler runs in C++ with the GIL held: it calls the Python workload and the monitor for
// every iteration and window. The GIL is released only while a cooldown sleeps (in slices, so
// that Ctrl-C raises KeyboardInterrupt within a tenth of a second).

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bindings.hpp"
#include "zeus/monitor/profile.hpp"

namespace zeus::python {

void bind_profile(py::module_& module);

namespace {

// The steady clock, sleeping without the GIL and checking for signals between slices.
class GilFreeSleepClock final : public Clock {
 public:
  std::int64_t now_ns() const override { return steady_clock()->now_ns(); }
  void sleep_for_ns(std::int64_t duration_ns) const override {
    constexpr std::int64_t kSliceNs = 100'000'000;
    const std::int64_t end_ns = now_ns() + std::max<std::int64_t>(0, duration_ns);
    for (std::int64_t left_ns = end_ns - now_ns(); left_ns > 0; left_ns = end_ns - now_ns()) {
      {
        py::gil_scoped_release release;
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(left_ns, kSliceNs)));
      }
      if (PyErr_CheckSignals() != 0) {
        throw py::error_already_set();
      }
    }
  }
};

struct PythonTarget {
  std::shared_ptr<monitor::WindowMonitor> monitor;
  monitor::ProfileTarget target;
};

// `reducer`: None (one process) or a zeus_cpp Reducer (zeus_cpp.profile passes a
// TorchDistributedReducer when torch.distributed is initialised), called with the GIL held.
PythonTarget make_target(const py::object& target_function, const py::object& zeus_monitor,
                         const py::object& reducer) {
  if (!PyCallable_Check(target_function.ptr())) {
    throw py::type_error("target_function must be callable, not " +
                         std::string(Py_TYPE(target_function.ptr())->tp_name));
  }
  PythonTarget result;
  result.monitor = window_monitor_from_python(zeus_monitor, "zeus_monitor");
  result.target.iteration = [target_function] { target_function(); };
  result.target.monitor = result.monitor.get();
  result.target.clock = std::make_shared<GilFreeSleepClock>();
  // As the reference: zeus_monitor.gpus.get_gpu_temperature(index); NaN without it.
  if (py::hasattr(zeus_monitor, "gpus")) {
    result.target.temperature_c = [zeus_monitor](int index) {
      return zeus_monitor.attr("gpus").attr("get_gpu_temperature")(index).cast<double>();
    };
  }
  if (!reducer.is_none()) {
    result.target.ranks.sum = [reducer](double value) {
      return reducer.attr("sum")(value).cast<double>();
    };
    result.target.ranks.max = [reducer](double value) {
      return reducer.attr("max")(value).cast<double>();
    };
    result.target.ranks.world_size = reducer.attr("world_size")().cast<int>();
  }
  return result;
}

py::dict trial_to_python(const monitor::TrialResult& trial) {
  py::dict out;
  out["energy_per_iter"] = trial.energy_per_iteration_j;
  out["time_per_iter"] = trial.time_per_iteration_s;
  out["total_energy"] = trial.energy_j;
  out["total_time"] = trial.time_s;
  out["iterations"] = trial.iterations;
  out["temperature_before"] = trial.temperature_before_c;
  out["temperature_after"] = trial.temperature_after_c;
  return out;
}

py::dict report_to_python(const monitor::SweepReport& report) {
  py::list entries;
  for (const monitor::SweepResult& result : report.sweep) {
    py::dict entry;
    entry["measurement_duration"] = result.measurement_duration_s;
    entry["cooldown_duration"] = result.cooldown_duration_s;
    py::list trials;
    for (const monitor::TrialResult& trial : result.trials) {
      trials.append(trial_to_python(trial));
    }
    entry["trials"] = trials;
    entry["energy_mean"] = result.mean_energy_per_iteration_j;
    entry["energy_std"] = result.stddev_energy_per_iteration_j;
    entry["avg_temperature_before"] = result.mean_temperature_before_c;
    entry["avg_temperature_after"] = result.mean_temperature_after_c;
    entry["avg_total_time"] = result.mean_time_s;
    entry["avg_total_energy"] = result.mean_energy_j;
    entry["is_valid"] = result.valid;
    entries.append(entry);
  }
  py::dict out;
  out["entries"] = entries;
  out["iteration_duration"] = report.iteration_duration_s;
  return out;
}

}  // namespace

void bind_profile(py::module_& module) {
  module.def(
      "_profile_calibrate",
      [](const py::object& target_function, const py::object& zeus_monitor,
         int num_warmup_iterations, int num_calibration_iterations, const py::object& reducer) {
        const PythonTarget target = make_target(target_function, zeus_monitor, reducer);
        return monitor::calibrate_iteration_duration(target.target, num_warmup_iterations,
                                                     num_calibration_iterations);
      },
      py::arg("target_function"), py::arg("zeus_monitor"), py::arg("num_warmup_iterations"),
      py::arg("num_calibration_iterations"), py::arg("reducer") = py::none(),
      "Seconds per iteration: warm-up iterations, then the calibration ones timed in a window "
      "(the slowest rank's with a reducer).");
  module.def(
      "_profile_measure",
      [](const py::object& target_function, const py::object& zeus_monitor,
         double measurement_duration, double cooldown_duration, int num_warmup_iterations,
         int num_calibration_iterations, std::optional<double> iteration_duration,
         const py::object& reducer) {
        const PythonTarget target = make_target(target_function, zeus_monitor, reducer);
        monitor::MeasureOptions options;
        options.measurement_duration_s = measurement_duration;
        options.cooldown_duration_s = cooldown_duration;
        options.num_warmup_iterations = num_warmup_iterations;
        options.num_calibration_iterations = num_calibration_iterations;
        options.iteration_duration_s = iteration_duration;
        return trial_to_python(monitor::measure(target.target, options));
      },
      py::arg("target_function"), py::arg("zeus_monitor"), py::arg("measurement_duration"),
      py::arg("cooldown_duration"), py::arg("num_warmup_iterations"),
      py::arg("num_calibration_iterations"), py::arg("iteration_duration") = py::none(),
      py::arg("reducer") = py::none(),
      "One trial of zeus_cpp.profile.measure, as a dict of TrialResult's fields (combined over "
      "the ranks with a reducer: energy summed, time the maximum, temperatures averaged).");

  module.def(
      "_profile_sweep",
      [](const std::string& swept, const py::object& target_function,
         const py::object& zeus_monitor, std::vector<double> search_range, double fixed_value,
         int num_trials, int num_warmup_trials, double trial_stddev_threshold,
         int num_warmup_iterations, int num_calibration_iterations,
         std::optional<double> iteration_duration, const py::object& on_trial,
         const py::object& reducer) {
        if (swept != "measurement_duration" && swept != "cooldown_duration") {
          throw py::value_error("swept must be 'measurement_duration' or 'cooldown_duration'");
        }
        const PythonTarget target = make_target(target_function, zeus_monitor, reducer);
        monitor::SweepOptions options;
        options.search_range_s = std::move(search_range);
        options.fixed_duration_s = fixed_value;
        options.num_trials = num_trials;
        options.num_warmup_trials = num_warmup_trials;
        options.trial_stddev_threshold = trial_stddev_threshold;
        options.relative_threshold = false;  // the reference's rule: joules
        options.num_warmup_iterations = num_warmup_iterations;
        options.num_calibration_iterations = num_calibration_iterations;
        options.iteration_duration_s = iteration_duration;
        options.stop_at_first_valid = false;  // the reference reports every candidate
        if (!on_trial.is_none()) {
          options.on_trial = [on_trial](double candidate_s, int trial, int trials,
                                        const monitor::TrialResult& result) {
            on_trial(std::isnan(candidate_s) ? py::object(py::none()) : py::float_(candidate_s),
                     trial, trials, trial_to_python(result));
          };
        }
        const monitor::SweepReport report =
            swept == "measurement_duration"
                ? monitor::profile_measurement_duration(target.target, options)
                : monitor::profile_cooldown_duration(target.target, options);
        return report_to_python(report);
      },
      py::arg("swept"), py::arg("target_function"), py::arg("zeus_monitor"),
      py::arg("search_range"), py::arg("fixed_value"), py::arg("num_trials"),
      py::arg("num_warmup_trials"), py::arg("trial_stddev_threshold"),
      py::arg("num_warmup_iterations"), py::arg("num_calibration_iterations"),
      py::arg("iteration_duration") = py::none(), py::arg("on_trial") = py::none(),
      py::arg("reducer") = py::none(),
      "One sweep of zeus_cpp.profile, as a dict (entries: SweepResult fields; "
      "iteration_duration).");
}

}  // namespace zeus::python
