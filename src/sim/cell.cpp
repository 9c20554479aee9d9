// One cell (workload x GPU x policy) over many seeds, on worker threads, compared with Default.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "engine.hpp"
#include "limits.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"

namespace zeus::sim {

namespace {

// A cell keeps every seed's history until it returns: refuse one that would not fit in memory
// before allocating any of it.
void check_cell_size(const WorkloadTrace& trace, const SimulationConfig& config,
                     std::size_t seeds) {
  if (seeds > limits::kMaxSeeds) {
    throw Error(ErrorKind::kInvalidArgument, std::to_string(seeds) +
                                                 " seeds is above the limit of " +
                                                 std::to_string(limits::kMaxSeeds));
  }
  if (config.arrivals.size() > limits::kMaxArrivals) {
    throw Error(ErrorKind::kInvalidArgument, std::to_string(config.arrivals.size()) +
                                                 " job arrivals is above the limit of " +
                                                 std::to_string(limits::kMaxArrivals));
  }
  const std::size_t recurrences = config.arrivals.empty()
                                      ? static_cast<std::size_t>(default_recurrences(trace, config))
                                      : config.arrivals.size();
  if (recurrences > limits::kMaxRecordsPerCell / std::max<std::size_t>(seeds, 1)) {
    throw Error(ErrorKind::kInvalidArgument,
                std::to_string(seeds) + " seeds x " + std::to_string(recurrences) +
                    " recurrences is above the limit of " +
                    std::to_string(limits::kMaxRecordsPerCell) +
                    " recurrences per cell (each seed's history is kept in memory, about " +
                    std::to_string(sizeof(RecurrenceRecord)) +
                    " bytes per recurrence); use fewer seeds or recurrences");
  }
}

// What a final configuration costs per recurrence in expectation. A final configuration is
// that of a run that reached the target, so it reaches it within max_epochs in some run of the
// trace; infinity otherwise (e.g. an empty history), which the JSON writes as null.
double final_expected_cost(const WorkloadTrace& trace, std::pair<int, int> configuration,
                           double eta) {
  try {
    return expected_fixed(trace, configuration.first, configuration.second, eta).expected_cost;
  } catch (const Error&) {
    return std::numeric_limits<double>::infinity();
  }
}

std::string every_seed_failed(std::size_t seeds, const FailedSeed& first) {
  return "every seed failed (" + std::to_string(seeds) + "); seed " + std::to_string(first.seed) +
         ": " + first.error;
}

}  // namespace

CellSummary run_cell(const WorkloadTrace& trace, PolicyKind policy, const SimulationConfig& config,
                     const std::vector<std::uint64_t>& seeds, unsigned threads) {
  if (seeds.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "at least one seed is needed");
  }
  check_config(trace, config);
  check_cell_size(trace, config, seeds.size());
  const int drift_at = config.drift ? config.drift->at_recurrence : 0;
  if (config.drift) {
    if (!config.arrivals.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "drift applies to sequential recurrences, not to replayed job arrivals");
    }
    check_drift(trace, *config.drift, default_recurrences(trace, config));
  }
  // The final configurations and the oracle at the end are those of the trace after a drift.
  const WorkloadTrace& last = config.drift ? *config.drift->trace : trace;
  const Oracle before = compute_oracle(trace, config.eta);
  const Oracle oracle = compute_oracle(last, config.eta);
  CellSummary cell;
  cell.workload = trace.workload.dataset;
  cell.gpu = trace.gpu;
  cell.policy = std::string(policy_name(policy));
  cell.seeds = static_cast<int>(seeds.size());
  cell.recurrences = config.arrivals.empty() ? default_recurrences(trace, config)
                                             : static_cast<int>(config.arrivals.size());
  cell.oracle_batch_size = oracle.batch_size;
  cell.oracle_power_limit_w = oracle.power_limit_w;
  cell.target_metric = trace.workload.target_metric;
  cell.notes = trace.notes;
  cell.runs.resize(seeds.size());

  struct PerSeed {
    double energy, energy_last10, time, time_last10, cost, regret, regret_after;
    std::optional<int> settle;
  };
  std::vector<PerSeed> per_seed(seeds.size());
  std::vector<std::exception_ptr> errors(seeds.size());
  auto work = [&](std::size_t i) {
    try {
      SimulationConfig seeded = config;
      seeded.seed = seeds[i];
      const auto simulate = [&](PolicyKind kind) {
        return config.arrivals.empty() ? simulate_recurring(trace, kind, seeded)
                                       : simulate_concurrent(trace, kind, seeded, config.arrivals);
      };
      RunResult run = simulate(policy);
      const RunResult base = policy == PolicyKind::kDefault ? run : simulate(PolicyKind::kDefault);
      const auto saving = [](double value, double baseline) {
        return baseline > 0.0 ? 100.0 * (1.0 - value / baseline) : 0.0;
      };
      PerSeed& s = per_seed[i];
      s.energy = saving(run.total_energy_j(), base.total_energy_j());
      s.energy_last10 = saving(run.last_energy_j(10), base.last_energy_j(10));
      s.time = saving(run.total_time_s(), base.total_time_s());
      s.time_last10 = saving(run.last_time_s(10), base.last_time_s(10));
      s.cost = saving(run.total_cost(), base.total_cost());
      // Against the oracle of the trace each recurrence ran on.
      s.regret = 0.0;
      s.regret_after = 0.0;
      for (const RecurrenceRecord& record : run.history) {
        const bool after = config.drift && record.recurrence >= drift_at;
        // A replayed job scaled by runtime_ratio is compared with the oracle scaled alike.
        const double regret = record.cost - record.runtime_ratio * (after ? oracle.expected_cost
                                                                          : before.expected_cost);
        s.regret += regret;
        s.regret_after += after ? regret : 0.0;
      }
      if (config.drift) {
        s.settle = settle_recurrences(run, drift_at, oracle.batch_size);
      }
      cell.runs[i] = std::move(run);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  unsigned workers = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min<unsigned>(
      {workers, static_cast<unsigned>(seeds.size()), static_cast<unsigned>(limits::kMaxThreads)});
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) {
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < seeds.size(); i = next++) {
        work(i);
      }
    });
  }
  for (std::size_t i = next++; i < seeds.size(); i = next++) {
    work(i);
  }
  for (auto& thread : pool) {
    thread.join();
  }
  // A seed that failed is reported and the cell goes on with the others (the figures below are
  // theirs); a cell whose every seed failed is an error.
  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (!errors[i]) {
      ok.push_back(i);
      continue;
    }
    try {
      std::rethrow_exception(errors[i]);
    } catch (const std::exception& error) {
      cell.failed_seeds.push_back({seeds[i], error.what()});
    }
  }
  if (ok.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                every_seed_failed(seeds.size(), cell.failed_seeds.front()));
  }
  const double succeeded = static_cast<double>(ok.size());

  const auto mean_std = [&](auto member, double& mean, double& stddev) {
    double sum = 0.0;
    for (const std::size_t i : ok) {
      sum += per_seed[i].*member;
    }
    mean = sum / succeeded;
    double squares = 0.0;
    for (const std::size_t i : ok) {
      squares += (per_seed[i].*member - mean) * (per_seed[i].*member - mean);
    }
    stddev = ok.size() > 1 ? std::sqrt(squares / (succeeded - 1.0)) : 0.0;
  };
  mean_std(&PerSeed::energy, cell.energy_saving_pct_mean, cell.energy_saving_pct_std);
  mean_std(&PerSeed::energy_last10, cell.energy_saving_last10_pct_mean,
           cell.energy_saving_last10_pct_std);
  mean_std(&PerSeed::time, cell.time_saving_pct_mean, cell.time_saving_pct_std);
  mean_std(&PerSeed::time_last10, cell.time_saving_last10_pct_mean,
           cell.time_saving_last10_pct_std);
  mean_std(&PerSeed::cost, cell.cost_saving_pct_mean, cell.cost_saving_pct_std);
  mean_std(&PerSeed::regret, cell.cum_regret_mean, cell.cum_regret_std);

  std::map<std::pair<int, int>, int> finals;
  int matches = 0;
  double failed = 0.0;
  double final_costs = 0.0;
  for (const std::size_t i : ok) {
    const RunResult& run = cell.runs[i];
    const auto final_config = run.final_configuration();
    ++finals[final_config];
    final_costs += final_expected_cost(last, final_config, config.eta);
    matches += final_config.first == oracle.batch_size ? 1 : 0;
    failed += run.failed_runs;
  }
  const auto modal =
      std::max_element(finals.begin(), finals.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  cell.final_batch_size = modal->first.first;
  cell.final_power_limit_w = modal->first.second;
  cell.final_expected_cost = final_expected_cost(last, modal->first, config.eta);
  cell.final_expected_cost_mean = final_costs / succeeded;
  cell.final_matches_oracle_pct = 100.0 * matches / succeeded;
  cell.failed_runs_mean = failed / succeeded;
  if (config.drift) {
    DriftSummary drift;
    drift.at_recurrence = drift_at;
    drift.old_oracle_batch_size = before.batch_size;
    drift.old_oracle_power_limit_w = before.power_limit_w;
    drift.old_oracle_expected_cost = before.expected_cost;
    drift.new_oracle_batch_size = oracle.batch_size;
    drift.new_oracle_power_limit_w = oracle.power_limit_w;
    drift.new_oracle_expected_cost = oracle.expected_cost;
    double settle_sum = 0.0;
    double regret_after = 0.0;
    for (const std::size_t i : ok) {
      const PerSeed& s = per_seed[i];
      regret_after += s.regret_after;
      if (s.settle) {
        ++drift.settled_seeds;
        settle_sum += *s.settle;
      } else {
        ++drift.unsettled_seeds;
      }
    }
    drift.settle_recurrences_mean = drift.settled_seeds > 0
                                        ? settle_sum / drift.settled_seeds
                                        : std::numeric_limits<double>::quiet_NaN();
    drift.regret_after_mean = regret_after / succeeded;
    cell.drift = drift;
  }
  return cell;
}

}  // namespace zeus::sim
