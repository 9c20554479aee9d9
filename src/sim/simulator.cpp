#include "zeus/sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <queue>
#include <thread>

#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_policy.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/optimizer/rng.hpp"

namespace zeus::sim {
namespace {

using optimizer::zeus_cost;

// What one training run did.
struct Outcome {
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
  bool reached = false;
  bool never_ran = false;  // early stopping would not even allow one epoch
};

struct Choice {
  int trial_id = 0;
  int batch_size = 0;
  int power_limit_w = 0;
  bool profile = false;  // the first epoch profiles every power limit
};

const PowerPoint& point_at(const BatchSizeTrace& batch, int power_limit_w) {
  const PowerPoint* point = batch.at_power_limit(power_limit_w);
  if (point == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "batch size " + std::to_string(batch.batch_size) +
                                                 " has no power trace at " +
                                                 std::to_string(power_limit_w) + " W");
  }
  return *point;
}

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
Outcome run_once(const WorkloadTrace& trace, const BatchSizeTrace& batch, const Choice& choice,
                 std::optional<double> threshold, double eta, optimizer::Rng& rng,
                 double runtime_ratio = 1.0) {
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
  if (threshold) {
    const double cost_per_epoch = zeus_cost(epoch_energy_j, epoch_time_s, eta, trace.max_power_w);
    allowed_epochs =
        static_cast<int>(std::min<double>(allowed_epochs, std::floor(*threshold / cost_per_epoch)));
  }
  Outcome outcome;
  if (allowed_epochs <= 0) {
    outcome.never_ran = true;
    return outcome;
  }
  outcome.reached = target_epoch.has_value() && *target_epoch <= allowed_epochs;
  const int epochs = outcome.reached ? *target_epoch : allowed_epochs;
  outcome.energy_j = first_energy_j + (epochs - 1) * epoch_energy_j;
  outcome.time_s = first_time_s + (epochs - 1) * epoch_time_s;
  outcome.cost = zeus_cost(outcome.energy_j, outcome.time_s, eta, trace.max_power_w);
  return outcome;
}

class Policy {
 public:
  virtual ~Policy() = default;
  virtual Choice decide() = 0;
  virtual std::optional<double> threshold() const { return std::nullopt; }
  virtual void report(const Choice& choice, const Outcome& outcome) = 0;
};

class ZeusPolicy final : public Policy {
 public:
  ZeusPolicy(const WorkloadTrace& trace, const SimulationConfig& config)
      : trace_(trace), config_(config), bso_(make_config(trace, config)) {}

