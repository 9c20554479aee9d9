// Bindings of the batch-size policies in process (zeus::optimizer::BatchSizeSearch: "zeus", the
// paper's, and "low-regret"), without a server: a training script or a scheduler asks next(),
// runs that batch size, and reports its cost. zeus_cpp.optimizer.batch_size.policy wraps this as
// BatchSizePolicy. The state is the core's exact JSON (save()/restore()), so a decision sequence
// can be persisted between recurrences and resumed bit for bit.
//
// Errors: the core's zeus::Error(kInvalidArgument) (a bad configuration, an unknown trial, a
// malformed saved state, no batch size that reaches the target) is a ValueError with the core's
// message; argument types are pybind11's TypeError.
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_search.hpp"

namespace zeus::python {
namespace {

using optimizer::BatchSizePolicyConfig;
using optimizer::BatchSizeSearch;
using optimizer::LowRegretConfig;

// The core's refusals as ValueError, with its message.
template <class Body>
auto value_errors(Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw py::value_error(error.what());
    }
    throw;
  }
}

// A policy in process: one BatchSizeSearch, either kind.
class Policy {
 public:
  explicit Policy(std::unique_ptr<BatchSizeSearch> search) : search_(std::move(search)) {}
  Policy(const Policy& other) : search_(other.search_->clone()) {}
  Policy(Policy&&) noexcept = default;

  BatchSizeSearch& get() { return *search_; }
  const BatchSizeSearch& get() const { return *search_; }

 private:
  std::unique_ptr<BatchSizeSearch> search_;
};

Policy make_policy(std::vector<int> batch_sizes, int default_batch_size, const std::string& policy,
                   std::optional<double> beta, int window_size, std::uint64_t seed,
                   int pruning_rounds, double prior_mean, double prior_precision,
                   int num_explorations, double probe_cap, double noise_prior,
                   double noise_prior_weight, double drift_z, double shrinkage_floor,
                   double arm_noise_weight) {
  BatchSizePolicyConfig config;
  config.batch_sizes = std::move(batch_sizes);
  config.default_batch_size = default_batch_size;
  config.beta = beta;
  config.pruning_rounds = pruning_rounds;
  config.mab.prior_mean = prior_mean;
  config.mab.prior_precision = prior_precision;
  config.mab.num_explorations = num_explorations;
  config.mab.window_size = window_size;
  config.low_regret.probe_cap = probe_cap;
  config.low_regret.noise_prior = noise_prior;
  config.low_regret.noise_prior_weight = noise_prior_weight;
  config.low_regret.drift_z = drift_z;
  config.low_regret.shrinkage_floor = shrinkage_floor;
  config.low_regret.arm_noise_weight = arm_noise_weight;
  config.seed = seed;
  // NaN passes the core's range checks written as comparisons: refuse it here, naming it.
  for (const auto& [name, value] : {std::pair<const char*, double>{"prior_mean", prior_mean},
                                    {"prior_precision", prior_precision},
                                    {"probe_cap", probe_cap},
                                    {"noise_prior", noise_prior},
                                    {"noise_prior_weight", noise_prior_weight},
                                    {"drift_z", drift_z},
                                    {"shrinkage_floor", shrinkage_floor},
                                    {"arm_noise_weight", arm_noise_weight},
                                    {"beta", beta.value_or(1.0)}}) {
    if (!std::isfinite(value)) {
      throw py::value_error(std::string(name) + " must be a finite number");
    }
  }
  return value_errors(
      [&] { return Policy(optimizer::make_batch_size_search(policy, std::move(config))); });
}

Policy restore_policy(const std::string& text) {
  return value_errors([&] { return Policy(optimizer::restore_batch_size_search(text)); });
}

}  // namespace

