// The "low-regret" batch-size policy: the same job as the paper's (choose each recurrence's batch
// size, learning from every run's cost) for about half the exploration cost. It differs in three
// ways, each aimed at where the paper's regret goes (docs/simulator.md, "The low-regret policy"):
//
// 1. One walk, capped. From b0 it probes each smaller batch size in turn, then each larger one,
//    once. A probe is stopped as soon as its cost passes probe_cap x the best mean cost known
//    (the paper runs failed probes to 2 x the lowest single cost, and prunes twice).
//    A direction ends at the first probe stopped this way, after two converged steps that each
//    got dearer (mean and per-epoch cost), or after one to far above the best or with a steep
//    rise of the per-epoch cost that fewer epochs did not pay for; the side of b0 away from a
//    much cheaper batch size is not walked (cost taken as unimodal in batch size).
// 2. One model of the noise. A batch size's cost is its per-epoch cost (fixed once its power
//    limit is profiled) times a noisy number of epochs, and that noise is much the same at every
//    batch size: the relative spread (the standard deviation of log cost) is pooled over all batch
//    sizes, with a weak prior, and is each batch size's prior for its own spread, worth a quarter
//    of a run (a batch size whose runs never vary is soon believed to be as steady as it is).
// 3. Thompson Sampling on that model: each batch size's mean log cost is drawn from its posterior
//    (its observations' mean, the pooled spread / sqrt(count)) and the cheapest draw runs. Bandit
//    runs stop at beta x the best mean cost. A batch size seen once is drawn with at least a
//    share of the step from its run's whole epochs E to E - 1: it may need fewer.
//
// Drift: an observation far outside its batch size's predictive spread twice running on the same
// side is drift, in either direction: that batch size keeps only those two observations (its
// post-drift evidence), the others one observation each, shifted as the drift shifted it when
// costs fell; when costs rose, pruned batch sizes are probed again from the best. The two
// surprises are taken out of the pooled noise. A window (mab.window_size) also limits
// each batch size's mean to its latest runs.
//
// Pure like the paper's policy: no I/O, clock or globals; exact JSON save/restore; concurrent
// trials (while a probe runs, the other direction's probe or the best batch size is dispatched);
// reports in any order; crashed trials are forgotten and their batch size probed again.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/rng.hpp"

namespace zeus::optimizer {

class LowRegretPolicy final : public BatchSizeSearch {
 public:
  // What the policy knows about one candidate batch size.
  enum class Status { kUntried, kArm, kPruned };
  struct Candidate {
    Status status = Status::kUntried;
    double epoch_cost = 0.0;  // the latest known cost of one steady epoch; 0 unknown
    // Observations of log(cost) that the mean uses: the window (window_size > 0) or all since
    // the last reset, as a count, mean and sum of squared deviations (Welford).
    std::deque<double> window;
    std::int64_t count = 0;
    double mean = 0.0;
    double m2 = 0.0;
    int surprise_side = 0;  // +1/-1: the last observation was a surprise on that side
    // That surprise: its value, the mean it was a surprise against, and what it added to the
    // pooled noise (taken back out when a second surprise makes it drift, not noise).
    double surprise_y = 0.0;
    double surprise_mean = 0.0;
    double surprise_ss = 0.0;
    // log(per-epoch cost), averaged over the runs observed (scale_count): observations are
    // log(cost) minus their own run's, i.e. log(epochs), so that batch sizes can share what they
    // say. `scaled` is false when no per-epoch cost was known (then observations are log(cost)
    // and are not pooled).
    double log_scale = 0.0;
    bool scaled = false;
    std::int64_t scale_count = 0;  // runs log_scale averages
  };
  struct PendingTrial {
    int id = 0;
    int batch_size = 0;
    TrialKind kind = TrialKind::kExploration;
    std::optional<double> threshold;
  };

  // Throws zeus::Error(kInvalidArgument) for the checks every policy makes (batch sizes, b0,
  // beta, window) and probe_cap < 1, noise_prior <= 0, noise_prior_weight < 0, drift_z < 0.
  explicit LowRegretPolicy(BatchSizePolicyConfig config);

  std::string_view policy_name() const override { return "low-regret"; }
  Decision next() override;
  using BatchSizeSearch::report;
  void report(int trial_id, const TrialResult& result) override;
  void fail(int trial_id) override;
  bool running(int trial_id) const override { return pending_.count(trial_id) != 0; }

