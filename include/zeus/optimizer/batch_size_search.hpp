// The batch-size policies behind one interface, chosen by name: "zeus" (the paper's pruning +
// Gaussian Thompson Sampling, BatchSizePolicy, the default for reproduction and wire
// compatibility) and "low-regret" (LowRegretPolicy: capped single-walk exploration, then
// Thompson Sampling over a pooled-noise model of each batch size's cost). Every policy is pure:
// no I/O, no clock, no global state; its randomness comes from the seeded Rng in its state, and
// save()/restore give back the exact state.
//
// Usage: next() -> run that batch size, stopping it early once its cost passes
// cost_threshold(trial) -> report(trial, result) (or fail(trial) when the run crashed). Several
// trials may be in flight; their reports may come back in any order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimizer/gaussian_ts.hpp"

namespace zeus::optimizer {

enum class TrialKind { kExploration, kConcurrent, kMab };
enum class TrialStatus { kDispatched, kSucceeded, kFailed };

struct Decision {
  int trial_id = 0;
  int batch_size = 0;
  TrialKind kind = TrialKind::kExploration;
};

// What a finished run reports. Only `cost` and `converged` are required; the rest lets a policy
// split the cost into its two factors (the per-epoch cost, fixed once the power limit is chosen,
// and the noisy number of epochs).
struct TrialResult {
  double cost = 0.0;        // the run's Zeus cost, every epoch included
  bool converged = false;   // reached the target within the threshold and max epochs
  int epochs = 0;           // epochs run; 0 when unknown
  double epoch_cost = 0.0;  // the cost of one steady epoch (after profiling); 0: cost / epochs
};

// The parameters of the "low-regret" policy (see docs/simulator.md, "The low-regret policy").
struct LowRegretConfig {
  // A batch size's first run is stopped once its cost passes probe_cap x the best mean cost known
  // (the paper stops every run at beta x the lowest single cost). >= 1.
  double probe_cap = 1.5;
  // Prior for the relative run-to-run noise of a batch size's cost (the standard deviation of
  // log cost), and how many observations it is worth, before the pooled estimate takes over.
  double noise_prior = 0.1;
  double noise_prior_weight = 2.0;
  // A new cost more than drift_z predictive standard deviations from its batch size's mean,
  // twice in a row on the same side, is taken as drift: every batch size keeps only its latest
  // observation and the neighbours of the best are probed again. 0 disables detection.
  double drift_z = 3.0;
  // Each batch size's mean epochs are shrunk toward the mean over batch sizes, by as much as the
  // batch sizes are seen to differ, but never assuming them closer than this (log units).
  double shrinkage_floor = 0.05;
  // Each batch size's own spread is estimated with the pooled one as its prior, worth this many
  // observations: a batch size whose runs straddle two epoch counts gets the wider spread it
  // shows, and one whose runs all take the same epochs soon gets a narrow one (the pooled spread
  // is mostly the straddling batch sizes', which are the cheap ones and run the most).
  double arm_noise_weight = 0.25;
};

struct BatchSizePolicyConfig {
  std::vector<int> batch_sizes;      // the candidates (any order; kept sorted)
  int default_batch_size = 0;        // b0, one of them
  std::optional<double> beta = 2.0;  // early stopping at beta x min cost; nullopt disables
  int pruning_rounds = 2;            // >= 1 ("zeus" only)
  GaussianTsConfig mab;              // "zeus"; window_size is used by both
  LowRegretConfig low_regret;        // "low-regret" only
  std::uint64_t seed = 0;
};

// How a policy stops running trials early. Hosts word and show thresholds by this, never by the
// policy's name.
enum class ThresholdRule {
  // One threshold for every trial: beta x the lowest cost of a converged run (the paper's; it
  // falls while a run is in flight). The BSO server words and shows it as the reference does.
  kBetaTimesMinCost,
  // Each trial its own, fixed when it is dispatched.
  kPerTrial,
};

// A batch size the policy is choosing among, as the policy sees it.
struct ArmView {
  int batch_size = 0;
  std::int64_t observations = 0;
  double mean_cost = 0.0;  // the policy's current estimate of one run's cost
};

// The most trials a policy keeps running at once. A trial whose client crashed is never reported
// nor failed; past this many, dispatching another gives up the oldest running trial as if it had
// failed (its batch size may be explored again), so that a job's saved state and the work of
// each request stay bounded however many runs were abandoned.
inline constexpr int kMaxRunningTrials = 64;

class BatchSizeSearch {
 public:
  virtual ~BatchSizeSearch() = default;

