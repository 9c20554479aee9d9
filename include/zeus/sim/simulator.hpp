// The trace-driven simulator: recurring training jobs under a batch-size/power-limit policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/sim/trace.hpp"

namespace zeus::sim {

// A simulated policy: one of the baselines (default, grid, oracle), or a batch-size search policy
// of the optimizer's registry (optimizer::batch_size_policy_names(): "zeus", "low-regret", ...),
// which the simulator drives through optimizer::BatchSizeSearch without naming it. A new policy
// in the registry is simulated, listed by `zeus sim` and reported with no edit here.
class PolicyKind {
 public:
  // The registry's first two policies and the three baselines, for callers that name one.
  static const PolicyKind kZeus;       // pruning + Gaussian Thompson Sampling + JIT profiling
  static const PolicyKind kLowRegret;  // capped single walk + pooled-noise Thompson Sampling
  static const PolicyKind kDefault;    // b0 at the maximum power limit, every time
  static const PolicyKind kGrid;       // every (batch size, power limit) once, then the best
  static const PolicyKind kOracle;     // the best fixed configuration in expectation

  // Throws Error(kInvalidArgument) listing every name.
  static PolicyKind named(std::string_view name);
  const std::string& name() const { return name_; }
  // A batch-size search policy of the optimizer's registry (not a baseline).
  bool is_search() const;
  bool operator==(const PolicyKind& other) const { return name_ == other.name_; }

