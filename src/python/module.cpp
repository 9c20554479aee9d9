// The zeus_cpp._zeus extension module.
#include "bindings.hpp"

namespace zeus::python {
// power_sampler.cpp: the power and temperature sampler (zeus_cpp.monitor.PowerMonitor).
void bind_power_sampler(py::module_& module);
// policy.cpp: the batch-size policies in process (zeus_cpp.optimizer.batch_size.policy).
void bind_policy(py::module_& module);
// replay.cpp: the CSV log replay monitor (zeus_cpp.utils.testing.ReplayZeusMonitor).
void bind_replay(py::module_& module);
// carbon.cpp: carbon intensity providers and the carbon emission monitor (zeus_cpp.monitor.carbon).
void bind_carbon(py::module_& module);
// profile.cpp: the thermally stable profiler (zeus_cpp.profile).
void bind_profile(py::module_& module);
// price.cpp: electricity price providers and the energy cost monitor (zeus_cpp.monitor.price).
void bind_price(py::module_& module);
// soc_bindings.cpp: the SoC and its rails' sampler (zeus_cpp.device.soc).
void bind_soc(py::module_& module);
// log_bridge.cpp: the native log through Python's logging (zeus_cpp._logging).
void bind_log(py::module_& module);
}  // namespace zeus::python

PYBIND11_MODULE(_zeus, module) {
  module.doc() = "Native core of zeus_cpp (use the zeus_cpp package, not this module).";
  zeus::python::bind_errors(module);
  zeus::python::bind_log(module);
  zeus::python::bind_device(module);
  zeus::python::bind_soc(module);
  zeus::python::bind_measurement(module);
  zeus::python::bind_monitor(module);
  zeus::python::bind_power_sampler(module);
  zeus::python::bind_optimizer(module);
  zeus::python::bind_bso(module);
  zeus::python::bind_policy(module);
  zeus::python::bind_metrics(module);
  zeus::python::bind_replay(module);
  zeus::python::bind_carbon(module);
  zeus::python::bind_profile(module);
  zeus::python::bind_price(module);
}
