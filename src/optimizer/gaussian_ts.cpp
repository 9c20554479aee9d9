#include "zeus/optimizer/gaussian_ts.hpp"

#include <cmath>
#include <limits>

#include "zeus/common/error.hpp"

namespace zeus::optimizer {

GaussianTs::GaussianTs(GaussianTsConfig config,
                       const std::map<int, std::vector<double>>& initial_rewards)
    : config_(config) {
  if (initial_rewards.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "Thompson Sampling needs at least one arm");
  }
  for (const auto& [arm, rewards] : initial_rewards) {
    ArmState& state = arms_[arm];
    for (const double reward : rewards) {
      add(state, reward);
    }
    refit(state);
  }
}

void GaussianTs::add(ArmState& arm, double reward) const {
  if (config_.window_size > 0) {
    arm.rewards.push_back(reward);
    if (arm.rewards.size() > static_cast<std::size_t>(config_.window_size)) {
      arm.rewards.pop_front();
    }
    arm.observations = static_cast<std::int64_t>(arm.rewards.size());
    return;
  }
  ++arm.observations;
  const double delta = reward - arm.reward_mean;
  arm.reward_mean += delta / static_cast<double>(arm.observations);
  arm.reward_m2 += delta * (reward - arm.reward_mean);
}

void GaussianTs::refit(ArmState& arm) const {
  const double count = static_cast<double>(arm.observations);
  if (arm.observations == 0) {
    arm.param_mean = config_.prior_mean;
    arm.param_precision = config_.prior_precision;
    arm.reward_precision = 0.0;
    return;
  }
  double sum = 0.0;
  double mean = 0.0;
  double squares = 0.0;
  if (config_.window_size > 0) {
    for (const double reward : arm.rewards) {
      sum += reward;
    }
    mean = sum / count;
    for (const double reward : arm.rewards) {
      squares += (reward - mean) * (reward - mean);
    }
  } else {
    mean = arm.reward_mean;
    sum = mean * count;
    squares = arm.reward_m2;
  }
  const double variance = squares / count;  // population variance
  if (variance == 0.0) {
    // Every observation agrees: the arm is known exactly.
    arm.reward_precision = std::numeric_limits<double>::infinity();
    arm.param_precision = std::numeric_limits<double>::infinity();
    arm.param_mean = mean;
    return;
  }
  arm.reward_precision = 1.0 / variance;
  arm.param_precision = config_.prior_precision + count * arm.reward_precision;
  arm.param_mean = (config_.prior_precision * config_.prior_mean + arm.reward_precision * sum) /
                   arm.param_precision;
}

void GaussianTs::observe(int arm, double reward) {
  const auto found = arms_.find(arm);
  if (found == arms_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "batch size " + std::to_string(arm) + " is not an arm of the bandit");
  }
  ArmState& state = found->second;
  add(state, reward);
  refit(state);
}

int GaussianTs::predict(Rng& rng) const {
  std::vector<int> keys;
  for (const auto& entry : arms_) {
    keys.push_back(entry.first);
  }
  // Under-explored arms first, in a random order (the permutation is drawn every time).
  for (const std::size_t index : rng.permutation(keys.size())) {
    if (arms_.at(keys[index]).observations < config_.num_explorations) {
      return keys[index];
    }
  }
  int best_arm = keys.front();
  double best_draw = -std::numeric_limits<double>::infinity();
  for (const auto& [arm, state] : arms_) {
    double draw = state.param_mean;
    if (!std::isinf(state.param_precision)) {
      const double stddev = state.param_precision > 0.0 ? std::sqrt(1.0 / state.param_precision)
                                                        : std::numeric_limits<double>::infinity();
      draw =
          std::isinf(stddev) ? rng.normal(0.0, 1.0) * 1e300 : rng.normal(state.param_mean, stddev);
    }
    if (draw > best_draw) {
      best_draw = draw;
      best_arm = arm;
    }
  }
  return best_arm;
}

}  // namespace zeus::optimizer
