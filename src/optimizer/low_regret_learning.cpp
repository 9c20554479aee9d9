// The low-regret policy's learning: what each report and observation changes, and the reset
// after a detected drift (docs/simulator.md, "The low-regret policy", items 2 and 4).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "optimizer/policy_common.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace zeus::optimizer {

namespace {

// A surprise at one batch size right after one at another is drift only when both are this far
// (in log cost, about 1.5x) from what their batch sizes predict: one epoch more or less of a
// short run (4 or 5 epochs) is not.
const double kLargeSurprise = std::log(1.5);

}  // namespace

// ---- Learning ----

void LowRegretPolicy::observe(int batch_size, double cost) {
  Candidate& candidate = candidates_.at(batch_size);
  // In logs, the noise is relative; over the per-epoch cost, what is left is the epochs. A zero
  // cost (a run that did nothing) is floored.
  if (candidate.count == 0 && candidate.window.empty()) {
    candidate.scaled = candidate.epoch_cost > 0.0;
    candidate.log_scale = candidate.scaled ? std::log(candidate.epoch_cost) : 0.0;
    candidate.scale_count = 0;
  }
  // The per-epoch cost of this run (a job's own runtime ratio, measurement noise) is taken out
  // of the observation and averaged into the batch size's scale, so that it does not count as
  // noise in the epochs.
  double run_scale = candidate.log_scale;
  if (candidate.scaled && candidate.epoch_cost > 0.0) {
    run_scale = std::log(candidate.epoch_cost);
    if (std::abs(run_scale - candidate.log_scale) > kLargeSurprise) {
      candidate.scale_count = 0;  // the per-epoch cost moved (drift): its average starts again
    }
    ++candidate.scale_count;
    candidate.log_scale +=
        (run_scale - candidate.log_scale) / static_cast<double>(candidate.scale_count);
  }
  const double y = std::log(std::max(cost, std::numeric_limits<double>::min())) - run_scale;
  int surprise = 0;    // +1/-1: y is far above/below what this batch size predicts
  bool large = false;  // and by more than a few epochs' rounding could explain
  double contribution = 0.0;
  if (candidate.count > 0) {
    const double k = static_cast<double>(candidate.count);
    const double deviation = y - candidate.mean;
    contribution = k / (k + 1.0) * deviation * deviation;
    const double z_threshold = config_.low_regret.drift_z;
    if (z_threshold > 0.0) {
      const double predictive = arm_noise(candidate, noise()) * std::sqrt(1.0 + 1.0 / k);
      if (std::abs(deviation) > z_threshold * predictive) {
        surprise = deviation > 0.0 ? 1 : -1;
        large = std::abs(deviation) > kLargeSurprise;
      }
    }
    noise_ss_ += contribution;
    noise_dof_ += 1.0;
  }
  // Drift: a second surprise on the same side, at this batch size, or a large one right after a
  // large one at another (costs that move together move every batch size the policy runs).
  if (surprise != 0 &&
      (candidate.surprise_side == surprise || (large && last_surprise_side_ == surprise))) {
    reset_after_drift(batch_size, y, contribution, surprise);
    return;
  }
  last_surprise_side_ = large ? surprise : 0;
  candidate.surprise_side = surprise;
  if (surprise != 0) {
    candidate.surprise_y = y;
    candidate.surprise_mean = candidate.mean;
    candidate.surprise_ss = contribution;
  }
  const int window = config_.mab.window_size;
  if (window > 0) {
    candidate.window.push_back(y);
    if (candidate.window.size() > static_cast<std::size_t>(window)) {
      candidate.window.pop_front();
    }
    candidate.count = static_cast<std::int64_t>(candidate.window.size());
    double sum = 0.0;
    for (const double each : candidate.window) {
      sum += each;
    }
    candidate.mean = sum / static_cast<double>(candidate.count);
    candidate.m2 = 0.0;
    for (const double each : candidate.window) {
      candidate.m2 += (each - candidate.mean) * (each - candidate.mean);
    }
  } else {
    ++candidate.count;
    const double delta = y - candidate.mean;
    candidate.mean += delta / static_cast<double>(candidate.count);
    candidate.m2 += delta * (y - candidate.mean);
  }
}

