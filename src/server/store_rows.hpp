// Row encodings shared by the SQLite and PostgreSQL stores.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/store.hpp"
#include "zeus/bso/wire.hpp"

namespace zeus::server::rows {

// A failure of the storage, remembered for Store::health() until a write succeeds.
struct StorageFailure {
  std::string message;
  bool corruption = false;  // only a real write clears it: a probe proves nothing there
};

// A job's spec is stored as its wire JSON (the 18 keys).
inline std::string spec_to_text(const bso::JobSpec& spec) {
  return bso::to_json(spec).dump();
}

// Throws StoreError(kCorrupt) when the stored text does not parse. A spec never changes once
// stored, and parsing it is most of the cost of reading a job row: the process remembers the
// specs it parsed last, keyed by their text.
inline bso::JobSpec spec_from_text(const std::string& text, const std::string& job_id) {
  static std::mutex mutex;
  static std::unordered_map<std::string, bso::JobSpec> parsed;
  {
    std::lock_guard lock(mutex);
    if (const auto found = parsed.find(text); found != parsed.end()) {
      return found->second;
    }
  }
  bso::JobSpec spec;
  try {
    // Rows may hold ids registered before the job-id rules existed: still readable.
    spec = bso::job_spec_from_json(nlohmann::json::parse(text), "stored", false);
  } catch (const std::exception& error) {
    throw StoreError(StoreFailure::kCorrupt,
                     "the stored spec of job " + job_id + " is unreadable: " + error.what());
  }
  std::lock_guard lock(mutex);
  if (parsed.size() >= 1024) {
    parsed.clear();
  }
  parsed.emplace(text, spec);
  return spec;
}

// The columns both stores select a job and a trial in; job_from_row and trial_from_row read
// them in this order.
inline constexpr const char* kJobColumns =
    "job_id, spec, policy_state, stage, min_cost, min_cost_batch_size, created_ms";
inline constexpr const char* kTrialColumns =
    "job_id, trial_number, batch_size, type, status, start_ms, end_ms, time_s, energy_j, metric, "
    "epochs, converged";

// A job row in kJobColumns order, through a driver's row reader (text(i), integer<T>(i),
// optional_real(i), ...). The id is the key column's.
template <typename Row>
JobRecord job_from_row(const Row& row) {
  JobRecord job;
  const std::string job_id = row.text(0);
  job.spec = spec_from_text(row.text(1), job_id);
  job.spec.job_id = job_id;
  job.policy_state = row.text(2);
  job.stage = row.text(3);
  job.min_cost = row.optional_real(4);
  job.min_cost_batch_size = row.template integer<int>(5);
  job.created_ms = row.template integer<std::int64_t>(6);
  return job;
}

// A trial row in kTrialColumns order.
template <typename Row>
TrialRecord trial_from_row(const Row& row) {
  TrialRecord trial;
  trial.job_id = row.text(0);
  trial.trial_number = row.template integer<int>(1);
  trial.batch_size = row.template integer<int>(2);
  trial.type = row.text(3);
  trial.status = row.text(4);
  trial.start_ms = row.template integer<std::int64_t>(5);
  trial.end_ms = row.template optional_integer<std::int64_t>(6);
  trial.time_s = row.optional_real(7);
  trial.energy_j = row.optional_real(8);
  trial.metric = row.optional_real(9);
  trial.epochs = row.template optional_integer<int>(10);
  trial.converged = row.optional_boolean(11);
  return trial;
}

}  // namespace zeus::server::rows
