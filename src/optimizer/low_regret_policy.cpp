#include "zeus/optimizer/low_regret_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "optimizer/policy_common.hpp"
#include "zeus/common/error.hpp"

namespace zeus::optimizer {

namespace {

// The walk goes on past a pruned batch size only while each step's per-epoch cost falls by at
// least 5%, and past one such batch size at most.
constexpr double kFalling = 0.95;
constexpr int kMaxSkips = 1;
// A concurrent run goes to the batch size with the lowest posterior mean log cost plus this many
// posterior standard deviations: one lucky first run does not draw every overlapping job.
constexpr double kConcurrentSd = 1.0;

// The walk ends a direction after kRisesToEnd converged steps in a row that each cost more than
// kDearer (in log cost, 5%) above the step before, per-epoch cost up too, or after one such step
// to more than kFarAbove (30%) above the cheapest mean cost. One rise alone is not enough near
// the best: costs are not monotone along the walk (squad/v100: 24 costs 7% more than 32, 16
// and 12 less).
const double kDearer = std::log(1.05);
constexpr int kRisesToEnd = 2;
const double kFarAbove = std::log(1.3);
// A dearer step (as above) whose per-epoch cost rose by more than kSteep (15%) ends its direction
// at once when it is the first step from the anchor, or when its runs took no fewer epochs than
// the step before: the epochs did not fall to pay for the dearer epochs, and further on the
// per-epoch cost rises again (movielens-1m: from b0 = 1024, 512's epochs cost 1.7x as much).
constexpr double kSteep = 1.15;
// The walk does not go to the side of the anchor away from the cheapest batch size once the
// anchor costs this much more (in log cost, 25%) than it.
const double kFarSide = std::log(1.25);

// A Thompson draw of a batch size seen once spreads at least this share of the log step from
// its run's epochs E down to E - 1 (librispeech at 50: 32 needs 2 or 3 epochs, 48-96 exactly 3;
// one 3-epoch first run of 32 made it look 11% dearer than they, with a pooled noise of a few
// per cent). Only in the draw: the batch size that overlapping jobs run (established_best) and
// the best mean cost are unchanged, and a second run replaces the floor with evidence.
constexpr double kWholeEpochShare = 0.3;

// A Thompson draw made while other trials are in flight uses this share of the posterior spread:
// their results are not in yet, so a lucky draw of a batch size seen a few times is not checked
// before the next overlapping jobs choose (squad/a40 with irregular overlapping arrivals: 24,
// 48 and 8, 4-5% dearer than b0 = 32, drawn again and again after lucky 4-epoch runs). A tenth:
// such draws all but exploit, and the draws between sequential recurrences explore. Half the
// spread left squad/a40 at 1.40x the paper policy's regret with 8 jobs overlapping (seeds
// 51-150). Sequential recurrences never have a trial in flight when they draw and are unchanged.
constexpr double kOverlapDrawShare = 0.1;

// A batch size's mean log cost as observed (no shrinkage, no log-normal tail).
double mean_log_cost(const LowRegretPolicy::Candidate& candidate) {
  return candidate.log_scale + candidate.mean;
}

}  // namespace

LowRegretPolicy::LowRegretPolicy(BatchSizePolicyConfig config)
    : config_(std::move(config)), rng_(config_.seed) {
  check_common_config(config_);
  const LowRegretConfig& lr = config_.low_regret;
  if (!(lr.probe_cap >= 1.0) || !std::isfinite(lr.probe_cap)) {
    throw Error(ErrorKind::kInvalidArgument, "probe_cap must be a number of at least 1");
  }
  if (!(lr.noise_prior > 0.0) || !std::isfinite(lr.noise_prior)) {
    throw Error(ErrorKind::kInvalidArgument, "noise_prior must be a positive number");
  }
  if (!(lr.noise_prior_weight >= 0.0) || !std::isfinite(lr.noise_prior_weight)) {
    throw Error(ErrorKind::kInvalidArgument, "noise_prior_weight must be 0 or more");
  }
  if (!(lr.drift_z >= 0.0) || !std::isfinite(lr.drift_z)) {
    throw Error(ErrorKind::kInvalidArgument, "drift_z must be 0 (off) or positive");
  }
  if (!(lr.shrinkage_floor > 0.0) || !std::isfinite(lr.shrinkage_floor)) {
    throw Error(ErrorKind::kInvalidArgument, "shrinkage_floor must be a positive number");
  }
  if (!(lr.arm_noise_weight >= 0.0) || !std::isfinite(lr.arm_noise_weight)) {
    throw Error(ErrorKind::kInvalidArgument, "arm_noise_weight must be 0 or more");
  }
  for (const int batch_size : config_.batch_sizes) {
    candidates_[batch_size];
  }
  anchor_ = config_.default_batch_size;
  min_cost_batch_size_ = config_.default_batch_size;
}

// ---- What the policy believes ----

double LowRegretPolicy::noise() const {
  const LowRegretConfig& lr = config_.low_regret;
  const double weight = lr.noise_prior_weight;
  const double dof = weight + noise_dof_;
  if (dof <= 0.0) {
    return lr.noise_prior;
  }
  return std::sqrt((weight * lr.noise_prior * lr.noise_prior + noise_ss_) / dof);
}

LowRegretPolicy::Pool LowRegretPolicy::pool() const {
  Pool pool;
  pool.noise = noise();
  // Shrinkage needs every arm's observations on the same footing (epochs, not costs) and enough
  // arms to estimate how much the batch sizes' mean epochs differ.
  std::vector<const Candidate*> arms;
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status == Status::kArm && candidate.count > 0) {
      if (!candidate.scaled) {
        return pool;
      }
      arms.push_back(&candidate);
    }
  }
  if (arms.size() < 3) {
    return pool;
  }
  double sum = 0.0;
  double sampling = 0.0;
  for (const Candidate* arm : arms) {
    sum += arm->mean;
    const double arm_sd = arm_noise(*arm, pool.noise);
    sampling += arm_sd * arm_sd / static_cast<double>(arm->count);
  }
  const double n = static_cast<double>(arms.size());
  pool.mean = sum / n;
  double between = 0.0;
  for (const Candidate* arm : arms) {
    between += (arm->mean - pool.mean) * (arm->mean - pool.mean);
  }
  between /= n - 1.0;
  const double floor = config_.low_regret.shrinkage_floor;
  pool.spread = std::sqrt(std::max(between - sampling / n, floor * floor));
  pool.shrinks = true;
  return pool;
}

