#include "zeus/sim/simulator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "engine.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_search.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/rng.hpp"

namespace zeus::sim {

using optimizer::zeus_cost;

namespace {

// The baselines the simulator measures the search policies against, after them in listings.
const std::vector<std::string>& baseline_names() {
  static const std::vector<std::string> names = {"default", "grid", "oracle"};
  return names;
}

}  // namespace

const PolicyKind PolicyKind::kZeus = PolicyKind("zeus");
const PolicyKind PolicyKind::kLowRegret = PolicyKind("low-regret");
const PolicyKind PolicyKind::kDefault = PolicyKind("default");
const PolicyKind PolicyKind::kGrid = PolicyKind("grid");
const PolicyKind PolicyKind::kOracle = PolicyKind("oracle");

std::vector<PolicyKind> all_policies() {
  std::vector<PolicyKind> policies;
  for (const std::string& name : optimizer::batch_size_policy_names()) {
    policies.push_back(PolicyKind::named(name));
  }
  for (const std::string& name : baseline_names()) {
    policies.push_back(PolicyKind::named(name));
  }
  return policies;
}

PolicyKind PolicyKind::named(std::string_view name) {
  const std::vector<std::string>& search = optimizer::batch_size_policy_names();
  const std::vector<std::string>& baselines = baseline_names();
  if (std::find(search.begin(), search.end(), name) != search.end() ||
      std::find(baselines.begin(), baselines.end(), name) != baselines.end()) {
    return PolicyKind(std::string(name));
  }
  std::vector<std::string> known(search);
  known.insert(known.end(), baselines.begin(), baselines.end());
  const std::string last = known.back();
  known.pop_back();
  throw Error(ErrorKind::kInvalidArgument, fmt::format("unknown policy \"{}\"; use {} or {}", name,
                                                       fmt::join(known, ", "), last));
}

bool PolicyKind::is_search() const {
  const std::vector<std::string>& search = optimizer::batch_size_policy_names();
  return std::find(search.begin(), search.end(), name_) != search.end();
}

std::string_view policy_name(const PolicyKind& policy) {
  return policy.name();
}

PolicyKind parse_policy(std::string_view name) {
  return PolicyKind::named(name);
}

double RunResult::total_energy_j() const {
  return last_energy_j(static_cast<int>(history.size()));
}
double RunResult::total_time_s() const {
  return last_time_s(static_cast<int>(history.size()));
}
double RunResult::total_cost() const {
  double total = 0.0;
  for (const auto& record : history) {
    total += record.cost;
  }
  return total;
}
double RunResult::last_energy_j(int count) const {
  double total = 0.0;
  const std::size_t from = history.size() - std::min<std::size_t>(history.size(), count);
  for (std::size_t i = from; i < history.size(); ++i) {
    total += history[i].energy_j;
  }
  return total;
}
double RunResult::last_time_s(int count) const {
  double total = 0.0;
  const std::size_t from = history.size() - std::min<std::size_t>(history.size(), count);
  for (std::size_t i = from; i < history.size(); ++i) {
    total += history[i].time_s;
  }
  return total;
}
std::pair<int, int> RunResult::final_configuration() const {
  std::map<std::pair<int, int>, int> counts;
  std::pair<int, int> best{0, 0};
  int best_count = 0;
  const std::size_t from = history.size() - std::min<std::size_t>(history.size(), 10);
  for (std::size_t i = from; i < history.size(); ++i) {
    const std::pair<int, int> config{history[i].batch_size, history[i].power_limit_w};
    const int count = ++counts[config];
    if (count >= best_count) {  // ties: the latest
      best_count = count;
      best = config;
    }
  }
  return best;
}

namespace {

// Expected epochs per recurrence of a fixed configuration of `batch`: a fixed configuration
// retries until a run succeeds, paying (1-p)/p failed runs of max_epochs per success.
std::optional<double> expected_epochs(const BatchSizeTrace& batch, int max_epochs) {
  int successes = 0;
  double success_epochs = 0.0;
  for (const auto& epoch : batch.target_epochs) {
    if (epoch && *epoch <= max_epochs) {
      ++successes;
      success_epochs += *epoch;
    }
  }
  if (successes == 0) {
    return std::nullopt;
  }
  const double runs = static_cast<double>(batch.target_epochs.size());
  return success_epochs / successes + (runs - successes) / successes * max_epochs;
}

Oracle expectation(const WorkloadTrace& trace, const BatchSizeTrace& batch, const PowerPoint& point,
                   double epochs, double eta) {
  const double energy_j = epochs * point.energy_per_epoch_j();
  const double time_s = epochs * point.time_per_epoch_s;
  return {batch.batch_size, point.power_limit_w,
          zeus_cost(energy_j, time_s, eta, trace.max_power_w), energy_j, time_s};
}

}  // namespace

Oracle compute_oracle(const WorkloadTrace& trace, double eta) {
  optimizer::check_eta(eta);
  Oracle best;
  best.expected_cost = std::numeric_limits<double>::infinity();
  for (const BatchSizeTrace& batch : trace.batch_sizes) {
    const std::optional<double> epochs = expected_epochs(batch, trace.workload.max_epochs);
    if (!epochs) {
      continue;
    }
    for (const PowerPoint& point : batch.power) {
      const Oracle candidate = expectation(trace, batch, point, *epochs, eta);
      if (candidate.expected_cost < best.expected_cost) {
        best = candidate;
      }
    }
  }
  if (!std::isfinite(best.expected_cost)) {
    throw Error(ErrorKind::kInvalidArgument, "no configuration of " + trace.workload.dataset +
                                                 " on " + trace.gpu + " reaches the target");
  }
  return best;
}

Oracle expected_fixed(const WorkloadTrace& trace, int batch_size, int power_limit_w, double eta) {
  optimizer::check_eta(eta);
  const BatchSizeTrace& batch = trace.at_batch_size(batch_size);
  const std::optional<double> epochs = expected_epochs(batch, trace.workload.max_epochs);
  if (!epochs) {
    throw Error(ErrorKind::kInvalidArgument,
                "batch size " + std::to_string(batch_size) + " never reaches the target");
  }
  return expectation(trace, batch, point_at(batch, power_limit_w), *epochs, eta);
}

std::optional<int> settle_recurrences(const RunResult& run, int from, int batch_size) {
  const int size = static_cast<int>(run.history.size());
  for (int start = std::max(from, 0); start + kSettleWindow <= size; ++start) {
    if (run.history[static_cast<std::size_t>(start)].batch_size != batch_size) {
      continue;
    }
    int matches = 0;
    for (int r = start; r < start + kSettleWindow; ++r) {
      matches += run.history[static_cast<std::size_t>(r)].batch_size == batch_size ? 1 : 0;
    }
    if (matches >= kSettleMatches) {
      return start - from;
    }
  }
  return std::nullopt;
}

void check_drift(const WorkloadTrace& trace, const Drift& drift, int recurrences) {
  if (drift.at_recurrence < 1 || drift.at_recurrence >= recurrences) {
    throw Error(ErrorKind::kInvalidArgument,
                "the drift's recurrence " + std::to_string(drift.at_recurrence) +
                    " must be between 1 and " + std::to_string(recurrences - 1) + " (the " +
                    std::to_string(recurrences) + " recurrences are numbered from 0)");
  }
  if (!drift.trace) {
    throw Error(ErrorKind::kInvalidArgument, "the drift has no trace");
  }
  const WorkloadTrace& after = *drift.trace;
  bool same = after.batch_sizes.size() == trace.batch_sizes.size() &&
              after.workload.default_batch_size == trace.workload.default_batch_size &&
              after.max_power_w == trace.max_power_w;
  for (std::size_t i = 0; same && i < trace.batch_sizes.size(); ++i) {
    const BatchSizeTrace& a = trace.batch_sizes[i];
    const BatchSizeTrace& b = after.batch_sizes[i];
    same = a.batch_size == b.batch_size && a.power.size() == b.power.size();
    for (std::size_t j = 0; same && j < a.power.size(); ++j) {
      same = a.power[j].power_limit_w == b.power[j].power_limit_w &&
             a.power[j].time_per_epoch_s == b.power[j].time_per_epoch_s &&
             a.power[j].average_power_w == b.power[j].average_power_w;
    }
  }
  if (!same) {
    throw Error(ErrorKind::kInvalidArgument,
                "the trace after the drift of " + trace.workload.dataset + " on " + trace.gpu +
                    " must have the same batch sizes, power points and b0 as before it");
  }
  SimulationConfig after_config;
  after_config.recurrences = recurrences;
  check_config(after, after_config);  // b0 must still reach the target
}

RunResult simulate_recurring(const WorkloadTrace& trace, PolicyKind kind,
                             const SimulationConfig& config) {
  check_config(trace, config);
  const int recurrences = default_recurrences(trace, config);
  if (config.drift) {
    check_drift(trace, *config.drift, recurrences);
  }
  std::unique_ptr<Policy> policy = make_policy(trace, kind, config);
  optimizer::Rng rng = run_rng(config);
  // Grid search may spend a whole recurrence walking past configurations that fail.
  int max_tries = config.max_tries;
  if (kind == PolicyKind::kGrid) {
    for (const BatchSizeTrace& batch : trace.batch_sizes) {
      max_tries += static_cast<int>(batch.power.size());
    }
  }
  RunResult result;
  result.history.reserve(static_cast<std::size_t>(recurrences));
  const WorkloadTrace* runs = &trace;  // where the runs are drawn from: drift switches it
  for (int r = 0; r < recurrences; ++r) {
    if (config.drift && r == config.drift->at_recurrence) {
      runs = config.drift->trace.get();
      if (kind == PolicyKind::kOracle) {
        policy = make_policy(*runs, kind, config);  // the oracle knows the new best at once
      }
    }
    RecurrenceRecord record;
    record.recurrence = r;
    while (true) {
      if (++record.tries > max_tries) {
        throw Error(ErrorKind::kInvalidArgument, "recurrence " + std::to_string(r) + " of " +
                                                     trace.workload.dataset + " on " + trace.gpu +
                                                     " did not reach the target in " +
                                                     std::to_string(max_tries) + " tries");
      }
      const Choice choice = policy->decide();
      const std::optional<double> threshold = policy->threshold(choice);
      const Outcome outcome = run_once(*runs, runs->at_batch_size(choice.batch_size), choice,
                                       threshold, config.eta, rng);
      policy->report(choice, outcome);
      if (outcome.never_ran) {
        continue;
      }
      record.batch_size = choice.batch_size;
      record.power_limit_w = choice.power_limit_w;
      record.profiled = choice.profile;
      record.energy_j += outcome.energy_j;
      record.time_s += outcome.time_s;
      record.cost += outcome.cost;
      if (outcome.reached) {
        break;
      }
      ++result.failed_runs;
    }
    result.history.push_back(record);
  }
  return result;
}

}  // namespace zeus::sim
