// Bindings of the batch-size-optimizer client (zeus::bso::BatchSizeOptimizer). The job crosses
// the boundary as its wire JSON (the reference's JobSpecFromClient), so that the C++ validation of
// the wire format applies unchanged; zeus_cpp.optimizer.batch_size.client wraps this in the
// reference's API (BatchSizeOptimizer(monitor, server_url, job, rank=0)).
//
// Errors: zeus::bso::ServerError -> ZeusBSORuntimError and TrainFailedError ->
// ZeusBSOTrainFailError (the module's table); a bad job -> ZeusBSOConfigError; a call out of
// order -> ZeusBSOOperationOrderError; the batch size asked by a rank other than 0 ->
// ZeusBSOBadOperationError.
#include <pybind11/stl.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/error.hpp"
#include "zeus/runtime/batch_size_optimizer.hpp"

namespace zeus::python {
namespace {

using bso::BatchSizeOptimizer;

// Runs `body`; zeus errors that are not the server's (those go through the module's table) are
// raised as `order_error` when they concern the order of calls (kInvalidArgument from a method),
// or translated by the table.
template <class Body>
auto guarded(const char* invalid_argument_class, Body&& body) {
  try {
    return body();
  } catch (const bso::ServerError&) {
    throw;
  } catch (const bso::TrainFailedError&) {
    throw;
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw_python_error(invalid_argument_class, error.what());
    }
    throw;
  }
}

bso::JobSpec job_from_json_text(const std::string& text) {
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw py::value_error(std::string("job: not JSON: ") + error.what());
  }
  try {
    return bso::job_spec_from_json(body, "job");
  } catch (const bso::ValidationError& error) {
    throw_python_error("ZeusBSOConfigError", std::string("invalid job: ") + error.what());
  }
}

py::dict response_dict(const bso::ReportResponse& response) {
  py::dict result;
  result["stop_train"] = response.stop_train;
  result["converged"] = response.converged;
  result["message"] = response.message;
  return result;
}

std::unique_ptr<BatchSizeOptimizer> make_client(py::handle monitor, const std::string& server_url,
                                                const std::string& job_json, int rank,
                                                double timeout_s, int max_attempts,
                                                std::optional<std::string> token) {
  if (rank < 0) {
    throw py::value_error("rank must be 0 or more, got " + std::to_string(rank));
  }
  if (!(timeout_s > 0.0)) {
    throw py::value_error("timeout must be positive");
  }
  if (max_attempts < 1) {
    throw py::value_error("max_attempts must be at least 1, got " + std::to_string(max_attempts));
  }
  std::shared_ptr<monitor::WindowMonitor> window_monitor =
      window_monitor_from_python(monitor, "monitor");
  bso::JobSpec job = job_from_json_text(job_json);
  bso::ClientOptions options;
  options.rank = rank;
  options.timeout_s = timeout_s;
  options.retry.max_attempts = max_attempts;
  options.token = std::move(token);
  try {
    // Registration is a network round trip (with retries): let other Python threads run.
    py::gil_scoped_release release;
    return std::make_unique<BatchSizeOptimizer>(std::move(window_monitor), server_url,
                                                std::move(job), std::move(options));
  } catch (const bso::ServerError&) {
    throw;
  } catch (const Error& error) {
    // No GPU, GPUs of different models, a bad URL or job: a configuration problem.
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw_python_error("ZeusBSOConfigError", error.what());
    }
    throw;
  }
}

}  // namespace

void bind_bso(py::module_& module) {
  py::class_<BatchSizeOptimizer>(
      module, "_BatchSizeOptimizer",
      "The C++ batch-size-optimizer client; use zeus_cpp.optimizer.batch_size.client."
      "BatchSizeOptimizer.")
      .def(py::init(&make_client), py::arg("monitor"), py::arg("server_url"), py::arg("job_json"),
           py::arg("rank") = 0, py::arg("timeout") = 5.0, py::arg("max_attempts") = 6,
           py::arg("token") = py::none())
      .def("get_batch_size",
           [](BatchSizeOptimizer& self) {
             return guarded("ZeusBSOBadOperationError", [&] {
               py::gil_scoped_release release;
               return self.get_batch_size();
             });
           })
      .def(
          "set_trial",
          [](BatchSizeOptimizer& self, const std::string& job_id, int batch_size,
             int trial_number) {
            guarded("ZeusBSOBadOperationError", [&] {
              self.set_trial(bso::TrialId{job_id, batch_size, trial_number});
              return 0;
            });
          },
          py::arg("job_id"), py::arg("batch_size"), py::arg("trial_number"))
      .def("on_train_begin",
           [](BatchSizeOptimizer& self) {
             guarded("ZeusBSOOperationOrderError", [&] {
               self.on_train_begin();
               return 0;
             });
           })
      .def(
          "on_evaluate",
          [](BatchSizeOptimizer& self, double metric) {
            return response_dict(
                guarded("ZeusBSOOperationOrderError", [&] { return self.on_evaluate(metric); }));
          },
          py::arg("metric"))
      .def("end",
           [](BatchSizeOptimizer& self) {
             py::gil_scoped_release release;
             self.end();
           })
      .def(
          "resume",
          [](BatchSizeOptimizer& self, const std::string& job_id, int batch_size, int trial_number,
             int epochs, double time_s, double energy_j) {
            guarded("ZeusBSOBadOperationError", [&] {
              self.resume(bso::TrialId{job_id, batch_size, trial_number}, epochs, time_s, energy_j);
              return 0;
            });
          },
          py::arg("job_id"), py::arg("batch_size"), py::arg("trial_number"), py::arg("epochs"),
          py::arg("time"), py::arg("energy"))
      .def("suspend",
           [](BatchSizeOptimizer& self) -> py::object {
             const std::optional<monitor::Measurement> unfinished = self.suspend();
             if (!unfinished) {
               return py::none();
             }
             return py::make_tuple(unfinished->time_s, unfinished->total_energy_j());
           })
      .def(
          "abandon_trial",
          [](BatchSizeOptimizer& self, const std::string& job_id, int batch_size,
             int trial_number) {
            py::gil_scoped_release release;
            self.client().end_trial(bso::TrialId{job_id, batch_size, trial_number});
          },
          py::arg("job_id"), py::arg("batch_size"), py::arg("trial_number"))
      .def_property_readonly(
          "job_json",
          [](const BatchSizeOptimizer& self) { return bso::to_json(self.job()).dump(); })
      .def_property_readonly("job_created", &BatchSizeOptimizer::job_created)
      .def_property_readonly("trial",
                             [](const BatchSizeOptimizer& self) -> py::object {
                               if (!self.trial()) {
                                 return py::none();
                               }
                               const bso::TrialId& trial = *self.trial();
                               return py::make_tuple(trial.job_id, trial.batch_size,
                                                     trial.trial_number);
                             })
      .def_property_readonly("training_finished", &BatchSizeOptimizer::training_finished)
      .def_property_readonly("current_epoch", &BatchSizeOptimizer::current_epoch)
      .def_property_readonly("time", &BatchSizeOptimizer::time_s)
      .def_property_readonly("energy", &BatchSizeOptimizer::energy_j)
      .def_property_readonly(
          "server_url", [](BatchSizeOptimizer& self) { return self.client().url().to_string(); });
}

}  // namespace zeus::python
