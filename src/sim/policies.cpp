// The policies the simulator compares (Zeus and low-regret through the production
// BatchSizeSearch and ZeusCostSelector; Default; Grid; Oracle) and one training run charged from
// the trace.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "engine.hpp"
#include "limits.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/optimizer/rng.hpp"

namespace zeus::sim::detail {

using optimizer::zeus_cost;

const PowerPoint& point_at(const BatchSizeTrace& batch, int power_limit_w) {
  const PowerPoint* point = batch.at_power_limit(power_limit_w);
  if (point == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "batch size " + std::to_string(batch.batch_size) +
                                                 " has no power trace at " +
                                                 std::to_string(power_limit_w) + " W");
  }
  return *point;
}

namespace {

// What JIT profiling finds for a batch size: the production selector over one epoch at each
// power limit, in profiling order (highest limit first, so that ties keep the higher one).
int jit_power_limit(const BatchSizeTrace& batch, double eta, double max_power_w) {
  std::vector<optimizer::PowerLimitMeasurement> measurements;
  measurements.reserve(batch.power.size());
  for (auto it = batch.power.rbegin(); it != batch.power.rend(); ++it) {
    measurements.push_back({it->power_limit_w, it->energy_per_epoch_j(), it->time_per_epoch_s});
  }
  return optimizer::ZeusCostSelector::with_max_power(eta, max_power_w).select(measurements);
}

int max_power_limit(const BatchSizeTrace& batch) {
  return batch.power.back().power_limit_w;
}

// Runs one training job: samples a run (seed) of the batch size and charges its epochs, stopping
// early at the cost threshold (predictively: the number of epochs it allows).
}  // namespace

Outcome run_once(const WorkloadTrace& trace, const BatchSizeTrace& batch, const Choice& choice,
                 std::optional<double> threshold, double eta, optimizer::Rng& rng,
                 double runtime_ratio) {
  const PowerPoint& point = point_at(batch, choice.power_limit_w);
  const std::optional<int> target_epoch =
      batch.target_epochs[static_cast<std::size_t>(rng.below(batch.target_epochs.size()))];
  const double epoch_energy_j = point.energy_per_epoch_j() * runtime_ratio;
  const double epoch_time_s = point.time_per_epoch_s * runtime_ratio;
  double first_energy_j = epoch_energy_j;
  double first_time_s = epoch_time_s;
  if (choice.profile) {
    // The first epoch is spent profiling: charged as the mean over every power limit.
    first_energy_j = 0.0;
    first_time_s = 0.0;
    for (const PowerPoint& each : batch.power) {
      first_energy_j += each.energy_per_epoch_j();
      first_time_s += each.time_per_epoch_s;
    }
    first_energy_j *= runtime_ratio / static_cast<double>(batch.power.size());
    first_time_s *= runtime_ratio / static_cast<double>(batch.power.size());
  }
  int allowed_epochs = trace.workload.max_epochs;
  const double cost_per_epoch = zeus_cost(epoch_energy_j, epoch_time_s, eta, trace.max_power_w);
  if (threshold) {
    // Converted only once known to lie in [0, allowed_epochs]: a threshold far below the cost
    // gives -inf, which no int holds. NaN (an undefined ratio) leaves the epochs unbounded.
    const double fitting_epochs = std::floor(*threshold / cost_per_epoch);
    if (fitting_epochs < allowed_epochs) {
      allowed_epochs = fitting_epochs < 0.0 ? 0 : static_cast<int>(fitting_epochs);
    }
  }
  Outcome outcome;
  outcome.epoch_cost = cost_per_epoch;
  if (allowed_epochs <= 0) {
    outcome.never_ran = true;
    return outcome;
  }
  outcome.reached = target_epoch.has_value() && *target_epoch <= allowed_epochs;
  const int epochs = outcome.reached ? *target_epoch : allowed_epochs;
  outcome.epochs = epochs;
  outcome.energy_j = first_energy_j + (epochs - 1) * epoch_energy_j;
  outcome.time_s = first_time_s + (epochs - 1) * epoch_time_s;
  outcome.cost = zeus_cost(outcome.energy_j, outcome.time_s, eta, trace.max_power_w);
  return outcome;
}

