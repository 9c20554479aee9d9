#include "zeus/optimizer/batch_size_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "optimizer/policy_common.hpp"
#include "zeus/common/error.hpp"

namespace zeus::optimizer {
using nlohmann::json;

BatchSizePolicy::BatchSizePolicy(BatchSizePolicyConfig config)
    : config_(std::move(config)), rng_(config_.seed) {
  check_common_config(config_);
  if (config_.pruning_rounds < 1) {
    throw Error(ErrorKind::kInvalidArgument, "pruning_rounds must be at least 1");
  }
  if (config_.mab.num_explorations < 0) {
    throw Error(ErrorKind::kInvalidArgument, "num_explorations must be 0 or more");
  }
  if (!(config_.mab.prior_precision >= 0.0)) {
    throw Error(ErrorKind::kInvalidArgument, "the prior precision must be 0 or positive");
  }
  min_cost_batch_size_ = config_.default_batch_size;
}

BatchSizePolicy::BatchSizePolicy(const BatchSizePolicy& other)
    : config_(other.config_),
      trials_(other.trials_),
      next_trial_id_(other.next_trial_id_),
      min_cost_(other.min_cost_),
      min_cost_batch_size_(other.min_cost_batch_size_),
      rng_(other.rng_),
      mab_(other.mab_ ? std::make_unique<GaussianTs>(*other.mab_) : nullptr) {}

BatchSizePolicy& BatchSizePolicy::operator=(const BatchSizePolicy& other) {
  if (this != &other) {
    BatchSizePolicy copy(other);
    *this = std::move(copy);
  }
  return *this;
}

BatchSizePolicy::Explore BatchSizePolicy::explore() const {
  // Completed or running explorations of each batch size, in trial order (failed ones are
  // forgotten, so those batch sizes are explored again).
  std::map<int, std::vector<const Trial*>> explorations;
  for (const auto& [id, trial] : trials_) {
    if (trial.kind == TrialKind::kExploration && trial.status != TrialStatus::kFailed) {
      explorations[trial.batch_size].push_back(&trial);
    }
  }
  std::vector<int> candidates = config_.batch_sizes;
  int start = config_.default_batch_size;
  for (int round = 0; round < config_.pruning_rounds; ++round) {
    std::vector<int> converged;
    double best_cost = std::numeric_limits<double>::infinity();
    int best_batch_size = start;
    const auto start_at = std::find(candidates.begin(), candidates.end(), start);
    std::vector<int> down(candidates.begin(), start_at + 1);
    std::reverse(down.begin(), down.end());
    std::vector<int> up(start_at + 1, candidates.end());
    for (const std::vector<int>* side : {&down, &up}) {
      for (const int batch_size : *side) {
        const auto& done = explorations[batch_size];
        if (done.size() <= static_cast<std::size_t>(round)) {
          return {Decision{0, batch_size, TrialKind::kExploration}, {}};
        }
        const Trial& trial = *done[static_cast<std::size_t>(round)];
        if (trial.status == TrialStatus::kDispatched) {
          // The order of pruning depends on this result: meanwhile, run the best known.
          return {Decision{0, min_cost_batch_size_, TrialKind::kConcurrent}, {}};
        }
        if (!trial.converged) {
          break;  // larger steps away from the start would do no better
        }
        converged.push_back(batch_size);
        if (trial.cost < best_cost) {
          best_cost = trial.cost;
          best_batch_size = batch_size;
        }
      }
    }
    if (converged.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "no batch size reached the target metric during pruning round " +
                      std::to_string(round + 1) +
                      "; check the target metric, max epochs and candidate batch sizes");
    }
    std::sort(converged.begin(), converged.end());
    candidates = converged;
    start = best_batch_size;
  }
  return {std::nullopt, candidates};
}

Decision BatchSizePolicy::dispatch(int batch_size, TrialKind kind) {
  Trial trial;
  trial.id = next_trial_id_++;
  trial.batch_size = batch_size;
  trial.kind = kind;
  trials_.emplace(trial.id, trial);
  // Past the cap, the oldest running trial is taken as abandoned (its client crashed without
  // failing it): forgotten like a failed one.
  std::size_t running = 0;
  for (const auto& entry : trials_) {
    running += entry.second.status == TrialStatus::kDispatched ? 1 : 0;
  }
  if (running > static_cast<std::size_t>(kMaxRunningTrials)) {
    for (auto it = trials_.begin(); it != trials_.end(); ++it) {
      if (it->second.status == TrialStatus::kDispatched) {
        trials_.erase(it);
        break;
      }
    }
  }
  return {trial.id, batch_size, kind};
}

