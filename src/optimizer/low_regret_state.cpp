// The low-regret policy's saved state: exact JSON save and restore. A state saved by the first
// round (before issue 30) lacks each candidate's surprise details and the latest surprise; it
// restores with no surprise pending.
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "optimizer/policy_common.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace zeus::optimizer {

using nlohmann::json;

namespace {

const char* candidate_status_name(LowRegretPolicy::Status status) {
  switch (status) {
    case LowRegretPolicy::Status::kUntried:
      return "untried";
    case LowRegretPolicy::Status::kArm:
      return "arm";
    case LowRegretPolicy::Status::kPruned:
      return "pruned";
  }
  return "?";
}

LowRegretPolicy::Status parse_candidate_status(const std::string& text) {
  if (text == "untried") {
    return LowRegretPolicy::Status::kUntried;
  }
  if (text == "arm") {
    return LowRegretPolicy::Status::kArm;
  }
  if (text == "pruned") {
    return LowRegretPolicy::Status::kPruned;
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown batch-size status \"" + text + "\"");
}

json optional_to_json(const std::optional<double>& value) {
  return value ? json(*value) : json(nullptr);
}

std::optional<double> optional_from_json(const json& value) {
  if (value.is_null()) {
    return std::nullopt;
  }
  return value.get<double>();
}

}  // namespace

std::string LowRegretPolicy::save() const {
  const LowRegretConfig& lr = config_.low_regret;
  json out;
  out["policy"] = "low-regret";
  out["version"] = 1;
  out["config"] = {{"batch_sizes", config_.batch_sizes},
                   {"default_batch_size", config_.default_batch_size},
                   {"beta", optional_to_json(config_.beta)},
                   {"window_size", config_.mab.window_size},
                   {"probe_cap", lr.probe_cap},
                   {"noise_prior", lr.noise_prior},
                   {"noise_prior_weight", lr.noise_prior_weight},
                   {"drift_z", lr.drift_z},
                   {"shrinkage_floor", lr.shrinkage_floor},
                   {"arm_noise_weight", lr.arm_noise_weight},
                   {"seed", config_.seed}};
  json candidates = json::array();
  for (const auto& [batch_size, c] : candidates_) {
    candidates.push_back({{"batch_size", batch_size},
                          {"status", candidate_status_name(c.status)},
                          {"epoch_cost", c.epoch_cost},
                          {"window", std::vector<double>(c.window.begin(), c.window.end())},
                          {"count", c.count},
                          {"mean", c.mean},
                          {"log_scale", c.log_scale},
                          {"scaled", c.scaled},
                          {"scale_count", c.scale_count},
                          {"m2", c.m2},
                          {"surprise_side", c.surprise_side},
                          {"surprise_y", c.surprise_y},
                          {"surprise_mean", c.surprise_mean},
                          {"surprise_ss", c.surprise_ss}});
  }
  out["candidates"] = candidates;
  json pending = json::array();
  for (const auto& [id, trial] : pending_) {
    pending.push_back({{"id", id},
                       {"batch_size", trial.batch_size},
                       {"kind", kind_name(trial.kind)},
                       {"threshold", optional_to_json(trial.threshold)}});
  }
  out["pending"] = pending;
  out["anchor"] = anchor_;
  out["next_trial_id"] = next_trial_id_;
  out["min_cost"] = optional_to_json(min_cost_);
  out["min_cost_batch_size"] = min_cost_batch_size_;
  out["noise_ss"] = noise_ss_;
  out["noise_dof"] = noise_dof_;
  out["drifts"] = drifts_;
  out["last_surprise_side"] = last_surprise_side_;
  out["rng"] = rng_.save();
  return out.dump();
}