namespace {

// Zeus and low-regret: the production batch-size policy core (optimizer::BatchSizeSearch, which
// decides early stopping and what a stopped run costs), with JIT power-limit profiling of each
// batch size's first run.
class SearchPolicy final : public Policy {
 public:
  SearchPolicy(const WorkloadTrace& trace, const SimulationConfig& config, std::string_view name)
      : trace_(trace),
        config_(config),
        bso_(optimizer::make_batch_size_search(name, make_config(trace, config))) {}

  Choice decide() override {
    const optimizer::Decision decision = bso_->next();
    Choice choice{decision.trial_id, decision.batch_size, 0, false};
    const auto known = power_limits_.find(decision.batch_size);
    if (known != power_limits_.end()) {
      choice.power_limit_w = known->second;
    } else {
      choice.power_limit_w = jit_power_limit(trace_.at_batch_size(decision.batch_size), config_.eta,
                                             trace_.max_power_w);
      power_limits_[decision.batch_size] = choice.power_limit_w;
      choice.profile = true;
    }
    return choice;
  }

  std::optional<double> threshold(const Choice& choice) const override {
    return bso_->cost_threshold(choice.trial_id);
  }

  void report(const Choice& choice, const Outcome& outcome) override {
    if (outcome.never_ran) {
      // Not even one epoch fits under the threshold: the policy says what that costs.
      bso_->report(choice.trial_id,
                   {bso_->unstarted_trial_cost(choice.trial_id), false, 0, outcome.epoch_cost});
      return;
    }
    bso_->report(choice.trial_id,
                 {outcome.cost, outcome.reached, outcome.epochs, outcome.epoch_cost});
  }

 private:
  static optimizer::BatchSizePolicyConfig make_config(const WorkloadTrace& trace,
                                                      const SimulationConfig& config) {
    optimizer::BatchSizePolicyConfig bso;
    for (const BatchSizeTrace& batch : trace.batch_sizes) {
      bso.batch_sizes.push_back(batch.batch_size);
    }
    bso.default_batch_size = trace.workload.default_batch_size;
    bso.beta = config.beta > 0.0 ? std::optional<double>(config.beta) : std::nullopt;
    bso.pruning_rounds = config.pruning_rounds;
    bso.mab.prior_mean = config.prior_mean;
    bso.mab.prior_precision = config.prior_precision;
    bso.mab.num_explorations = config.num_explorations;
    bso.mab.window_size = config.window_size;
    bso.seed = config.seed * 0x9e3779b97f4a7c15ULL + 1;  // independent of the run sampling
    return bso;
  }

  const WorkloadTrace& trace_;
  SimulationConfig config_;
  std::unique_ptr<optimizer::BatchSizeSearch> bso_;
  std::map<int, int> power_limits_;  // chosen by JIT profiling, per batch size
};

class FixedPolicy final : public Policy {
 public:
  FixedPolicy(int batch_size, int power_limit_w)
      : batch_size_(batch_size), power_limit_w_(power_limit_w) {}
  Choice decide() override { return {0, batch_size_, power_limit_w_, false}; }
  void report(const Choice&, const Outcome&) override {}

 private:
  int batch_size_;
  int power_limit_w_;
};

// Every (batch size, power limit) once, then the best observed.
class GridPolicy final : public Policy {
 public:
  // Starts with b0 at the maximum power limit (the known-good configuration, which also gives the
  // early-stopping threshold), then every other configuration in order.
  GridPolicy(const WorkloadTrace& trace, double beta) : beta_(beta) {
    const BatchSizeTrace& b0 = trace.at_batch_size(trace.workload.default_batch_size);
    grid_.push_back({b0.batch_size, max_power_limit(b0)});
    for (const BatchSizeTrace& batch : trace.batch_sizes) {
      for (auto it = batch.power.rbegin(); it != batch.power.rend(); ++it) {
        if (grid_.front() != std::make_pair(batch.batch_size, it->power_limit_w)) {
          grid_.push_back({batch.batch_size, it->power_limit_w});
        }
      }
    }
  }
  Choice decide() override {
    if (next_ < grid_.size()) {
      return {static_cast<int>(next_++), grid_[next_ - 1].first, grid_[next_ - 1].second, false};
    }
    if (!best_) {
      throw Error(ErrorKind::kInvalidArgument,
                  "grid search tried every configuration and none reached the target");
    }
    return {-1, best_->first, best_->second, false};
  }
  // The same early stopping as Zeus, so that failing configurations cost a bounded amount.
  std::optional<double> threshold(const Choice& /*choice*/) const override {
    if (beta_ <= 0.0 || !best_) {
      return std::nullopt;
    }
    return beta_ * best_cost_;
  }
  void report(const Choice& choice, const Outcome& outcome) override {
    if (outcome.reached && outcome.cost < best_cost_) {
      best_cost_ = outcome.cost;
      if (choice.trial_id >= 0 || !best_) {
        best_ = std::make_pair(choice.batch_size, choice.power_limit_w);
      }
    }
  }