  virtual std::string_view policy_name() const = 0;
  // The next trial. Throws zeus::Error(kInvalidArgument) when exploration found no batch size
  // that reaches the target (the job cannot be optimised: fix its target or batch sizes).
  virtual Decision next() = 0;
  // A finished run. Throws kInvalidArgument for an unknown trial, one already reported, or a
  // cost that is not a finite non-negative number.
  virtual void report(int trial_id, const TrialResult& result) = 0;
  void report(int trial_id, double cost, bool converged) {
    report(trial_id, TrialResult{cost, converged, 0, 0.0});
  }
  // A run that crashed before reporting: forgotten, so that its batch size can be tried again.
  virtual void fail(int trial_id) = 0;
  // Whether the trial is still running as far as the policy knows: dispatched, and neither
  // reported, failed, nor given up as abandoned (see kMaxRunningTrials). A host answers a report
  // for a trial the policy gave up as it answers one for a failed trial.
  virtual bool running(int trial_id) const = 0;

  // The cost at which a running trial is stopped early; nullopt: never (or unknown trial).
  virtual std::optional<double> cost_threshold(int trial_id) const = 0;
  // How cost_threshold is set: one for all trials, or one per trial.
  virtual ThresholdRule threshold_rule() const = 0;
  // kBetaTimesMinCost: the threshold every trial shares (nullopt without beta or before a
  // converged run). kPerTrial: nullopt (see cost_threshold).
  std::optional<double> shared_cost_threshold() const;
  // The cost to report for a trial whose threshold stops it before its first epoch ends (a host
  // that predicts the stop, as the simulator does, never runs it), as not converged.
  virtual double unstarted_trial_cost(int trial_id) const = 0;
  // Whether report() uses TrialResult::epochs and epoch_cost: a host then keeps a running
  // trial's latest measurements to derive the cost of one steady epoch. False: cost and
  // converged only.
  virtual bool uses_epoch_costs() const = 0;
  // The lowest cost of a converged run so far.
  virtual std::optional<double> min_cost() const = 0;
  // The batch size the policy currently believes best (b0 before any result).
  virtual int best_batch_size() const = 0;
  // True while it still explores batch sizes for the first time ("Pruning" on the wire).
  virtual bool exploring() const = 0;
  virtual std::vector<ArmView> arm_views() const = 0;
  // The Gaussian bandit the policy chooses with, when it has one (a host shows its arms rather
  // than arm_views()); nullptr otherwise.
  virtual const GaussianTs* bandit() const = 0;
  virtual const BatchSizePolicyConfig& config() const = 0;

  // Exact state as JSON text (with a "policy" member); restore_batch_size_search reads it back.
  virtual std::string save() const = 0;
  virtual std::unique_ptr<BatchSizeSearch> clone() const = 0;
};

// A trial kind as the BSO wire spells it (the server's trial "type"): "Exploration",
// "Concurrent" or "MAB".
const char* trial_kind_wire_name(TrialKind kind);

// "zeus", "low-regret". The registry below is the one place that knows policies by name.
const std::vector<std::string>& batch_size_policy_names();
// "zeus", the paper's: the policy of a saved state, a stored job or a server's answer that names
// none (all were the paper's before there were two policies).
const std::string& default_batch_size_policy_name();
// Throws zeus::Error(kInvalidArgument) naming the known policies for any other name.
void check_batch_size_policy_name(std::string_view name);
// Throws kInvalidArgument for an unknown name or a configuration the policy cannot run.
std::unique_ptr<BatchSizeSearch> make_batch_size_search(std::string_view policy,
                                                        BatchSizePolicyConfig config);
// A saved state of any policy (a state without "policy" is the default's, as saved before there
// were two). Throws kInvalidArgument on malformed text.
std::unique_ptr<BatchSizeSearch> restore_batch_size_search(const std::string& text);

}  // namespace zeus::optimizer