LowRegretPolicy LowRegretPolicy::restore(const std::string& text) {
  try {
    const json in = json::parse(text);
    if (in.value("policy", std::string()) != "low-regret") {
      throw Error(ErrorKind::kInvalidArgument, "the saved state is not a low-regret policy's");
    }
    const json& c = in.at("config");
    BatchSizePolicyConfig config;
    config.batch_sizes = c.at("batch_sizes").get<std::vector<int>>();
    config.default_batch_size = c.at("default_batch_size").get<int>();
    config.beta = optional_from_json(c.at("beta"));
    config.mab.window_size = c.at("window_size").get<int>();
    config.low_regret.probe_cap = c.at("probe_cap").get<double>();
    config.low_regret.noise_prior = c.at("noise_prior").get<double>();
    config.low_regret.noise_prior_weight = c.at("noise_prior_weight").get<double>();
    config.low_regret.drift_z = c.at("drift_z").get<double>();
    config.low_regret.shrinkage_floor = c.at("shrinkage_floor").get<double>();
    config.low_regret.arm_noise_weight = c.at("arm_noise_weight").get<double>();
    config.seed = c.at("seed").get<std::uint64_t>();
    LowRegretPolicy policy(config);
    for (const json& each : in.at("candidates")) {
      const int batch_size = each.at("batch_size").get<int>();
      const auto found = policy.candidates_.find(batch_size);
      if (found == policy.candidates_.end()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "saved batch size " + std::to_string(batch_size) + " is not a candidate");
      }
      Candidate& candidate = found->second;
      candidate.status = parse_candidate_status(each.at("status").get<std::string>());
      candidate.epoch_cost = each.at("epoch_cost").get<double>();
      for (const double y : each.at("window").get<std::vector<double>>()) {
        candidate.window.push_back(y);
      }
      candidate.count = each.at("count").get<std::int64_t>();
      candidate.mean = each.at("mean").get<double>();
      candidate.log_scale = each.at("log_scale").get<double>();
      candidate.scaled = each.at("scaled").get<bool>();
      // The first round kept the first run's scale: worth one run here.
      candidate.scale_count =
          each.value("scale_count", static_cast<std::int64_t>(candidate.scaled ? 1 : 0));
      candidate.m2 = each.at("m2").get<double>();
      candidate.surprise_side = each.at("surprise_side").get<int>();
      // Absent from the first round's saved states: a pending surprise then counts as none.
      if (each.contains("surprise_y")) {
        candidate.surprise_y = each.at("surprise_y").get<double>();
        candidate.surprise_mean = each.at("surprise_mean").get<double>();
        candidate.surprise_ss = each.at("surprise_ss").get<double>();
      } else {
        candidate.surprise_side = 0;
      }
      const bool window_matches =
          policy.config_.mab.window_size == 0
              ? candidate.window.empty()
              : candidate.window.size() == static_cast<std::size_t>(candidate.count);
      if (candidate.count < 0 || !std::isfinite(candidate.mean) || !std::isfinite(candidate.m2) ||
          candidate.m2 < 0.0 || !std::isfinite(candidate.log_scale) ||
          !std::isfinite(candidate.epoch_cost) || candidate.epoch_cost < 0.0 || !window_matches ||
          !std::isfinite(candidate.surprise_y) || !std::isfinite(candidate.surprise_mean) ||
          !std::isfinite(candidate.surprise_ss) || candidate.surprise_ss < 0.0 ||
          candidate.scale_count < 0 || std::abs(candidate.surprise_side) > 1) {
        throw Error(ErrorKind::kInvalidArgument,
                    "saved batch size " + std::to_string(batch_size) + " has bad statistics");
      }
    }
    policy.next_trial_id_ = in.at("next_trial_id").get<int>();
    for (const json& each : in.at("pending")) {
      PendingTrial trial;
      trial.id = each.at("id").get<int>();
      trial.batch_size = each.at("batch_size").get<int>();
      trial.kind = parse_kind(each.at("kind").get<std::string>());
      trial.threshold = optional_from_json(each.at("threshold"));
      if (trial.id < 1 || trial.id >= policy.next_trial_id_ ||
          policy.candidates_.count(trial.batch_size) == 0) {
        throw Error(ErrorKind::kInvalidArgument,
                    "saved trial " + std::to_string(trial.id) + " is not consistent");
      }
      policy.pending_.emplace(trial.id, trial);
    }
    policy.anchor_ = in.at("anchor").get<int>();
    if (policy.candidates_.count(policy.anchor_) == 0) {
      throw Error(ErrorKind::kInvalidArgument, "the saved anchor is not a candidate");
    }
    policy.min_cost_ = optional_from_json(in.at("min_cost"));
    policy.min_cost_batch_size_ = in.at("min_cost_batch_size").get<int>();
    policy.noise_ss_ = in.at("noise_ss").get<double>();
    policy.noise_dof_ = in.at("noise_dof").get<double>();
    policy.drifts_ = in.at("drifts").get<int>();
    policy.last_surprise_side_ = in.value("last_surprise_side", 0);  // absent: first round
    if (std::abs(policy.last_surprise_side_) > 1) {
      throw Error(ErrorKind::kInvalidArgument, "the saved last_surprise_side is not -1, 0 or 1");
    }
    policy.rng_ = Rng::restore(in.at("rng").get<std::string>());
    return policy;
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kInvalidArgument, std::string("malformed saved low-regret policy: ") +
                                                 std::string(text::json_error_text(error.what())));
  }
}

}  // namespace zeus::optimizer