  Choice decide() override {
    const optimizer::Decision decision = bso_.next();
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

  std::optional<double> threshold() const override { return bso_.cost_threshold(); }

  void report(const Choice& choice, const Outcome& outcome) override {
    if (outcome.never_ran) {
      // Not even one epoch fits under the threshold: charge the batch size a prohibitive cost.
      const double penalty = 100.0 * config_.beta * bso_.min_cost().value_or(1.0);
      bso_.report(choice.trial_id, penalty, false);
      return;
    }
    bso_.report(choice.trial_id, outcome.cost, outcome.reached);
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
  optimizer::BatchSizePolicy bso_;
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
  std::optional<double> threshold() const override {
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

std::unique_ptr<Policy> make_policy(const WorkloadTrace& trace, PolicyKind kind,
                                    const SimulationConfig& config) {
  switch (kind) {
    case PolicyKind::kZeus:
      return std::make_unique<ZeusPolicy>(trace, config);
    case PolicyKind::kDefault: {
      const BatchSizeTrace& batch = trace.at_batch_size(trace.workload.default_batch_size);
      return std::make_unique<FixedPolicy>(batch.batch_size, max_power_limit(batch));
    }
    case PolicyKind::kGrid:
      return std::make_unique<GridPolicy>(trace, config.beta);
    case PolicyKind::kOracle: {
      const Oracle oracle = compute_oracle(trace, config.eta);
      return std::make_unique<FixedPolicy>(oracle.batch_size, oracle.power_limit_w);
    }
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown policy");
}

int default_recurrences(const WorkloadTrace& trace, const SimulationConfig& config) {
  if (config.recurrences < 0) {
    throw Error(ErrorKind::kInvalidArgument, "the number of recurrences cannot be negative");
  }
  if (config.recurrences > 0) {
    return config.recurrences;
  }
  return 2 * static_cast<int>(trace.batch_sizes.size()) *
         static_cast<int>(trace.power_limits_w.size());
}

void check_config(const WorkloadTrace& trace, const SimulationConfig& config) {
  optimizer::check_eta(config.eta);
  if (config.max_tries < 1) {
    throw Error(ErrorKind::kInvalidArgument, "max_tries must be at least 1");
  }
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

}  // namespace

std::string_view policy_name(PolicyKind policy) {
  switch (policy) {
    case PolicyKind::kZeus:
      return "zeus";
    case PolicyKind::kDefault:
      return "default";
    case PolicyKind::kGrid:
      return "grid";
    case PolicyKind::kOracle:
      return "oracle";
  }
  return "?";
}

PolicyKind parse_policy(std::string_view name) {
  for (const PolicyKind kind :
       {PolicyKind::kZeus, PolicyKind::kDefault, PolicyKind::kGrid, PolicyKind::kOracle}) {
    if (policy_name(kind) == name) {
      return kind;
    }
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown policy \"" + std::string(name) + "\"; use zeus, default, grid or oracle");
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

RunResult simulate_recurring(const WorkloadTrace& trace, PolicyKind kind,
                             const SimulationConfig& config) {
  check_config(trace, config);
  const int recurrences = default_recurrences(trace, config);
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
  for (int r = 0; r < recurrences; ++r) {
    RecurrenceRecord record;
    record.recurrence = r;
    while (true) {
      if (++record.tries > max_tries) {
        throw Error(ErrorKind::kInvalidArgument, "recurrence " + std::to_string(r) + " of " +
                                                     trace.workload.dataset + " on " + trace.gpu +
                                                     " did not reach the target in " +
                                                     std::to_string(max_tries) + " tries");
      }
      const std::optional<double> threshold = policy->threshold();
      const Choice choice = policy->decide();
      const Outcome outcome = run_once(trace, trace.at_batch_size(choice.batch_size), choice,
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

std::vector<JobArrival> load_arrivals(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  if (!in) {
    throw Error(ErrorKind::kNotFound, "cannot open the job arrivals file " + csv.string());
  }
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') {
    line.pop_back();
  }
  if (line != "start_time,end_time" && line != "start_time,end_time,runtime_ratio") {
    throw Error(ErrorKind::kInvalidArgument,
                csv.string() + ":1: the header must be start_time,end_time[,runtime_ratio]");
  }
  const bool has_ratio = line.size() > std::string("start_time,end_time").size();
  std::vector<JobArrival> arrivals;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty()) {
      continue;
    }
    const std::string at = csv.string() + ":" + std::to_string(number) + ": ";
    std::vector<double> values;
    std::size_t start = 0;
    try {
      while (true) {
        const std::size_t comma = line.find(',', start);
        const std::string field =
            line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::size_t used = 0;
        values.push_back(std::stod(field, &used));
        if (used != field.size()) {
          throw std::invalid_argument(field);
        }
        if (comma == std::string::npos) {
          break;
        }
        start = comma + 1;
      }
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidArgument, at + "every field must be a number");
    }
    if (values.size() != (has_ratio ? 3u : 2u)) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "expected " + (has_ratio ? "3" : "2") + " fields");
    }
    JobArrival arrival{values[0], values[1], has_ratio ? values[2] : 1.0};
    if (!(arrival.end_s > arrival.start_s) || !(arrival.runtime_ratio > 0.0)) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "end_time must be after start_time and runtime_ratio positive");
    }
    arrivals.push_back(arrival);
  }
  if (arrivals.empty()) {
    throw Error(ErrorKind::kInvalidArgument, csv.string() + " lists no job");
  }
  return arrivals;
}

RunResult simulate_concurrent(const WorkloadTrace& trace, PolicyKind kind,
                              const SimulationConfig& config,
                              const std::vector<JobArrival>& arrivals) {
  check_config(trace, config);
  std::unique_ptr<Policy> policy = make_policy(trace, kind, config);
  optimizer::Rng rng = run_rng(config);
  std::vector<JobArrival> jobs = arrivals;
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const auto& a, const auto& b) { return a.start_s < b.start_s; });

  struct Running {
    double end_s;
    std::size_t job;
    Choice choice;
    Outcome outcome;
    bool operator>(const Running& other) const {
      return end_s != other.end_s ? end_s > other.end_s : job > other.job;
    }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  RunResult result;
  result.history.resize(jobs.size());
  std::size_t next_job = 0;