Decision BatchSizePolicy::next() {
  forget_unneeded();  // a state saved by an earlier version may hold failed trials
  if (!mab_) {
    const Explore step = explore();
    if (step.decision) {
      return dispatch(step.decision->batch_size, step.decision->kind);
    }
    // Pruning is over: the survivors become the arms, with every exploration they had.
    std::map<int, std::vector<double>> rewards;
    for (const int batch_size : step.survivors) {
      rewards[batch_size];
    }
    for (const auto& [id, trial] : trials_) {
      if (trial.kind == TrialKind::kExploration && trial.status == TrialStatus::kSucceeded &&
          rewards.count(trial.batch_size) != 0) {
        rewards[trial.batch_size].push_back(-trial.cost);
      }
    }
    mab_ = std::make_unique<GaussianTs>(config_.mab, rewards);
    forget_unneeded();
  }
  return dispatch(mab_->predict(rng_), TrialKind::kMab);
}

void BatchSizePolicy::forget_unneeded() {
  const bool pruning = mab_ == nullptr;
  std::erase_if(trials_, [pruning](const auto& entry) {
    const Trial& trial = entry.second;
    if (trial.status == TrialStatus::kDispatched) {
      return false;
    }
    // Pruning reads finished explorations (explore() and the arms' first observations); it
    // skips failed ones, and a finished concurrent run counts only through min_cost.
    return !pruning || trial.status == TrialStatus::kFailed ||
           trial.kind != TrialKind::kExploration;
  });
}

bool BatchSizePolicy::running(int trial_id) const {
  const auto found = trials_.find(trial_id);
  return found != trials_.end() && found->second.status == TrialStatus::kDispatched;
}

Trial& BatchSizePolicy::find(int trial_id) {
  const auto found = trials_.find(trial_id);
  if (found == trials_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "unknown trial " + std::to_string(trial_id) +
                    (trial_id >= 1 && trial_id < next_trial_id_ ? " (it already finished)" : ""));
  }
  Trial& trial = found->second;
  if (trial.status != TrialStatus::kDispatched) {
    throw Error(ErrorKind::kInvalidArgument,
                "trial " + std::to_string(trial_id) + " was already " + status_name(trial.status));
  }
  return trial;
}

void BatchSizePolicy::report(int trial_id, const TrialResult& result) {
  check_trial_result(result);
  const double cost = result.cost;
  const bool converged = result.converged;
  Trial& trial = find(trial_id);
  trial.status = TrialStatus::kSucceeded;
  trial.cost = cost;
  trial.converged = converged;
  if (converged && (!min_cost_ || cost < *min_cost_)) {
    min_cost_ = cost;
    min_cost_batch_size_ = trial.batch_size;
  }
  // Once the bandit exists, every result for one of its arms is an observation, whatever kind of
  // trial produced it (a concurrent run dispatched during pruning included).
  if (mab_ && mab_->arms().count(trial.batch_size) != 0) {
    mab_->observe(trial.batch_size, -cost);
  }
  forget_unneeded();
}

void BatchSizePolicy::fail(int trial_id) {
  find(trial_id).status = TrialStatus::kFailed;
  forget_unneeded();
}

std::optional<double> BatchSizePolicy::cost_threshold() const {
  return shared_cost_threshold();
}

double BatchSizePolicy::unstarted_trial_cost(int /*trial_id*/) const {
  return prohibitive_cost(config_, min_cost_);
}

std::vector<ArmView> BatchSizePolicy::arm_views() const {
  std::vector<ArmView> views;
  if (mab_) {
    for (const auto& [batch_size, arm] : mab_->arms()) {
      views.push_back({batch_size, arm.observations, -arm.param_mean});
    }
  }
  return views;
}

std::string BatchSizePolicy::save() const {
  json out;
  out["policy"] = "zeus";
  out["version"] = 1;
  out["config"] = {{"batch_sizes", config_.batch_sizes},
                   {"default_batch_size", config_.default_batch_size},
                   {"beta", config_.beta ? json(*config_.beta) : json(nullptr)},
                   {"pruning_rounds", config_.pruning_rounds},
                   {"prior_mean", config_.mab.prior_mean},
                   {"prior_precision", config_.mab.prior_precision},
                   {"num_explorations", config_.mab.num_explorations},
                   {"window_size", config_.mab.window_size},
                   {"seed", config_.seed}};
  out["next_trial_id"] = next_trial_id_;
  out["trials"] = json::array();
  for (const auto& [id, trial] : trials_) {
    out["trials"].push_back({{"id", trial.id},
                             {"batch_size", trial.batch_size},
                             {"kind", kind_name(trial.kind)},
                             {"status", status_name(trial.status)},
                             {"cost", trial.cost},
                             {"converged", trial.converged}});
  }
  out["min_cost"] = min_cost_ ? json(*min_cost_) : json(nullptr);
  out["min_cost_batch_size"] = min_cost_batch_size_;
  out["rng"] = rng_.save();
  if (mab_) {
    json arms = json::array();
    for (const auto& [arm, state] : mab_->arms()) {
      arms.push_back({{"batch_size", arm},
                      {"param_mean", number_to_json(state.param_mean)},
                      {"param_precision", number_to_json(state.param_precision)},
                      {"reward_precision", number_to_json(state.reward_precision)},
                      {"rewards", std::vector<double>(state.rewards.begin(), state.rewards.end())},
                      {"observations", state.observations},
                      {"reward_mean", state.reward_mean},
                      {"reward_m2", state.reward_m2}});
    }
    out["arms"] = arms;
  } else {
    out["arms"] = nullptr;
  }
  return out.dump();
}

