#include "server/service.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <list>
#include <mutex>
#include <random>
#include <unordered_map>

#include "bso/wire_text.hpp"
#include "zeus/common/units.hpp"
#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/cost.hpp"

namespace zeus::server {
namespace {

using optimizer::BatchSizePolicyConfig;
using optimizer::BatchSizeSearch;
using optimizer::ThresholdRule;

std::uint64_t random_u64() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine();
}

BatchSizePolicyConfig policy_config(const bso::JobSpec& spec, std::uint64_t seed) {
  BatchSizePolicyConfig config;
  config.batch_sizes = spec.batch_sizes;
  config.default_batch_size = spec.default_batch_size;
  config.beta = spec.beta_knob;
  config.pruning_rounds = spec.num_pruning_rounds;
  config.mab.prior_mean = spec.mab_prior_mean;
  config.mab.prior_precision = spec.mab_prior_precision;
  config.mab.num_explorations = spec.mab_num_explorations;
  config.mab.window_size = spec.window_size > 0 ? spec.window_size : 0;
  config.seed = seed;
  return config;
}

// Policies saved or restored lately, one per job, shared by the request threads: the next
// request for a job usually finds the state the previous one left, and takes a copy of the
// policy instead of parsing the saved text. An entry is used only when its text is the row's
// (another server process may have changed the row since; then the policy is restored from the
// row's text). Bounded in bytes (kPolicyCacheBytes, estimated from each state's text), least
// recently used first out, so that neither many jobs nor large states hold memory for good.
constexpr std::size_t kPolicyCacheBytes = BsoService::kPolicyCacheBytes;

class RecentPolicies {
 public:
  std::unique_ptr<BatchSizeSearch> find(const std::string& job_id, const std::string& state) {
    std::lock_guard lock(mutex_);
    const auto found = entries_.find(job_id);
    if (found == entries_.end() || found->second.state != state) {
      return nullptr;
    }
    order_.splice(order_.begin(), order_, found->second.position);
    return found->second.policy->clone();
  }
  void remember(const std::string& job_id, const std::string& state,
                const BatchSizeSearch& policy) {
    // The text, the parsed policy (about as large again) and the bookkeeping.
    const std::size_t bytes = 2 * state.size() + job_id.size() + 512;
    if (bytes > kPolicyCacheBytes / 4) {
      forget(job_id);
      return;
    }
    std::unique_ptr<BatchSizeSearch> copy = policy.clone();
    std::lock_guard lock(mutex_);
    auto found = entries_.find(job_id);
    if (found == entries_.end()) {
      order_.push_front(job_id);
      found = entries_.emplace(job_id, Entry{{}, nullptr, 0, order_.begin()}).first;
    } else {
      order_.splice(order_.begin(), order_, found->second.position);
      bytes_ -= found->second.bytes;
    }
    found->second.state = state;
    found->second.policy = std::move(copy);
    found->second.bytes = bytes;
    bytes_ += bytes;
    while (bytes_ > kPolicyCacheBytes && order_.size() > 1) {
      const auto oldest = entries_.find(order_.back());
      bytes_ -= oldest->second.bytes;
      entries_.erase(oldest);
      order_.pop_back();
    }
  }
  void forget(const std::string& job_id) {
    std::lock_guard lock(mutex_);
    const auto found = entries_.find(job_id);
    if (found != entries_.end()) {
      bytes_ -= found->second.bytes;
      order_.erase(found->second.position);
      entries_.erase(found);
    }
  }