  std::optional<double> cost_threshold(int trial_id) const override;
  ThresholdRule threshold_rule() const override { return ThresholdRule::kPerTrial; }
  // The trial's threshold: a lower bound on what the run would have cost.
  double unstarted_trial_cost(int trial_id) const override;
  // Each observation is split into the per-epoch cost and the number of epochs.
  bool uses_epoch_costs() const override { return true; }
  // Thompson Sampling on its own model of the cost, not a Gaussian bandit.
  const GaussianTs* bandit() const override { return nullptr; }
  std::optional<double> min_cost() const override { return min_cost_; }
  int best_batch_size() const override;
  bool exploring() const override;
  std::vector<ArmView> arm_views() const override;
  const BatchSizePolicyConfig& config() const override { return config_; }

  // The pooled relative noise (standard deviation of log cost) the sampler uses now.
  double noise() const;
  // The best mean cost among the batch sizes that reached the target; nullopt before one.
  std::optional<double> best_mean_cost() const;
  const std::map<int, Candidate>& candidates() const { return candidates_; }
  const std::map<int, PendingTrial>& pending() const { return pending_; }
  int drifts_detected() const { return drifts_; }

  std::string save() const override;
  static LowRegretPolicy restore(const std::string& text);
  std::unique_ptr<BatchSizeSearch> clone() const override {
    return std::make_unique<LowRegretPolicy>(*this);
  }

 private:
  // The next batch size the walk probes, skipping those with a probe in flight; nullopt when no
  // direction has one.
  std::optional<int> walk_candidate() const;
  // What all batch sizes tell about each: the pooled noise and, with at least three of them,
  // the mean and spread of their mean log epochs, toward which each one's estimate is shrunk.
  struct Pool {
    double noise = 0.0;
    bool shrinks = false;
    double mean = 0.0;
    double spread = 0.0;
  };
  struct Belief {
    double log_cost = 0.0;  // posterior mean of the batch size's mean log cost
    double sd = 0.0;
  };
  Pool pool() const;
  // The batch size with the lowest estimated mean cost (min_cost's batch size, and no cost,
  // before any reached the target).
  struct Best {
    int batch_size = 0;
    std::optional<double> mean_cost;
  };
  Best best(const Pool& shared) const;
  // `drawing`: for a Thompson draw, where a batch size seen once gets a wider spread.
  Belief belief(const Candidate& candidate, const Pool& pool, bool drawing = false) const;
  double arm_noise(const Candidate& candidate, double pooled) const;
  bool probe_in_flight() const;
  // Whether a Thompson draw of a batch size other than `best` is in flight.
  bool mab_exploration_in_flight(int best) const;
  // The batch size whose cost is best established: the lowest posterior mean log cost plus one
  // posterior standard deviation (`fallback` before any reached the target).
  int established_best(const Pool& shared, int fallback) const;
  Decision dispatch(int batch_size, TrialKind kind, std::optional<double> threshold);
  int thompson_draw(const Pool& shared);
  void observe(int batch_size, double cost);
  // Drift detected by `y` at `source` (its `contribution` to the pooled noise), a surprise on
  // `side` after another: the batch sizes with a surprise on that side keep only their
  // surprises (post-drift evidence), the others one observation at their mean, moved by the
  // shift the surprises show when costs fell and left where it was when they rose (then pruned
  // batch sizes are probed again from the best).
  void reset_after_drift(int source, double y, double contribution, int side);

  BatchSizePolicyConfig config_;
  std::map<int, Candidate> candidates_;  // every batch size, ascending
  std::map<int, PendingTrial> pending_;  // trials in flight, by id (kMaxRunningTrials at most)
  int anchor_ = 0;                       // where the walk starts: b0, then the best after drift
  int next_trial_id_ = 1;
  std::optional<double> min_cost_;
  int min_cost_batch_size_ = 0;
  // The pooled noise: squared deviations of log cost from each batch size's running mean, and
  // their degrees of freedom, over every observation (kept through drift resets).
  double noise_ss_ = 0.0;
  double noise_dof_ = 0.0;
  int drifts_ = 0;
  int last_surprise_side_ = 0;  // the latest observation's surprise (+1/-1), 0 none
  Rng rng_;
};

}  // namespace zeus::optimizer
