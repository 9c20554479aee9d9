// The zeus_cpp._zeus extension module.
#include "bindings.hpp"

PYBIND11_MODULE(_zeus, module) {
  module.doc() = "Native core of zeus_cpp (use the zeus_cpp package, not this module).";
  zeus::python::bind_errors(module);
  zeus::python::bind_device(module);
  zeus::python::bind_monitor(module);
  zeus::python::bind_optimizer(module);
  zeus::python::bind_bso(module);
  zeus::python::bind_metrics(module);
}
