// The batch-size-optimizer service: the reference server's semantics (register, dispatch a
// trial, per-epoch report with early stopping, end a trial, delete) over a Store, with the
// decisions taken by the policy core through zeus::optimizer::BatchSizeSearch: the paper's
// "zeus" policy (the default) or "low-regret", per job. The service names no policy: what it
// does differently per job it asks the policy (its threshold rule, whether it uses epoch costs,
// its bandit). No HTTP and no JSON here: errors are ServiceError with a domain kind, which the
// HTTP layer maps to a status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/utf8.hpp"
#include "server/store.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/gaussian_ts.hpp"

namespace zeus::server {

// A request the service refuses, with the reference's message; sent as {"message": ...}. The
// kind says why in domain terms; the HTTP layer (http_server.cpp) alone decides the status:
//   kNotFound       no such job or trial
//   kAlreadyExists  the job exists with another spec
//   kConflict       the job's state does not allow it (a report for a trial marked failed, no
//                   batch size left to dispatch, a job deleted while it was being registered)
// The message is made valid UTF-8 (it may quote client bytes).
class ServiceError : public Error {
 public:
  ServiceError(ErrorKind kind, const std::string& message) : Error(kind, to_valid_utf8(message)) {}
};
// A request refused by an operator's quota (--max-jobs, --max-registrations-per-minute): 429
// with {"message"} naming the limit and what to do.
class QuotaError : public ServiceError {
 public:
  explicit QuotaError(const std::string& message)
      : ServiceError(ErrorKind::kUnavailable, message) {}
};

// One page of GET /jobs.
struct JobIdPage {
  std::vector<std::string> ids;
  std::optional<std::string> next;  // the `after` of the next page; unset on the last one
};

struct RegisterResult {
  bool created = false;  // 201 when created, 200 when an identical job existed
  bso::JobSpec spec;     // as stored (job_id set, batch sizes sorted)
};

// One arm of a policy's Gaussian bandit (the paper's), for job_state.
struct ArmSummary {
  int batch_size = 0;
  optimizer::ArmState arm;
};

// One trial, for job_state: the stored row and, once it has a final report, its cost.
struct TrialSummary {
  TrialRecord record;
  std::optional<double> cost;
  // A trial still running under a policy that caps each trial on its own (low-regret): the cost
  // at which it is stopped. Unset under the paper's rule, whose threshold is the job's.
  std::optional<double> cost_threshold;
};

// What GET /jobs/{id} shows of a job (the HTTP layer writes it as JSON).
struct JobState {
  std::string job_id;
  bso::JobSpec spec;  // spec.policy set (jobs stored before there were two policies: "zeus")
  std::string stage;  // "Pruning" or "MAB"
  std::optional<double> min_cost;
  int min_cost_batch_size = 0;
  // The paper's rule (ThresholdRule::kBetaTimesMinCost): beta * min_cost; unset without early
  // stopping. Unset for per-trial thresholds (see TrialSummary::cost_threshold).
  std::optional<double> cost_threshold;
  std::int64_t created_ms = 0;
  // A policy with a Gaussian bandit (the paper's): its arms, empty before the MAB stage.
  std::vector<ArmSummary> arms;
  // A policy without one (low-regret): every batch size as it sees it (observations, mean cost).
  std::vector<optimizer::ArmView> arm_views;
  std::vector<TrialSummary> trials;  // one page: see BsoService::job_state
  // The trial number to ask the next page after (`?trials_after=`); unset on the last page.
  std::optional<int> trials_next;
};

class BsoService {
 public:
  // `clock` gives Unix time (see zeus::system_clock(), the default) for timestamps; a ManualClock
  // in tests. Jobs registered without mab_seed get a seed drawn from std::random_device.
  // `default_policy` is the policy of jobs whose spec names none (`zeus bso serve --policy`);
  // throws zeus::Error(kInvalidArgument) naming the known ones for any other name.
  explicit BsoService(Store& store, std::shared_ptr<Clock> clock = nullptr,
                      std::string default_policy = optimizer::default_batch_size_policy_name());

  // POST /jobs. Throws bso::ValidationError (422) for specs the policy core cannot run
  // (num_pruning_rounds 0), an unknown policy (at ["body", "policy"]) and for job ids that could
  // not be read back (bso::job_id_problem), ServiceError(kAlreadyExists) when the job exists with
  // another spec. The stored spec names the policy the job runs (the server's default when the
  // spec named none); re-registering without a policy matches the job whatever its policy, and
  // with one only when it is the job's (so reference clients, which never send one, keep
  // getting 200 for their recurring jobs even after the server's default changes).
  RegisterResult register_job(bso::JobSpec spec);
  // GET /jobs/batch_size: dispatches a new trial. ServiceError(kNotFound) for an unknown job,
  // ServiceError(kConflict) when pruning found no batch size that converges. A job_id that is not
  // UTF-8 is a bso::ValidationError (422) at
  // ["query", "job_id"], as for delete_job; job_state's is at ["path", "job_id"].
  bso::TrialId next_batch_size(const std::string& job_id);
  // POST /report. A report whose cost (eta * energy + (1 - eta) * max_power * time) is not
  // finite or above kMaxCost is a bso::ValidationError (422) at ["body", "time"] and
  // ["body", "energy"]. ServiceError(kNotFound) for an unknown job or trial, kConflict for a
  // trial marked failed.
  bso::ReportResponse report(const bso::TrainingResult& result);
  // PATCH /trials: a trial still running is marked failed (explored again).
  // ServiceError(kNotFound) for an unknown trial.
  void end_trial(const bso::TrialId& trial);
  // DELETE /jobs: false when there was no such job.
  bool delete_job(const std::string& job_id);
  // GET /jobs/{id}: spec, stage, min cost, arms and trials. nullopt when unknown.
  // Its trials one page at a time: those numbered above `trials_after`, at most `trials_limit`
  // (a job's history may be 100k trials long; JobState::trials_next says where the next page
  // starts).
  std::optional<JobState> job_state(const std::string& job_id, int trials_after = 0,
                                    std::size_t trials_limit = kMaxTrialsPage);
  // GET /jobs/{id} pages of trials: `?trials_limit=` defaults to and may not exceed this.
  static constexpr std::size_t kMaxTrialsPage = 1000;
  // GET /jobs: up to `limit` job ids after `after` (from the first when empty), in byte order.
  JobIdPage job_ids(const std::string& after, std::size_t limit);
  // The most jobs the store may hold; a registration of a new job beyond it is a QuotaError.
  // 0: no limit. Set before serving.
  void set_max_jobs(std::int64_t max_jobs) { max_jobs_ = max_jobs; }
  // GET /healthz: whether the store can serve requests now. Never throws.
  StoreHealth health();

  // The largest cost a report may make: far above any real training run (1e100 J), and low
  // enough that the bandit's sums of squared costs cannot overflow.
  static constexpr double kMaxCost = 1e100;
  // The policies kept parsed between requests (one per job, least recently used out first): at
  // most this many bytes, estimated from their saved states.
  static constexpr std::size_t kPolicyCacheBytes = std::size_t{32} << 20;

  Store& store() { return store_; }
  const std::string& default_policy() const { return default_policy_; }

 private:
  Store& store_;
  std::int64_t now_ms() const;

  std::shared_ptr<Clock> clock_;
  std::string default_policy_;
  std::int64_t max_jobs_ = 0;
};

}  // namespace zeus::server
