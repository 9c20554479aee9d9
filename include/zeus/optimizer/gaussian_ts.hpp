// Gaussian Thompson Sampling over batch sizes, with each arm's reward precision learned from its
// observations and an optional window of the most recent observations (for drift).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "zeus/optimizer/rng.hpp"

namespace zeus::optimizer {

struct GaussianTsConfig {
  double prior_mean = 0.0;
  double prior_precision = 0.0;  // 0: uninformative
  int num_explorations = 2;      // arms with fewer observations are tried first
  int window_size = 0;           // keep the last N observations per arm; 0 keeps all
};

struct ArmState {
  double param_mean = 0.0;
  double param_precision = 0.0;  // may be +infinity (all observations equal)
  double reward_precision = 0.0;
  // The observations the fit uses: with a window, the window itself; without one, running
  // statistics over all of them (Welford), so that an arm's state stays the same size however
  // long the job recurs.
  std::deque<double> rewards;  // window_size > 0 only
  std::int64_t observations = 0;
  double reward_mean = 0.0;  // window_size == 0 only
  double reward_m2 = 0.0;    // sum of squared deviations from reward_mean
};

class GaussianTs {
 public:
  // `initial_rewards[b]` are the observations the arm starts with (e.g. from pruning).
  GaussianTs(GaussianTsConfig config, const std::map<int, std::vector<double>>& initial_rewards);

  // Adds an observation to `arm` (must exist) and refits it from the priors over its window.
  void observe(int arm, double reward);
  // The arm to run next: an under-explored arm in random order, else the Thompson draw's argmax.
  int predict(Rng& rng) const;

  const std::map<int, ArmState>& arms() const { return arms_; }
  const GaussianTsConfig& config() const { return config_; }
  // Restores saved arms as they were.
  void set_arms(std::map<int, ArmState> arms) { arms_ = std::move(arms); }

 private:
  void refit(ArmState& arm) const;
  void add(ArmState& arm, double reward) const;

  GaussianTsConfig config_;
  std::map<int, ArmState> arms_;  // by batch size, ascending
};

}  // namespace zeus::optimizer
