// The BSO benchmarks' synthetic trial cycle, in one place: the i-th run's result (a converged run
// whose time and energy vary a little with i), in-process through the service or as the body of
// a POST /report over HTTP.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/service.hpp"

namespace zeus::bench {

// The result of the i-th synthetic run of `trial`: 100-106 s, 30-34 kJ, converged at epoch 10.
inline bso::TrainingResult synthetic_result(const bso::TrialId& trial, int i) {
  bso::TrainingResult result;
  result.trial = trial;
  result.time_s = 100.0 + i % 7;
  result.energy_j = 30000.0 + 1000.0 * (i % 5);
  result.metric = 0.95;
  result.current_epoch = 10;
  return result;
}

// One cycle in-process: dispatch, the final report, end.
inline void trial_cycle(server::BsoService& service, const std::string& job, int i) {
  const bso::TrialId trial = service.next_batch_size(job);
  service.report(synthetic_result(trial, i));
  service.end_trial(trial);
}

// The POST /report body of the same result, from a GET /jobs/batch_size answer (the trial).
inline nlohmann::json synthetic_report(const nlohmann::json& trial, int i) {
  nlohmann::json report = trial;
  report["time"] = 100.0 + (i % 7);
  report["energy"] = 30000.0 + 1000.0 * (i % 5);
  report["metric"] = 0.95;
  report["current_epoch"] = 10;
  return report;
}

}  // namespace zeus::bench
