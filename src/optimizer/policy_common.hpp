// What the two batch-size policies share: configuration and result checks, and the JSON spelling
// of their saved states (internal to the optimizer layer).
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_search.hpp"

namespace zeus::optimizer {

// Sorts config.batch_sizes; throws kInvalidArgument for empty, duplicate or non-positive batch
// sizes, a b0 not among them, a window_size < 0 or a beta <= 0.
void check_common_config(BatchSizePolicyConfig& config);
// Throws kInvalidArgument for a cost that is not finite and non-negative, a negative epoch
// count or a bad epoch cost.
void check_trial_result(const TrialResult& result);

// What a policy that knows no better charges a trial stopped before its first epoch:
// 100 x beta x the lowest converged cost (1 before one).
double prohibitive_cost(const BatchSizePolicyConfig& config, std::optional<double> min_cost);

const char* kind_name(TrialKind kind);
const char* status_name(TrialStatus status);
TrialKind parse_kind(const std::string& text);
TrialStatus parse_status(const std::string& text);

// JSON has no infinity: it is written as the string "inf".
nlohmann::json number_to_json(double value);
double number_from_json(const nlohmann::json& value);

}  // namespace zeus::optimizer