void bind_policy(py::module_& module);  // declared for module.cpp, which calls it
void bind_policy(py::module_& module) {
  // The registry's names, in its order (zeus_cpp.optimizer.batch_size.policy.POLICIES).
  module.attr("_BATCH_SIZE_POLICIES") = py::tuple(py::cast(optimizer::batch_size_policy_names()));
  const LowRegretConfig low_regret;
  const optimizer::GaussianTsConfig mab;
  py::class_<Policy>(module, "_BatchSizePolicy",
                     "A batch-size policy in process; use zeus_cpp.optimizer.batch_size.policy."
                     "BatchSizePolicy.")
      .def(py::init(&make_policy), py::arg("batch_sizes"), py::arg("default_batch_size"),
           py::kw_only(), py::arg("policy") = optimizer::default_batch_size_policy_name(),
           py::arg("beta") = 2.0, py::arg("window_size") = 0, py::arg("seed") = 0,
           py::arg("pruning_rounds") = 2, py::arg("prior_mean") = mab.prior_mean,
           py::arg("prior_precision") = mab.prior_precision,
           py::arg("num_explorations") = mab.num_explorations,
           py::arg("probe_cap") = low_regret.probe_cap,
           py::arg("noise_prior") = low_regret.noise_prior,
           py::arg("noise_prior_weight") = low_regret.noise_prior_weight,
           py::arg("drift_z") = low_regret.drift_z,
           py::arg("shrinkage_floor") = low_regret.shrinkage_floor,
           py::arg("arm_noise_weight") = low_regret.arm_noise_weight)
      .def(
          "next",
          [](Policy& self) {
            const optimizer::Decision decision = value_errors([&] { return self.get().next(); });
            return py::make_tuple(decision.trial_id, decision.batch_size,
                                  optimizer::trial_kind_wire_name(decision.kind));
          },
          "The next trial: (trial_id, batch_size, kind), kind 'Exploration', 'Concurrent' or "
          "'MAB'.")
      .def(
          "report",
          [](Policy& self, int trial_id, double cost, bool converged, int epochs,
             double epoch_cost) {
            if (epochs < 0) {
              throw py::value_error("epochs must be 0 (unknown) or more, got " +
                                    std::to_string(epochs));
            }
            if (!(epoch_cost >= 0.0) || !std::isfinite(epoch_cost)) {
              throw py::value_error("epoch_cost must be a finite number, 0 (unknown) or more");
            }
            value_errors([&] {
              self.get().report(trial_id,
                                optimizer::TrialResult{cost, converged, epochs, epoch_cost});
              return 0;
            });
          },
          py::arg("trial_id"), py::arg("cost"), py::arg("converged"), py::arg("epochs") = 0,
          py::arg("epoch_cost") = 0.0)
      .def(
          "fail",
          [](Policy& self, int trial_id) {
            value_errors([&] {
              self.get().fail(trial_id);
              return 0;
            });
          },
          py::arg("trial_id"))
      .def(
          "cost_threshold",
          [](const Policy& self, int trial_id) { return self.get().cost_threshold(trial_id); },
          py::arg("trial_id"))
      .def_property_readonly(
          "policy", [](const Policy& self) { return std::string(self.get().policy_name()); })
      .def_property_readonly("best_batch_size",
                             [](const Policy& self) { return self.get().best_batch_size(); })
      .def_property_readonly("min_cost", [](const Policy& self) { return self.get().min_cost(); })
      .def_property_readonly("exploring", [](const Policy& self) { return self.get().exploring(); })
      .def_property_readonly("batch_sizes",
                             [](const Policy& self) { return self.get().config().batch_sizes; })
      .def_property_readonly(
          "default_batch_size",
          [](const Policy& self) { return self.get().config().default_batch_size; })
      .def_property_readonly(
          "arms",
          [](const Policy& self) {
            py::list arms;
            for (const optimizer::ArmView& view : self.get().arm_views()) {
              arms.append(py::make_tuple(view.batch_size, view.observations, view.mean_cost));
            }
            return arms;
          })
      .def("save", [](const Policy& self) { return self.get().save(); })
      .def_static("restore", &restore_policy, py::arg("text"))
      .def("copy", [](const Policy& self) { return Policy(self); });
}

}  // namespace zeus::python