 private:
  struct Entry {
    std::string state;
    std::unique_ptr<BatchSizeSearch> policy;
    std::size_t bytes = 0;
    std::list<std::string>::iterator position;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;  // by job id
  std::list<std::string> order_;                    // job ids, most recently used first
  std::size_t bytes_ = 0;
};

RecentPolicies& recent_policies() {
  static RecentPolicies recent;
  return recent;
}

// Copies the policy's outcome into the job row (spec.job_id set).
void store_policy(JobRecord& job, const BatchSizeSearch& policy) {
  job.policy_state = policy.save();
  job.stage = policy.exploring() ? "Pruning" : "MAB";
  job.min_cost = policy.min_cost();
  job.min_cost_batch_size = policy.best_batch_size();
  if (job.spec.job_id) {
    recent_policies().remember(*job.spec.job_id, job.policy_state, policy);
  }
}

// A state saved before there were two policies has no "policy" member: the paper's.
std::unique_ptr<BatchSizeSearch> load_policy(const JobRecord& job) {
  const std::string job_id = job.spec.job_id.value_or("");
  if (auto found = recent_policies().find(job_id, job.policy_state)) {
    return found;
  }
  try {
    std::unique_ptr<BatchSizeSearch> policy =
        optimizer::restore_batch_size_search(job.policy_state);
    recent_policies().remember(job_id, job.policy_state, *policy);
    return policy;
  } catch (const Error& error) {
    throw StoreError(StoreFailure::kCorrupt, "the stored policy state of job " +
                                                 job.spec.job_id.value_or("?") +
                                                 " is unreadable: " + error.what());
  }
}

// A trial still Dispatched in its row that the policy gave up as abandoned (more than
// optimizer::kMaxRunningTrials ran at once): its row is marked failed now, as PATCH /trials would
// have, and the policy is left as it is.
bool given_up(const BatchSizeSearch& policy, TrialRecord& trial, std::int64_t now_ms) {
  if (policy.running(trial.trial_number)) {
    return false;
  }
  trial.status = "Failed";
  trial.end_ms = now_ms;
  trial.time_s.reset();
  trial.energy_j.reset();
  trial.metric.reset();
  trial.epochs.reset();
  return true;
}

std::string failed_trial_message(const TrialRecord& trial) {
  return fmt::format(
      "Trial({}) of job {} was marked failed (its run ended before reporting); it takes no more "
      "reports",
      trial.trial_number, trial.job_id);
}

std::string trial_repr(const bso::TrialId& trial) {
  return fmt::format("job_id='{}' batch_size={} trial_number={}", trial.job_id, trial.batch_size,
                     trial.trial_number);
}

// A job id to look up, from the query string or the path: whatever bytes the client sent,
// percent-decoded. Only ids that are not UTF-8 are refused here (none can be stored); others
// are simply looked up.
void check_lookup_id(const std::string& job_id, const char* where) {
  if (const std::size_t bad = first_invalid_utf8(job_id); bad != std::string::npos) {
    throw bso::ValidationError(
        {{{where, "job_id"},
          fmt::format("job_id is not valid UTF-8 (byte 0x{:02X} at offset {}); send the id's "
                      "UTF-8 bytes, percent-encoded",
                      static_cast<unsigned char>(job_id[bad]), bad),
          "value_error.str.utf8",
          nullptr}});
  }
}

// A cost the policy core can learn from: finite, and small enough that its statistics (sums of
// squared costs) cannot overflow.
void check_cost(double cost, const bso::TrainingResult& result, const bso::JobSpec& spec) {
  if (std::isfinite(cost) && cost <= BsoService::kMaxCost) {
    return;
  }
  const std::string message = fmt::format(
      "time {} s and energy {} J make the cost eta*energy + (1-eta)*max_power*time = {} (eta_knob "
      "{}, max_power {} W), which is {}; report the cumulative time in seconds and energy in "
      "joules",
      bso::python_float_repr(result.time_s), bso::python_float_repr(result.energy_j),
      bso::python_float_repr(cost), bso::python_float_repr(spec.eta_knob),
      bso::python_float_repr(spec.max_power_w),
      std::isfinite(cost) ? "above the limit " + bso::python_float_repr(BsoService::kMaxCost)
                          : std::string("not a finite number"));
  const nlohmann::json ctx = {{"limit_value", BsoService::kMaxCost}};
  throw bso::ValidationError({{{"body", "time"}, message, "value_error.number.cost", ctx},
                              {{"body", "energy"}, message, "value_error.number.cost", ctx}});
}

}  // namespace

BsoService::BsoService(Store& store, std::shared_ptr<Clock> clock, std::string default_policy)
    : store_(store),
      clock_(clock ? std::move(clock) : system_clock()),
      default_policy_(std::move(default_policy)) {
  optimizer::check_batch_size_policy_name(default_policy_);
}

std::int64_t BsoService::now_ms() const {
  return units::milliseconds_from_nanoseconds(clock_->now_ns());
}

RegisterResult BsoService::register_job(bso::JobSpec spec) {
  // The wire format checks these too; callers that build a JobSpec themselves are checked here.
  std::vector<bso::FieldError> bad_ids;
  if (spec.job_id) {
    if (const std::string problem = bso::job_id_problem(*spec.job_id); !problem.empty()) {
      bad_ids.push_back({{"body", "job_id"}, "job_id " + problem, "value_error.job_id", nullptr});
    }
  }
  if (const std::string problem =
          bso::job_id_problem(spec.job_id_prefix, bso::kMaxJobIdPrefixBytes);
      !problem.empty()) {
    bad_ids.push_back(
        {{"body", "job_id_prefix"}, "job_id_prefix " + problem, "value_error.job_id", nullptr});
  }
  if (spec.batch_sizes.size() > bso::kMaxBatchSizes) {
    bad_ids.push_back(
        {{"body", "batch_sizes"},
         "ensure this value has at most " + std::to_string(bso::kMaxBatchSizes) + " items",
         "value_error.list.max_items",
         nullptr});
  }
  if (spec.policy) {
    try {
      optimizer::check_batch_size_policy_name(*spec.policy);
    } catch (const Error& error) {
      bad_ids.push_back({{"body", "policy"}, error.what(), "value_error.policy", nullptr});
    }
  }
  if (!bad_ids.empty()) {
    throw bso::ValidationError(std::move(bad_ids));
  }
  // What the client asked for; the stored spec names the policy the job runs.
  const std::optional<std::string> requested_policy = spec.policy;
  spec.policy = spec.policy.value_or(default_policy_);
  // The policy core is the judge of what it can run (the wire validation covers the rest).
  const std::uint64_t seed =
      spec.mab_seed ? static_cast<std::uint64_t>(*spec.mab_seed) : random_u64();
  std::unique_ptr<BatchSizeSearch> policy;
  try {
    policy = optimizer::make_batch_size_search(*spec.policy, policy_config(spec, seed));
  } catch (const Error& error) {
    throw bso::ValidationError({{{"body", "__root__"}, error.what(), "value_error", nullptr}});
  }

  JobRecord record;
  record.min_cost_batch_size = spec.default_batch_size;
  store_policy(record, *policy);

  RegisterResult result;
  const bool generate = !spec.job_id.has_value();
  store_.transact([&](StoreTransaction& tx) {
    record.created_ms = now_ms();
    if (max_jobs_ > 0 && (generate || !tx.get_job(*spec.job_id)) && tx.count_jobs() >= max_jobs_) {
      throw QuotaError("the server holds " + std::to_string(max_jobs_) +
                       " jobs, its limit (zeus bso serve --max-jobs): delete finished jobs "
                       "(DELETE /jobs?job_id=...) or ask the operator to raise the limit");
    }
    if (generate) {
      // "<prefix>-<8 hex digits>", drawn until unused.
      for (;;) {
        spec.job_id =
            fmt::format("{}-{:08x}", spec.job_id_prefix, static_cast<std::uint32_t>(random_u64()));
        record.spec = spec;
        if (tx.insert_job(record)) {
          result = {true, spec};
          return;
        }
      }
    }
    record.spec = spec;
    if (tx.insert_job(record)) {
      result = {true, spec};
      return;
    }
    const std::optional<JobRecord> existing = tx.get_job(*spec.job_id);
    if (!existing) {
      throw ServiceError(ErrorKind::kConflict,
                         "job " + *spec.job_id + " vanished while being registered; retry");
    }
    // A spec without a policy leaves the choice to the server, which made it when the job was
    // registered: it matches the job whatever its policy. One that names a policy must name the
    // job's.
    bso::JobSpec stored = existing->spec;
    stored.policy = stored.policy.value_or(optimizer::default_batch_size_policy_name());
    bso::JobSpec asked = spec;
    asked.policy = requested_policy ? requested_policy : stored.policy;
    if (!(stored == asked)) {
      throw ServiceError(
          ErrorKind::kAlreadyExists,
          "JobSpec doesn't match with existing jobSpec. Use a new job_id for different "
          "configuration" +
              (stored.policy != asked.policy
                   ? " (the job runs the \"" + *stored.policy + "\" policy, the spec asks for \"" +
                         *asked.policy + "\")"
                   : std::string()));
    }
    result = {false, stored};
  });
  return result;
}

bso::TrialId BsoService::next_batch_size(const std::string& job_id) {
  check_lookup_id(job_id, "query");
  bso::TrialId trial;
  store_.transact([&](StoreTransaction& tx) {
    std::optional<JobRecord> job = tx.lock_job(job_id);
    if (!job) {
      throw ServiceError(ErrorKind::kNotFound,
                         "Unknown job(" + job_id + "). Please register the job first");
    }
    const std::unique_ptr<BatchSizeSearch> policy = load_policy(*job);
    optimizer::Decision decision;
    try {
      decision = policy->next();
    } catch (const Error& error) {
      throw ServiceError(ErrorKind::kConflict,
                         std::string("No converged batch sizes has observed. Reconfigure "
                                     "batch_sizes and re-launch the job. (") +
                             error.what() + ")");
    }
    TrialRecord record;
    record.job_id = job_id;
    record.trial_number = decision.trial_id;
    record.batch_size = decision.batch_size;
    record.type = optimizer::trial_kind_wire_name(decision.kind);
    record.status = "Dispatched";
    record.start_ms = now_ms();
    tx.insert_trial(record);
    store_policy(*job, *policy);
    tx.update_job(*job);
    trial = {job_id, decision.batch_size, decision.trial_id};
  });
  return trial;
}

bso::ReportResponse BsoService::report(const bso::TrainingResult& result) {
  bso::ReportResponse response;
  const std::string& job_id = result.trial.job_id;
  check_lookup_id(job_id, "body");
  std::optional<TrialRecord> abandoned;
  store_.transact([&](StoreTransaction& tx) {
    abandoned.reset();
    std::optional<TrialRecord> trial;
    std::optional<JobRecord> job = tx.lock_job_with_trial(job_id, result.trial.trial_number, trial);
    if (!job) {
      throw ServiceError(ErrorKind::kNotFound, "Unknown job " + job_id);
    }
    if (!trial || trial->batch_size != result.trial.batch_size) {
      throw ServiceError(
          ErrorKind::kNotFound,
          fmt::format("Unknown trial {} time={} energy={} metric={} current_epoch={}",
                      trial_repr(result.trial), bso::python_float_repr(result.time_s),
                      bso::python_float_repr(result.energy_j),
                      bso::python_float_repr(result.metric), result.current_epoch));
    }
    if (trial->status != "Dispatched") {
      if (!trial->converged) {
        throw ServiceError(ErrorKind::kConflict, failed_trial_message(*trial));
      }
      response = {
          true, *trial->converged,
          fmt::format("Result for this trial({}) is already reported.", trial->trial_number)};
      return;
    }
    const bso::JobSpec& spec = job->spec;
    const std::unique_ptr<BatchSizeSearch> policy = load_policy(*job);
    if (given_up(*policy, *trial, now_ms())) {
      tx.update_trial(*trial);
      abandoned = trial;  // refused once the row's change is committed
      return;
    }
    const double cost =
        optimizer::zeus_cost(result.energy_j, result.time_s, spec.eta_knob, spec.max_power_w);
    check_cost(cost, result, spec);
    // Per trial: a policy may cap a first probe differently from a bandit run.
    const std::optional<double> threshold = policy->cost_threshold(trial->trial_number);
    const bool within = !threshold || cost <= *threshold;
    const bool converged = spec.higher_is_better_metric ? result.metric >= spec.target_metric
                                                        : result.metric <= spec.target_metric;
    // A policy may learn from the cost of one steady epoch: the difference between a run's last
    // two cumulative reports. A running trial's row keeps the latest report for that (the
    // paper's jobs write nothing until the final report, as before).
    const bool wants_epoch_cost = policy->uses_epoch_costs();
    if (within && result.current_epoch < spec.max_epochs && !converged) {
      if (wants_epoch_cost) {
        trial->time_s = result.time_s;
        trial->energy_j = result.energy_j;
        trial->metric = result.metric;
        trial->epochs = result.current_epoch;
        tx.update_trial(*trial);
      }
      response = {false, false, "Stop condition not met, keep training"};
      return;
    }
    double epoch_cost = 0.0;  // unknown: the policy takes cost / epochs
    if (wants_epoch_cost && trial->epochs && *trial->epochs == result.current_epoch - 1 &&
        trial->time_s && trial->energy_j) {
      const double previous =
          optimizer::zeus_cost(*trial->energy_j, *trial->time_s, spec.eta_knob, spec.max_power_w);
      if (std::isfinite(previous) && cost > previous) {
        epoch_cost = cost - previous;
      }
    }
    if (converged && within) {
      response = {true, true, "Train succeeded"};
    } else if (!within && policy->threshold_rule() == ThresholdRule::kBetaTimesMinCost) {
      // The reference's message, which its users grep.
      response = {true, false,
                  fmt::format("Batch Size({}) exceeded the cost upper bound: current cost({}) "
                              ">\n                    beta_knob({})*min_cost({})",
                              result.trial.batch_size, bso::python_float_repr(cost),
                              bso::python_float_repr(spec.beta_knob.value_or(0.0)),
                              bso::python_float_repr(policy->min_cost().value_or(0.0)))};
    } else if (!within) {
      response = {true, false,
                  fmt::format("Batch Size({}) exceeded the cost upper bound: current cost({}) > "
                              "cost_threshold({}), the {} policy's limit for this trial",
                              result.trial.batch_size, bso::python_float_repr(cost),
                              bso::python_float_repr(*threshold), policy->policy_name())};
    } else {
      response = {true, false,
                  fmt::format("Train failed to converge within max_epoch({})", spec.max_epochs)};
    }
    policy->report(trial->trial_number, optimizer::TrialResult{cost, response.converged,
                                                               result.current_epoch, epoch_cost});
    trial->status = "Succeeded";
    trial->end_ms = now_ms();
    trial->time_s = result.time_s;
    trial->energy_j = result.energy_j;
    trial->metric = result.metric;
    trial->epochs = result.current_epoch;
    trial->converged = response.converged;
    tx.update_trial(*trial);
    store_policy(*job, *policy);
    tx.update_job(*job);
  });
  if (abandoned) {
    throw ServiceError(ErrorKind::kConflict, failed_trial_message(*abandoned));
  }
  return response;
}

void BsoService::end_trial(const bso::TrialId& trial_id) {
  check_lookup_id(trial_id.job_id, "body");
  store_.transact([&](StoreTransaction& tx) {
    // Most ends come after the final report: a finished trial needs no lock on its job (a
    // trial row exists only with its job's).
    std::optional<TrialRecord> trial = tx.get_trial(trial_id.job_id, trial_id.trial_number);
    if (trial && trial->batch_size == trial_id.batch_size && trial->status != "Dispatched") {
      return;  // finished trials stay as they are
    }
    std::optional<JobRecord> job =
        tx.lock_job_with_trial(trial_id.job_id, trial_id.trial_number, trial);
    if (!trial || trial->batch_size != trial_id.batch_size) {
      throw ServiceError(ErrorKind::kNotFound, "Could not find the trial: " + trial_repr(trial_id));
    }
    if (trial->status != "Dispatched") {
      return;  // finished trials stay as they are
    }
    const std::unique_ptr<BatchSizeSearch> policy = load_policy(*job);
    if (given_up(*policy, *trial, now_ms())) {
      tx.update_trial(*trial);
      return;
    }
    policy->fail(trial->trial_number);
    trial->status = "Failed";
    trial->end_ms = now_ms();
    // A failed trial has no measurements (a running trial's row may hold its latest, for a
    // policy that uses epoch costs).
    trial->time_s.reset();
    trial->energy_j.reset();
    trial->metric.reset();
    trial->epochs.reset();
    tx.update_trial(*trial);
    store_policy(*job, *policy);
    tx.update_job(*job);
  });
}

bool BsoService::delete_job(const std::string& job_id) {
  check_lookup_id(job_id, "query");
  bool deleted = false;
  store_.transact([&](StoreTransaction& tx) { deleted = tx.delete_job(job_id); });
  return deleted;
}

std::optional<JobState> BsoService::job_state(const std::string& job_id, int trials_after,
                                              std::size_t trials_limit) {
  check_lookup_id(job_id, "path");
  std::optional<JobRecord> job;
  std::vector<TrialRecord> trials;
  store_.transact([&](StoreTransaction& tx) {
    job = tx.get_job(job_id);
    if (job) {
      // One more than asked: whether there is a next page.
      trials = tx.list_trials(job_id, trials_after, trials_limit + 1);
    }
  });
  if (!job) {
    return std::nullopt;
  }
  const std::unique_ptr<BatchSizeSearch> policy = load_policy(*job);
  // One threshold for the job (the paper's, shown as before), or each running trial's own.
  const bool shared_threshold = policy->threshold_rule() == ThresholdRule::kBetaTimesMinCost;
  JobState state;
  state.job_id = job_id;
  state.spec = job->spec;
  state.spec.policy = std::string(policy->policy_name());
  state.stage = job->stage;
  state.min_cost = job->min_cost;
  state.min_cost_batch_size = job->min_cost_batch_size;
  state.created_ms = job->created_ms;
  state.cost_threshold = policy->shared_cost_threshold();
  if (trials.size() > trials_limit) {
    trials.resize(trials_limit);
    state.trials_next = trials.empty() ? trials_after : trials.back().trial_number;
  }
  // A Gaussian bandit's arms as they are (the paper's, as before); another policy's own view.
  if (const optimizer::GaussianTs* bandit = policy->bandit()) {
    for (const auto& [batch_size, arm] : bandit->arms()) {
      state.arms.push_back({batch_size, arm});
    }
  } else {
    state.arm_views = policy->arm_views();
  }
  for (TrialRecord& trial : trials) {
    std::optional<double> cost;
    if (trial.time_s && trial.energy_j) {
      cost = optimizer::zeus_cost(*trial.energy_j, *trial.time_s, job->spec.eta_knob,
                                  job->spec.max_power_w);
    }
    std::optional<double> threshold;
    if (!shared_threshold && trial.status == "Dispatched") {
      threshold = policy->cost_threshold(trial.trial_number);
    }
    state.trials.push_back({std::move(trial), cost, threshold});
  }
  return state;
}

JobIdPage BsoService::job_ids(const std::string& after, std::size_t limit) {
  JobIdPage page;
  // One more than asked: whether there is a next page.
  store_.transact([&](StoreTransaction& tx) { page.ids = tx.list_job_ids(after, limit + 1); });
  if (page.ids.size() > limit) {
    page.ids.resize(limit);
    page.next = page.ids.empty() ? after : page.ids.back();
  }
  return page;
}

StoreHealth BsoService::health() {
  return store_.health();
}

}  // namespace zeus::server