double LowRegretPolicy::arm_noise(const Candidate& candidate, double pooled) const {
  // The pooled spread is the prior for each batch size's own: a batch size whose epochs vary
  // more than the others' (its runs straddle two epoch counts) gets the wider spread it shows.
  const double weight = config_.low_regret.arm_noise_weight;
  const double dof = weight + std::max<double>(0.0, static_cast<double>(candidate.count) - 1.0);
  return dof <= 0.0 ? pooled : std::sqrt((weight * pooled * pooled + candidate.m2) / dof);
}

LowRegretPolicy::Belief LowRegretPolicy::belief(const Candidate& candidate, const Pool& pool,
                                                bool drawing) const {
  const double noise = arm_noise(candidate, pool.noise);
  double spread = noise;
  if (drawing && candidate.count == 1 && candidate.scaled) {
    // One run's whole number of epochs E (its mean log epochs, see observe()) does not tell
    // whether the batch size needs E every time or straddles E - 1 and E: a Thompson draw
    // allows a share of that step, so that one unlucky run does not hide the best for good.
    const double epochs = std::exp(candidate.mean);
    if (epochs >= 1.5) {
      spread = std::max(spread, kWholeEpochShare * std::log(epochs / (epochs - 1.0)));
    }
  }
  const double data_precision = static_cast<double>(candidate.count) / (spread * spread);
  double precision = data_precision;
  double weighted = data_precision * candidate.mean;
  if (pool.shrinks) {
    const double prior_precision = 1.0 / (pool.spread * pool.spread);
    precision += prior_precision;
    weighted += prior_precision * pool.mean;
  }
  // The mean of a log-normal cost is exp(mu + sigma^2 / 2): a batch size whose runs spread more
  // costs more on average at the same median.
  const double tail = 0.5 * noise * noise;
  return {candidate.log_scale + weighted / precision + tail, 1.0 / std::sqrt(precision)};
}

LowRegretPolicy::Best LowRegretPolicy::best(const Pool& shared) const {
  Best found{min_cost_batch_size_, std::nullopt};
  double lowest_log_cost = std::numeric_limits<double>::infinity();
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status == Status::kArm && candidate.count > 0) {
      const double log_cost = belief(candidate, shared).log_cost;
      if (log_cost < lowest_log_cost) {
        lowest_log_cost = log_cost;
        found = {batch_size, std::exp(log_cost)};
      }
    }
  }
  return found;
}

