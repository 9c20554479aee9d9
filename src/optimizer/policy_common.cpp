#include "optimizer/policy_common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/text.hpp"
#include "zeus/optimizer/batch_size_policy.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace zeus::optimizer {

void check_common_config(BatchSizePolicyConfig& config) {
  auto& sizes = config.batch_sizes;
  if (sizes.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "the batch-size policy needs at least one batch size");
  }
  std::sort(sizes.begin(), sizes.end());
  if (std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end()) {
    throw Error(ErrorKind::kInvalidArgument, "the batch sizes contain duplicates");
  }
  if (sizes.front() <= 0) {
    throw Error(ErrorKind::kInvalidArgument, "batch sizes must be positive");
  }
  if (!std::binary_search(sizes.begin(), sizes.end(), config.default_batch_size)) {
    throw Error(ErrorKind::kInvalidArgument, "the default batch size " +
                                                 std::to_string(config.default_batch_size) +
                                                 " is not one of the candidate batch sizes");
  }
  if (config.mab.window_size < 0) {
    throw Error(ErrorKind::kInvalidArgument, "window_size must be 0 (all) or positive");
  }
  if (config.beta && !(*config.beta > 0.0 && std::isfinite(*config.beta))) {
    throw Error(ErrorKind::kInvalidArgument,
                "beta must be a positive number (or unset to disable early stopping)");
  }
}

void check_trial_result(const TrialResult& result) {
  if (!std::isfinite(result.cost) || result.cost < 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                "a trial's cost must be a finite, non-negative number (got " +
                    std::to_string(result.cost) + ")");
  }
  if (result.epochs < 0) {
    throw Error(ErrorKind::kInvalidArgument, "a trial's epoch count cannot be negative (got " +
                                                 std::to_string(result.epochs) + ")");
  }
  if (!std::isfinite(result.epoch_cost) || result.epoch_cost < 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                "a trial's per-epoch cost must be a finite, non-negative number (got " +
                    std::to_string(result.epoch_cost) + ")");
  }
}

double prohibitive_cost(const BatchSizePolicyConfig& config, std::optional<double> min_cost) {
  return 100.0 * config.beta.value_or(0.0) * min_cost.value_or(1.0);
}

std::optional<double> BatchSizeSearch::shared_cost_threshold() const {
  const std::optional<double>& beta = config().beta;
  const std::optional<double> lowest = min_cost();
  if (threshold_rule() != ThresholdRule::kBetaTimesMinCost || !beta || !lowest) {
    return std::nullopt;
  }
  return *beta * *lowest;
}

const char* kind_name(TrialKind kind) {
  switch (kind) {
    case TrialKind::kExploration:
      return "exploration";
    case TrialKind::kConcurrent:
      return "concurrent";
    case TrialKind::kMab:
      return "mab";
  }
  return "?";
}

const char* trial_kind_wire_name(TrialKind kind) {
  switch (kind) {
    case TrialKind::kExploration:
      return "Exploration";
    case TrialKind::kConcurrent:
      return "Concurrent";
    case TrialKind::kMab:
      return "MAB";
  }
  return "?";
}

const char* status_name(TrialStatus status) {
  switch (status) {
    case TrialStatus::kDispatched:
      return "dispatched";
    case TrialStatus::kSucceeded:
      return "succeeded";
    case TrialStatus::kFailed:
      return "failed";
  }
  return "?";
}

namespace {
template <typename Enum>
Enum parse_enum(const std::string& text,
                std::initializer_list<std::pair<const char*, Enum>> names) {
  for (const auto& [name, value] : names) {
    if (text == name) {
      return value;
    }
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown value \"" + text + "\" in a saved policy");
}
}  // namespace

TrialKind parse_kind(const std::string& text) {
  return parse_enum<TrialKind>(text, {{"exploration", TrialKind::kExploration},
                                      {"concurrent", TrialKind::kConcurrent},
                                      {"mab", TrialKind::kMab}});
}

TrialStatus parse_status(const std::string& text) {
  return parse_enum<TrialStatus>(text, {{"dispatched", TrialStatus::kDispatched},
                                        {"succeeded", TrialStatus::kSucceeded},
                                        {"failed", TrialStatus::kFailed}});
}

nlohmann::json number_to_json(double value) {
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  return value;
}

double number_from_json(const nlohmann::json& value) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "inf") {
      return std::numeric_limits<double>::infinity();
    }
    if (text == "-inf") {
      return -std::numeric_limits<double>::infinity();
    }
    throw Error(ErrorKind::kInvalidArgument, "\"" + text + "\" is not a number");
  }
  return value.get<double>();
}

// ---- The factory ----

const std::vector<std::string>& batch_size_policy_names() {
  static const std::vector<std::string> names = {"zeus", "low-regret"};
  return names;
}

const std::string& default_batch_size_policy_name() {
  return batch_size_policy_names().front();
}

void check_batch_size_policy_name(std::string_view name) {
  for (const std::string& known : batch_size_policy_names()) {
    if (name == known) {
      return;
    }
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown batch-size policy \"" + std::string(name) +
                  "\"; the policies are \"zeus\" (the paper's) and \"low-regret\"");
}

std::unique_ptr<BatchSizeSearch> make_batch_size_search(std::string_view policy,
                                                        BatchSizePolicyConfig config) {
  check_batch_size_policy_name(policy);
  if (policy == "low-regret") {
    return std::make_unique<LowRegretPolicy>(std::move(config));
  }
  return std::make_unique<BatchSizePolicy>(std::move(config));
}

std::unique_ptr<BatchSizeSearch> restore_batch_size_search(const std::string& text) {
  std::string policy = default_batch_size_policy_name();
  try {
    const nlohmann::json in = nlohmann::json::parse(text);
    if (in.is_object() && in.contains("policy")) {
      policy = in.at("policy").get<std::string>();
    }
  } catch (const nlohmann::json::exception& error) {
    throw Error(ErrorKind::kInvalidArgument, std::string("malformed saved batch-size policy: ") +
                                                 std::string(text::json_error_text(error.what())));
  }
  check_batch_size_policy_name(policy);
  if (policy == "low-regret") {
    return std::make_unique<LowRegretPolicy>(LowRegretPolicy::restore(text));
  }
  return std::make_unique<BatchSizePolicy>(BatchSizePolicy::restore(text));
}

}  // namespace zeus::optimizer