void LowRegretPolicy::reset_after_drift(int source, double y, double contribution, int side) {
  ++drifts_;
  last_surprise_side_ = 0;
  const bool windowed = config_.mab.window_size > 0;
  const auto assign = [&](Candidate& candidate, const std::vector<double>& ys) {
    candidate.count = static_cast<std::int64_t>(ys.size());
    double sum = 0.0;
    for (const double each : ys) {
      sum += each;
    }
    candidate.mean = sum / static_cast<double>(ys.size());
    candidate.m2 = 0.0;
    for (const double each : ys) {
      candidate.m2 += (each - candidate.mean) * (each - candidate.mean);
    }
    candidate.window.clear();
    if (windowed) {
      candidate.window.assign(ys.begin(), ys.end());
    }
  };
  // The post-drift evidence: each batch size's pending surprise on this side, and y at the
  // source. The surprises leave the pooled noise (they are drift, not noise), and the batch
  // sizes that have them keep only them; how far they moved is the drift's shift.
  double removed_ss = contribution;
  double removed_dof = 1.0;
  double shift_sum = 0.0;
  int shifted = 0;
  std::vector<int> fresh;
  for (auto& [batch_size, candidate] : candidates_) {
    std::vector<double> post;
    double pre_drift_mean = candidate.mean;
    if (candidate.surprise_side == side) {
      post.push_back(candidate.surprise_y);
      pre_drift_mean = candidate.surprise_mean;
      removed_ss += candidate.surprise_ss;
      removed_dof += 1.0;
    }
    if (batch_size == source) {
      post.push_back(y);
    }
    candidate.surprise_side = 0;
    if (post.empty()) {
      continue;
    }
    assign(candidate, post);
    shift_sum += candidate.mean - pre_drift_mean;
    ++shifted;
    fresh.push_back(batch_size);
  }
  noise_ss_ = std::max(0.0, noise_ss_ - removed_ss);
  noise_dof_ = std::max(0.0, noise_dof_ - removed_dof);
  const double shift = shift_sum / static_cast<double>(shifted);
  for (auto& [batch_size, candidate] : candidates_) {
    if (std::find(fresh.begin(), fresh.end(), batch_size) != fresh.end()) {
      continue;
    }
    if (candidate.status == Status::kPruned && shift > 0.0) {
      candidate.status = Status::kUntried;  // costs rose: the walk may find it good now
    }
    if (candidate.count > 0) {
      // No post-drift evidence: one observation at its mean, moved as the drift moved the
      // others when costs fell (no staler than theirs), left where it was when they rose (so
      // that it is tried again).
      assign(candidate, {candidate.mean + std::min(shift, 0.0)});
    }
  }
  anchor_ = best_batch_size();
}

void LowRegretPolicy::report(int trial_id, const TrialResult& result) {
  check_trial_result(result);
  const auto found = pending_.find(trial_id);
  if (found == pending_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "unknown trial " + std::to_string(trial_id) +
                    (trial_id >= 1 && trial_id < next_trial_id_ ? " (it already finished)" : ""));
  }
  const PendingTrial trial = found->second;
  pending_.erase(found);
  Candidate& candidate = candidates_.at(trial.batch_size);
  if (result.epoch_cost > 0.0) {
    candidate.epoch_cost = result.epoch_cost;
  } else if (result.epochs > 0) {
    candidate.epoch_cost = result.cost / result.epochs;
  }
  // What a repeat of this run would cost: its epochs at the steady per-epoch cost. A first run
  // also paid for profiling power limits, which later runs of the batch size do not.
  double repeat_cost = result.cost;
  if (result.epochs > 0 && candidate.epoch_cost > 0.0) {
    repeat_cost = std::min(result.cost, result.epochs * candidate.epoch_cost);
  }
  if (result.converged) {
    if (!min_cost_ || result.cost < *min_cost_) {
      min_cost_ = result.cost;
      min_cost_batch_size_ = trial.batch_size;
    }
    candidate.status = Status::kArm;
    observe(trial.batch_size, repeat_cost);
    return;
  }
  if (candidate.status == Status::kArm) {
    // A bandit run stopped early: its cost is a lower bound of what that batch size costs, and
    // the evidence the arm needs to lose.
    // A stopped run also leaves the recurrence to be done again by another run: what choosing
    // this batch size cost is the stopped run plus about one run of the best.
    double charged = std::max(result.cost, trial.threshold.value_or(result.cost));
    charged += best_mean_cost().value_or(0.0);
    observe(trial.batch_size, charged);
    return;
  }
  if (trial.kind == TrialKind::kExploration) {
    candidate.status = Status::kPruned;
  }
}

void LowRegretPolicy::fail(int trial_id) {
  const auto found = pending_.find(trial_id);
  if (found == pending_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "unknown trial " + std::to_string(trial_id) +
                    (trial_id >= 1 && trial_id < next_trial_id_ ? " (it already finished)" : ""));
  }
  pending_.erase(found);  // a probe's batch size stays untried: the walk probes it again
}

}  // namespace zeus::optimizer