std::optional<double> LowRegretPolicy::best_mean_cost() const {
  return best(pool()).mean_cost;
}

int LowRegretPolicy::best_batch_size() const {
  return best(pool()).batch_size;
}

bool LowRegretPolicy::probe_in_flight() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const auto& entry) {
    return entry.second.kind == TrialKind::kExploration;
  });
}

int LowRegretPolicy::established_best(const Pool& shared, int fallback) const {
  int found = fallback;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status == Status::kArm && candidate.count > 0) {
      const Belief b = belief(candidate, shared);
      const double bound = b.log_cost + kConcurrentSd * b.sd;
      if (bound < lowest) {
        lowest = bound;
        found = batch_size;
      }
    }
  }
  return found;
}

bool LowRegretPolicy::mab_exploration_in_flight(int best) const {
  return std::any_of(pending_.begin(), pending_.end(), [&](const auto& entry) {
    return entry.second.kind == TrialKind::kMab && entry.second.batch_size != best;
  });
}

bool LowRegretPolicy::exploring() const {
  return probe_in_flight() || walk_candidate().has_value();
}

std::vector<ArmView> LowRegretPolicy::arm_views() const {
  std::vector<ArmView> views;
  const Pool shared = pool();
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status == Status::kArm && candidate.count > 0) {
      views.push_back({batch_size, candidate.count, std::exp(belief(candidate, shared).log_cost)});
    }
  }
  return views;
}

std::optional<double> LowRegretPolicy::cost_threshold(int trial_id) const {
  const auto found = pending_.find(trial_id);
  if (found == pending_.end()) {
    return std::nullopt;
  }
  return found->second.threshold;
}

double LowRegretPolicy::unstarted_trial_cost(int trial_id) const {
  return cost_threshold(trial_id).value_or(prohibitive_cost(config_, min_cost_));
}

// ---- Deciding ----

std::optional<int> LowRegretPolicy::walk_candidate() const {
  const auto in_flight = [&](int batch_size) {
    return std::any_of(pending_.begin(), pending_.end(), [&](const auto& entry) {
      return entry.second.kind == TrialKind::kExploration && entry.second.batch_size == batch_size;
    });
  };
  const auto anchor = candidates_.find(anchor_);
  // The anchor first: b0 at the start, and a probe that crashed.
  if (anchor->second.status == Status::kUntried) {
    if (in_flight(anchor_)) {
      return std::nullopt;  // every other step depends on its result
    }
    return anchor_;
  }
  // Then down, then up: the first batch size not known yet. A direction ends at a pruned batch
  // size, unless its per-epoch cost is still falling (a probe that failed by the noise of its
  // epochs, where a cheaper epoch further on may still win). It also ends where the converged
  // batch sizes along it got dearer (mean cost and per-epoch
  // cost both up) twice in a row, or once to far above the cheapest, or once with the per-epoch
  // cost up steeply and no fewer epochs to pay for it: cost against batch size is taken as
  // unimodal, and a climbing side is not walked further.
  double lowest = std::numeric_limits<double>::infinity();
  int cheapest = anchor_;
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status == Status::kArm && candidate.count > 0 &&
        mean_log_cost(candidate) < lowest) {
      lowest = mean_log_cost(candidate);
      cheapest = batch_size;
    }
  }
  const auto step = [&](auto begin, auto end) -> std::optional<int> {
    double previous_epoch_cost = anchor->second.epoch_cost;
    const Candidate* previous_arm = anchor->second.count > 0 ? &anchor->second : nullptr;
    int rises = 0;  // consecutive dearer steps
    int skipped = 0;
    for (auto it = begin; it != end; ++it) {
      const Candidate& here = it->second;
      if (here.status == Status::kArm && here.count > 0) {
        if (previous_arm != nullptr) {
          // Dearer than the step before in both factors: the cost is climbing on this side.
          const bool dearer = mean_log_cost(here) > mean_log_cost(*previous_arm) + kDearer &&
                              here.epoch_cost > previous_arm->epoch_cost;
          rises = dearer ? rises + 1 : 0;
          // here.mean is its mean log(epochs) when both are scaled (see observe()).
          const bool steep =
              dearer && here.epoch_cost > kSteep * previous_arm->epoch_cost &&
              (previous_arm == &anchor->second ||
               (here.scaled && previous_arm->scaled && here.mean >= previous_arm->mean));
          if (steep || rises >= kRisesToEnd ||
              (rises > 0 && mean_log_cost(here) > lowest + kFarAbove)) {
            return std::nullopt;
          }
        }
        previous_arm = &here;
      }
      if (it->second.status == Status::kPruned) {
        const double epoch_cost = it->second.epoch_cost;
        const bool falling = epoch_cost > 0.0 && previous_epoch_cost > 0.0 &&
                             epoch_cost < kFalling * previous_epoch_cost;
        if (!falling || ++skipped > kMaxSkips) {
          return std::nullopt;
        }
        previous_epoch_cost = epoch_cost;
        continue;
      }
      skipped = 0;
      previous_epoch_cost = it->second.epoch_cost;
      if (it->second.status == Status::kUntried) {
        if (in_flight(it->first)) {
          return std::nullopt;  // this direction waits for that probe
        }
        return it->first;
      }
    }
    return std::nullopt;
  };
  // Unimodal too: when the cheapest batch size lies on one side of the anchor and the anchor
  // costs more than kFarSide above it, no batch size on the other side can be the best.
  const bool anchor_far = anchor->second.status == Status::kArm && anchor->second.count > 0 &&
                          mean_log_cost(anchor->second) > lowest + kFarSide;
  if (!(anchor_far && cheapest > anchor_)) {
    if (const auto down = step(std::make_reverse_iterator(anchor), candidates_.rend())) {
      return down;
    }
  }
  if (anchor_far && cheapest < anchor_) {
    return std::nullopt;
  }
  return step(std::next(anchor), candidates_.end());
}