 private:
  explicit PolicyKind(std::string name) : name_(std::move(name)) {}
  std::string name_;
};
// Every policy: the registry's search policies in its order, then default, grid and oracle.
std::vector<PolicyKind> all_policies();
std::string_view policy_name(const PolicyKind& policy);
PolicyKind parse_policy(std::string_view name);  // PolicyKind::named

// Concurrent submissions: jobs start and end at the given times (seconds); a job that starts while
// another is in flight uses the best batch size known so far. `runtime_ratio` scales its
// energy and time (as the reference's cluster-trace replay does).
struct JobArrival {
  double start_s = 0.0;
  double end_s = 0.0;
  double runtime_ratio = 1.0;
};
// Drift: from recurrence `at_recurrence` (0-based) on, the job's runs are those of `trace`
// instead: the same batch sizes, power limits and b0, other epochs to target, so the best
// configuration may move. The oracle moves with it (the Oracle policy switches at that
// recurrence, and regret after it is measured against the new oracle).
struct Drift {
  int at_recurrence = 0;
  std::shared_ptr<const WorkloadTrace> trace;
};

struct SimulationConfig {
  double eta = 0.5;
  double beta = 2.0;    // early-stopping threshold factor; <= 0 disables it
  int recurrences = 0;  // 0: 2 x |batch sizes| x |power limits|
  std::uint64_t seed = 1;
  int max_tries = 20;  // per recurrence, before giving up with an error
  int pruning_rounds = 2;
  int window_size = 0;  // Thompson Sampling window (0: all observations)
  double prior_mean = 0.0;
  double prior_precision = 0.0;
  int num_explorations = 2;
  // When not empty, run_cell replays these job submissions (simulate_concurrent) instead of a
  // sequence of recurrences; `recurrences` is then the number of jobs.
  std::vector<JobArrival> arrivals;
  // Sequential recurrences only (simulate_concurrent refuses it).
  std::optional<Drift> drift;
};

// Throws kInvalidArgument when `drift` cannot apply to `trace` over `recurrences`: AT outside
// [1, recurrences - 1], no trace, other batch sizes, power points or b0, or a b0 that never
// reaches the target after the drift.
void check_drift(const WorkloadTrace& trace, const Drift& drift, int recurrences);

// One recurrence: the tries it took until a run reached the target.
struct RecurrenceRecord {
  int recurrence = 0;     // 0-based
  int batch_size = 0;     // of the last try
  int power_limit_w = 0;  // of the last try
  double energy_j = 0.0;  // all tries
  double time_s = 0.0;    // all tries
  double cost = 0.0;      // all tries, eta*E + (1-eta)*MaxPower*T
  int tries = 0;
  bool profiled = false;  // the last try profiled power limits in its first epoch
  // The job's runtime_ratio (replayed arrivals; 1 otherwise): its energy, time and cost are
  // scaled by it, and so is the oracle's cost that its regret is measured against.
  double runtime_ratio = 1.0;
};

struct RunResult {
  std::vector<RecurrenceRecord> history;
  int failed_runs = 0;  // tries that did not reach the target (early-stopped or never converged)
  double total_energy_j() const;
  double total_time_s() const;
  double total_cost() const;
  // Over the last `count` recurrences.
  double last_energy_j(int count) const;
  double last_time_s(int count) const;
  // The configuration chosen most often over the last 10 recurrences (ties: the latest).
  std::pair<int, int> final_configuration() const;
};

// How many recurrences after `from` a run takes to settle on `batch_size`: the smallest d >= 0
// such that recurrence from + d uses it and so do at least 8 of the 10 recurrences from + d to
// from + d + 9 (all within the history). nullopt: it never settles within the history.
std::optional<int> settle_recurrences(const RunResult& run, int from, int batch_size);
inline constexpr int kSettleWindow = 10;
inline constexpr int kSettleMatches = 8;

// The best fixed configuration in expectation (over the trace's runs).
struct Oracle {
  int batch_size = 0;
  int power_limit_w = 0;
  double expected_cost = 0.0;
  double expected_energy_j = 0.0;
  double expected_time_s = 0.0;
};
Oracle compute_oracle(const WorkloadTrace& trace, double eta);
// The expected cost, energy and time per recurrence of always running one configuration
// (retrying failed runs). Throws kInvalidArgument when it never reaches the target.
Oracle expected_fixed(const WorkloadTrace& trace, int batch_size, int power_limit_w, double eta);

// One seed of one policy on one recurring job. Throws zeus::Error(kInvalidArgument) when the
// default batch size never reaches the target, or a recurrence exceeds max_tries.
RunResult simulate_recurring(const WorkloadTrace& trace, PolicyKind policy,
                             const SimulationConfig& config);

// Reads a CSV with columns start_time,end_time[,runtime_ratio] (header required). Errors name the
// file and line.
std::vector<JobArrival> load_arrivals(const std::filesystem::path& csv);
RunResult simulate_concurrent(const WorkloadTrace& trace, PolicyKind policy,
                              const SimulationConfig& config,
                              const std::vector<JobArrival>& arrivals);

// What a drift did to a cell (see Drift, docs/simulator.md "Drift").
struct DriftSummary {
  int at_recurrence = 0;
  int old_oracle_batch_size = 0;
  int old_oracle_power_limit_w = 0;
  double old_oracle_expected_cost = 0.0;
  int new_oracle_batch_size = 0;
  int new_oracle_power_limit_w = 0;
  double new_oracle_expected_cost = 0.0;
  // Over the seeds that settled on the new oracle's batch size (settle_recurrences from AT);
  // NaN when none did.
  double settle_recurrences_mean = 0.0;
  int settled_seeds = 0;
  int unsettled_seeds = 0;         // never settled within the run
  double regret_after_mean = 0.0;  // cumulative regret from AT on, against the new oracle
};

// A seed whose simulation failed (e.g. a recurrence exceeded max_tries), and why.
struct FailedSeed {
  std::uint64_t seed = 0;
  std::string error;
};

// A cell (workload x GPU x policy) over many seeds, compared with Default on the same seeds.
// The figures are over the seeds that did not fail (seeds - failed_seeds.size()).
struct CellSummary {
  std::string workload;
  std::string gpu;
  std::string policy;
  int seeds = 0;
  int recurrences = 0;
  double energy_saving_pct_mean = 0.0, energy_saving_pct_std = 0.0;
  double energy_saving_last10_pct_mean = 0.0, energy_saving_last10_pct_std = 0.0;
  double time_saving_pct_mean = 0.0, time_saving_pct_std = 0.0;
  double time_saving_last10_pct_mean = 0.0, time_saving_last10_pct_std = 0.0;
  double cost_saving_pct_mean = 0.0, cost_saving_pct_std = 0.0;
  double cum_regret_mean = 0.0, cum_regret_std = 0.0;  // sum over recurrences of cost - oracle
  int oracle_batch_size = 0;                           // with a drift, the oracle after it
  int oracle_power_limit_w = 0;
  double target_metric = 0.0;  // the workload's, as simulated
  int final_batch_size = 0;    // modal over seeds of each seed's final configuration
  int final_power_limit_w = 0;
  // The expected cost per recurrence (expected_fixed) of the modal final configuration, and the
  // mean over seeds of each seed's own final configuration's.
  double final_expected_cost = 0.0;
  double final_expected_cost_mean = 0.0;
  double final_matches_oracle_pct = 0.0;  // seeds whose final batch size is the oracle's
  double failed_runs_mean = 0.0;
  std::vector<std::string> notes;
  std::optional<DriftSummary> drift;
  std::vector<FailedSeed> failed_seeds;  // in the order of the seeds given
  // Per seed (for --out): the policy's history (empty for a failed seed).
  std::vector<RunResult> runs;
};

// Runs `seeds` with `threads` worker threads (0: hardware concurrency). A seed that fails is
// listed in failed_seeds and the others are summarised; throws kInvalidArgument when every seed
// fails (with the first seed's error).
CellSummary run_cell(const WorkloadTrace& trace, PolicyKind policy, const SimulationConfig& config,
                     const std::vector<std::uint64_t>& seeds, unsigned threads = 0);

}  // namespace zeus::sim