  auto start = [&](std::size_t job, double now_s) {
    RecurrenceRecord& record = result.history[job];
    if (++record.tries > config.max_tries) {
      throw Error(ErrorKind::kInvalidArgument, "job " + std::to_string(job) +
                                                   " did not reach the target in " +
                                                   std::to_string(config.max_tries) + " tries");
    }
    const std::optional<double> threshold = policy->threshold();
    const Choice choice = policy->decide();
    const Outcome outcome = run_once(trace, trace.at_batch_size(choice.batch_size), choice,
                                     threshold, config.eta, rng, jobs[job].runtime_ratio);
    const double duration_s = jobs[job].end_s - jobs[job].start_s;
    running.push({now_s + duration_s, job, choice, outcome});
  };

  while (next_job < jobs.size() || !running.empty()) {
    const bool start_next =
        next_job < jobs.size() && (running.empty() || jobs[next_job].start_s < running.top().end_s);
    if (start_next) {
      result.history[next_job].recurrence = static_cast<int>(next_job);
      start(next_job, jobs[next_job].start_s);
      ++next_job;
      continue;
    }
    const Running done = running.top();
    running.pop();
    policy->report(done.choice, done.outcome);
    RecurrenceRecord& record = result.history[done.job];
    if (!done.outcome.never_ran) {
      record.batch_size = done.choice.batch_size;
      record.power_limit_w = done.choice.power_limit_w;
      record.profiled = done.choice.profile;
      record.energy_j += done.outcome.energy_j;
      record.time_s += done.outcome.time_s;
      record.cost += done.outcome.cost;
    }
    if (!done.outcome.reached) {
      if (!done.outcome.never_ran) {
        ++result.failed_runs;
      }
      start(done.job, done.end_s);  // retried at once, with the same duration
    }
  }
  return result;
}

CellSummary run_cell(const WorkloadTrace& trace, PolicyKind policy, const SimulationConfig& config,
                     const std::vector<std::uint64_t>& seeds, unsigned threads) {
  if (seeds.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "at least one seed is needed");
  }
  check_config(trace, config);
  const Oracle oracle = compute_oracle(trace, config.eta);
  CellSummary cell;
  cell.workload = trace.workload.dataset;
  cell.gpu = trace.gpu;
  cell.policy = std::string(policy_name(policy));
  cell.seeds = static_cast<int>(seeds.size());
  cell.recurrences = config.arrivals.empty() ? default_recurrences(trace, config)
                                             : static_cast<int>(config.arrivals.size());
  cell.oracle_batch_size = oracle.batch_size;
  cell.oracle_power_limit_w = oracle.power_limit_w;
  cell.notes = trace.notes;
  cell.runs.resize(seeds.size());

  struct PerSeed {
    double energy, energy_last10, time, time_last10, cost, regret;
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
      s.regret = run.total_cost() - oracle.expected_cost * static_cast<double>(run.history.size());
      cell.runs[i] = std::move(run);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  unsigned workers = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min<unsigned>(workers, static_cast<unsigned>(seeds.size()));
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
  for (const auto& error : errors) {
    if (error) {
      std::rethrow_exception(error);
    }
  }

  const auto mean_std = [&](auto member, double& mean, double& stddev) {
    double sum = 0.0;
    for (const PerSeed& s : per_seed) {
      sum += s.*member;
    }
    mean = sum / static_cast<double>(per_seed.size());
    double squares = 0.0;
    for (const PerSeed& s : per_seed) {
      squares += (s.*member - mean) * (s.*member - mean);
    }
    stddev =
        per_seed.size() > 1 ? std::sqrt(squares / static_cast<double>(per_seed.size() - 1)) : 0.0;
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
  for (const RunResult& run : cell.runs) {
    const auto final_config = run.final_configuration();
    ++finals[final_config];
    matches += final_config.first == oracle.batch_size ? 1 : 0;
    failed += run.failed_runs;
  }
  const auto modal =
      std::max_element(finals.begin(), finals.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  cell.final_batch_size = modal->first.first;
  cell.final_power_limit_w = modal->first.second;
  cell.final_matches_oracle_pct = 100.0 * matches / static_cast<double>(seeds.size());
  cell.failed_runs_mean = failed / static_cast<double>(seeds.size());
  return cell;
}

}  // namespace zeus::sim