Decision LowRegretPolicy::dispatch(int batch_size, TrialKind kind,
                                   std::optional<double> threshold) {
  PendingTrial trial{next_trial_id_++, batch_size, kind, threshold};
  pending_.emplace(trial.id, trial);
  // Past the cap, the oldest trial in flight is taken as abandoned (its client crashed without
  // failing it): forgotten like a failed one.
  if (pending_.size() > static_cast<std::size_t>(kMaxRunningTrials)) {
    pending_.erase(pending_.begin());
  }
  return {trial.id, batch_size, kind};
}

int LowRegretPolicy::thompson_draw(const Pool& shared) {
  const double share = pending_.empty() ? 1.0 : kOverlapDrawShare;
  int chosen = 0;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& [batch_size, candidate] : candidates_) {
    if (candidate.status != Status::kArm || candidate.count == 0) {
      continue;
    }
    const Belief b = belief(candidate, shared, true);
    const double draw = rng_.normal(b.log_cost, share * b.sd);
    if (draw < lowest) {
      lowest = draw;
      chosen = batch_size;
    }
  }
  return chosen;
}

Decision LowRegretPolicy::next() {
  // One fit of the pooled model serves every choice below.
  const Pool shared = pool();
  const Best known = best(shared);
  const std::optional<double> best_cost = known.mean_cost;
  const std::optional<double> beta = config_.beta;
  if (const std::optional<int> probe = walk_candidate()) {
    // A first run is capped once something has reached the target (b0's first run is not).
    std::optional<double> cap;
    if (beta && best_cost) {
      cap = config_.low_regret.probe_cap * *best_cost;
    }
    return dispatch(*probe, TrialKind::kExploration, cap);
  }
  std::optional<double> threshold;
  if (beta && best_cost) {
    threshold = *beta * *best_cost;
  }
  if (probe_in_flight() || mab_exploration_in_flight(known.batch_size)) {
    // The walk waits for a probe's result, or a Thompson draw is trying a batch size other than
    // the best: overlapping jobs exploit what is known (the batch size whose cost is best
    // established) rather than explore in parallel, and learn from the result before exploring
    // again.
    return dispatch(established_best(shared, known.batch_size), TrialKind::kConcurrent, threshold);
  }
  if (!best_cost) {
    throw Error(ErrorKind::kInvalidArgument,
                "no batch size reached the target metric during exploration; check the target "
                "metric, max epochs and candidate batch sizes");
  }
  return dispatch(thompson_draw(shared), TrialKind::kMab, threshold);
}

}  // namespace zeus::optimizer