 private:
  double beta_;
  std::vector<std::pair<int, int>> grid_;
  std::size_t next_ = 0;
  std::optional<std::pair<int, int>> best_;
  double best_cost_ = std::numeric_limits<double>::infinity();
};

}  // namespace

std::unique_ptr<Policy> make_policy(const WorkloadTrace& trace, const PolicyKind& kind,
                                    const SimulationConfig& config) {
  if (kind.is_search()) {
    return std::make_unique<SearchPolicy>(trace, config, kind.name());
  }
  if (kind == PolicyKind::kDefault) {
    const BatchSizeTrace& batch = trace.at_batch_size(trace.workload.default_batch_size);
    return std::make_unique<FixedPolicy>(batch.batch_size, max_power_limit(batch));
  }
  if (kind == PolicyKind::kGrid) {
    return std::make_unique<GridPolicy>(trace, config.beta);
  }
  if (kind == PolicyKind::kOracle) {
    const Oracle oracle = compute_oracle(trace, config.eta);
    return std::make_unique<FixedPolicy>(oracle.batch_size, oracle.power_limit_w);
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown policy \"" + kind.name() + "\"");
}

int default_recurrences(const WorkloadTrace& trace, const SimulationConfig& config) {
  if (config.recurrences < 0) {
    throw Error(ErrorKind::kInvalidArgument, "the number of recurrences cannot be negative");
  }
  if (config.recurrences > limits::kMaxRecurrences) {
    throw Error(ErrorKind::kInvalidArgument,
                "the number of recurrences " + std::to_string(config.recurrences) +
                    " is above the limit of " + std::to_string(limits::kMaxRecurrences) +
                    " (each one is kept in the run's history)");
  }
  if (config.recurrences > 0) {
    return config.recurrences;
  }
  return 2 * static_cast<int>(trace.batch_sizes.size()) *
         static_cast<int>(trace.power_limits_w.size());
}

void check_config(const WorkloadTrace& trace, const SimulationConfig& config) {
  optimizer::check_eta(config.eta);
  if (config.max_tries < 1 || config.max_tries > limits::kMaxTries) {
    throw Error(ErrorKind::kInvalidArgument, "max_tries must be between 1 and " +
                                                 std::to_string(limits::kMaxTries) + ", not " +
                                                 std::to_string(config.max_tries));
  }
  if (config.window_size < 0 || config.window_size > limits::kMaxWindow) {
    throw Error(ErrorKind::kInvalidArgument,
                "window_size must be between 0 (every observation) "
                "and " +
                    std::to_string(limits::kMaxWindow) + ", not " +
                    std::to_string(config.window_size));
  }
  default_recurrences(trace, config);  // refuses a negative or too large count
  if (trace.batch_sizes.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "the trace of " + trace.workload.dataset + " on " +
                                                 trace.gpu + " has no batch size");
  }
  const BatchSizeTrace& b0 = trace.at_batch_size(trace.workload.default_batch_size);
  const bool reaches = std::any_of(b0.target_epochs.begin(), b0.target_epochs.end(),
                                   [&](auto e) { return e && *e <= trace.workload.max_epochs; });
  if (!reaches) {
    throw Error(ErrorKind::kInvalidArgument,
                "the default batch size " + std::to_string(b0.batch_size) + " of " +
                    trace.workload.dataset + " never reaches the target metric " +
                    std::to_string(trace.workload.target_metric) + " within " +
                    std::to_string(trace.workload.max_epochs) + " epochs on " + trace.gpu);
  }
}

optimizer::Rng run_rng(const SimulationConfig& config) {
  return optimizer::Rng(config.seed);
}

}  // namespace zeus::sim::detail
