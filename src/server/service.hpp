// The batch-size-optimizer service: the reference server's semantics (register, dispatch a
// trial, per-epoch report with early stopping, end a trial, delete) over a Store, with the
// decisions taken by the policy core (zeus::optimizer::BatchSizePolicy). No HTTP here: errors
// are ServiceError with the status the HTTP layer sends.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/utf8.hpp"
#include "server/store.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/clock.hpp"

namespace zeus::server {

// A logic error with its HTTP status (400, 404, 409 or 500) and the reference's message;
// sent as {"message": ...}. The message is made valid UTF-8 (it may quote client bytes).
class ServiceError : public Error {
 public:
  ServiceError(int status, const std::string& message)
      : Error(ErrorKind::kInvalidArgument, to_valid_utf8(message)), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

struct RegisterResult {
  bool created = false;  // 201 when created, 200 when an identical job existed
  bso::JobSpec spec;     // as stored (job_id set, batch sizes sorted)
};

class BsoService {
 public:
  // `now_ms` gives Unix time in milliseconds (timestamps and generated ids); injectable for
  // tests. `random_seed` seeds jobs registered without mab_seed (each job gets its own stream).
  explicit BsoService(Store& store, std::function<std::int64_t()> now_ms = {});

  // POST /jobs. Throws bso::ValidationError (422) for specs the policy core cannot run
  // (num_pruning_rounds 0) and for job ids that could not be read back (bso::job_id_problem),
  // ServiceError 409 when the job exists with another spec.
  RegisterResult register_job(bso::JobSpec spec);
  // GET /jobs/batch_size: dispatches a new trial. 400 unknown job; 500 when pruning found no
  // batch size that converges. A job_id that is not UTF-8 is a bso::ValidationError (422) at
  // ["query", "job_id"], as for delete_job; job_state's is at ["path", "job_id"].
  bso::TrialId next_batch_size(const std::string& job_id);
  // POST /report. A report whose cost (eta * energy + (1 - eta) * max_power * time) is not
  // finite or above kMaxCost is a bso::ValidationError (422) at ["body", "time"] and
  // ["body", "energy"].
  bso::ReportResponse report(const bso::TrainingResult& result);
  // PATCH /trials: a trial still running is marked failed (explored again). 404 unknown trial.
  void end_trial(const bso::TrialId& trial);
  // DELETE /jobs: false when there was no such job.
  bool delete_job(const std::string& job_id);
  // GET /jobs/{id}: spec, stage, min cost, arms and trials. nullopt when unknown.
  std::optional<nlohmann::ordered_json> job_state(const std::string& job_id);

  // The largest cost a report may make: far above any real training run (1e100 J), and low
  // enough that the bandit's sums of squared costs cannot overflow.
  static constexpr double kMaxCost = 1e100;

  Store& store() { return store_; }

 private:
  Store& store_;
  std::function<std::int64_t()> now_ms_;
};

}  // namespace zeus::server
