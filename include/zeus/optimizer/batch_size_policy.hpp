// The Zeus batch-size policy: pruning exploration, then Gaussian Thompson Sampling, with an
// early-stopping threshold and concurrent submissions. Pure and deterministic: no I/O, no clock,
// no global state; randomness comes from the seeded Rng in its state. The simulator, the
// batch-size-optimizer server and in-process optimizers all drive this one class.
//
// Usage: next() -> run that batch size -> report(trial, cost, converged) (or fail(trial) when the
// run crashed). Several trials may be in flight; their reports may come back in any order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/gaussian_ts.hpp"
#include "zeus/optimizer/rng.hpp"

namespace zeus::optimizer {

struct Trial {
  int id = 0;  // 1, 2, ...
  int batch_size = 0;
  TrialKind kind = TrialKind::kExploration;
  TrialStatus status = TrialStatus::kDispatched;
  double cost = 0.0;       // when succeeded
  bool converged = false;  // when succeeded: reached the target within the threshold
};

class BatchSizePolicy final : public BatchSizeSearch {
 public:
  // Throws zeus::Error(kInvalidArgument): empty or duplicate batch sizes, b0 not among them,
  // pruning_rounds < 1, num_explorations < 0, beta <= 0, window_size < 0, prior precision < 0.
  explicit BatchSizePolicy(BatchSizePolicyConfig config);
  BatchSizePolicy(const BatchSizePolicy& other);
  BatchSizePolicy& operator=(const BatchSizePolicy& other);
  BatchSizePolicy(BatchSizePolicy&&) noexcept = default;
  BatchSizePolicy& operator=(BatchSizePolicy&&) noexcept = default;
  ~BatchSizePolicy() = default;

  // The next trial. Throws zeus::Error(kInvalidArgument) when pruning found no batch size that
  // reaches the target (the job cannot be optimised: fix its target or batch sizes).
  Decision next() override;
  // A finished run: its Zeus cost and whether it reached the target within the threshold (the
  // paper's policy uses nothing else of the result).
  using BatchSizeSearch::report;
  void report(int trial_id, const TrialResult& result) override;
  // A run that crashed before reporting: forgotten, so that pruning explores it again.
  void fail(int trial_id) override;
  bool running(int trial_id) const override;

  std::string_view policy_name() const override { return "zeus"; }
  // beta x the lowest cost of a converged run so far; nullopt before one, or without beta. The
  // same for every trial, and it falls while a run is in flight.
  std::optional<double> cost_threshold() const;
  std::optional<double> cost_threshold(int /*trial_id*/) const override { return cost_threshold(); }
  ThresholdRule threshold_rule() const override { return ThresholdRule::kBetaTimesMinCost; }
  // A prohibitive cost: 100 x beta x the lowest converged cost (1 before one).
  double unstarted_trial_cost(int trial_id) const override;
  // The paper's policy learns from each run's cost alone.
  bool uses_epoch_costs() const override { return false; }
  std::optional<double> min_cost() const override { return min_cost_; }
  // The batch size of the lowest-cost converged run, else b0.
  int best_batch_size() const override { return min_cost_batch_size_; }
  bool in_mab_stage() const { return mab_ != nullptr; }
  bool exploring() const override { return mab_ == nullptr; }
  std::vector<ArmView> arm_views() const override;
  const GaussianTs* mab() const { return mab_.get(); }
  // The bandit once pruning is over.
  const GaussianTs* bandit() const override { return mab(); }
  // The trials the policy still needs: those running (at most kMaxRunningTrials) and, during
  // pruning, the explorations that finished with a result (at most one per batch size and
  // round); once the bandit exists, only those running (finished ones live on as the arms'
  // observations). Failed trials and finished concurrent ones are forgotten, so that the state
  // stays small however long a job recurs and however many of its runs crash.
  const std::map<int, Trial>& trials() const { return trials_; }
  int next_trial_id() const { return next_trial_id_; }
  const BatchSizePolicyConfig& config() const override { return config_; }

  // Exact state as JSON text, and back (throws kInvalidArgument on malformed text).
  std::string save() const override;
  std::unique_ptr<BatchSizeSearch> clone() const override {
    return std::make_unique<BatchSizePolicy>(*this);
  }
  static BatchSizePolicy restore(const std::string& text);

 private:
  struct Explore {
    std::optional<Decision> decision;  // a trial to run now
    std::vector<int> survivors;        // when pruning is over
  };
  Explore explore() const;
  Decision dispatch(int batch_size, TrialKind kind);
  Trial& find(int trial_id);

  BatchSizePolicyConfig config_;
  // Drops the trials the policy no longer needs (see trials()).
  void forget_unneeded();

  std::map<int, Trial> trials_;  // by id
  int next_trial_id_ = 1;
  std::optional<double> min_cost_;
  int min_cost_batch_size_ = 0;
  Rng rng_;
  std::unique_ptr<GaussianTs> mab_;
};

}  // namespace zeus::optimizer