BatchSizePolicy BatchSizePolicy::restore(const std::string& text) {
  try {
    const json in = json::parse(text);
    const json& c = in.at("config");
    BatchSizePolicyConfig config;
    config.batch_sizes = c.at("batch_sizes").get<std::vector<int>>();
    config.default_batch_size = c.at("default_batch_size").get<int>();
    config.beta =
        c.at("beta").is_null() ? std::nullopt : std::optional<double>(c.at("beta").get<double>());
    config.pruning_rounds = c.at("pruning_rounds").get<int>();
    config.mab.prior_mean = c.at("prior_mean").get<double>();
    config.mab.prior_precision = c.at("prior_precision").get<double>();
    config.mab.num_explorations = c.at("num_explorations").get<int>();
    config.mab.window_size = c.at("window_size").get<int>();
    config.seed = c.at("seed").get<std::uint64_t>();
    BatchSizePolicy policy(config);
    for (const json& t : in.at("trials")) {
      Trial trial;
      trial.id = t.at("id").get<int>();
      trial.batch_size = t.at("batch_size").get<int>();
      trial.kind = parse_kind(t.at("kind").get<std::string>());
      trial.status = parse_status(t.at("status").get<std::string>());
      trial.cost = t.at("cost").get<double>();
      trial.converged = t.at("converged").get<bool>();
      if (trial.id < 1 || (!policy.trials_.empty() && trial.id <= policy.trials_.rbegin()->first)) {
        throw Error(ErrorKind::kInvalidArgument, "trial ids must be positive and increasing");
      }
      policy.trials_.emplace(trial.id, trial);
    }
    policy.next_trial_id_ = in.contains("next_trial_id")
                                ? in.at("next_trial_id").get<int>()
                                : (policy.trials_.empty() ? 1 : policy.trials_.rbegin()->first + 1);
    if (!policy.trials_.empty() && policy.next_trial_id_ <= policy.trials_.rbegin()->first) {
      throw Error(ErrorKind::kInvalidArgument, "next_trial_id must follow the last trial's id");
    }
    if (!in.at("min_cost").is_null()) {
      policy.min_cost_ = in.at("min_cost").get<double>();
    }
    policy.min_cost_batch_size_ = in.at("min_cost_batch_size").get<int>();
    policy.rng_ = Rng::restore(in.at("rng").get<std::string>());
    if (!in.at("arms").is_null()) {
      std::map<int, ArmState> arms;
      std::map<int, std::vector<double>> empty;
      for (const json& a : in.at("arms")) {
        ArmState state;
        state.param_mean = number_from_json(a.at("param_mean"));
        state.param_precision = number_from_json(a.at("param_precision"));
        state.reward_precision = number_from_json(a.at("reward_precision"));
        for (const double reward : a.at("rewards").get<std::vector<double>>()) {
          state.rewards.push_back(reward);
        }
        // Saved before running statistics existed: the rewards were all of them.
        state.observations = a.contains("observations")
                                 ? a.at("observations").get<std::int64_t>()
                                 : static_cast<std::int64_t>(state.rewards.size());
        if (a.contains("reward_mean")) {
          state.reward_mean = a.at("reward_mean").get<double>();
          state.reward_m2 = a.at("reward_m2").get<double>();
        }
        const int arm = a.at("batch_size").get<int>();
        empty[arm];
        arms[arm] = state;
      }
      policy.mab_ = std::make_unique<GaussianTs>(config.mab, empty);
      policy.mab_->set_arms(std::move(arms));
    }
    return policy;
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kInvalidArgument, std::string("malformed saved batch-size policy: ") +
                                                 std::string(text::json_error_text(error.what())));
  }
}

}  // namespace zeus::optimizer
