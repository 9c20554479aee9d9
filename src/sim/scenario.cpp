#include "sim/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "device/gpu_models.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"

namespace zeus::sim {

namespace fs = std::filesystem;

std::vector<std::string> scenario_gpus() {
  std::vector<std::string> keys;
  for (const device::GpuModelEntry& entry : device::gpu_models()) {
    if (entry.board && entry.workload) {
      keys.push_back(entry.key);
    }
  }
  return keys;
}

int samples_per_epoch(const std::string& dataset) {
  static const std::vector<std::pair<std::string, int>> sizes = {
      {"librispeech", 281000}, {"squad", 88000},    {"sentiment140", 160000},
      {"imagenet", 1281167},   {"cifar100", 50000}, {"movielens-1m", 1000000}};
  for (const auto& [name, samples] : sizes) {
    if (name == dataset) {
      return samples;
    }
  }
  return 100000;
}

// ---- WorkloadModel ----

WorkloadModel::WorkloadModel(WorkloadTrace trace)
    : trace_(std::move(trace)), samples_(samples_per_epoch(trace_.workload.dataset)) {}

PowerPoint WorkloadModel::at(int batch_size, double power_limit_w) const {
  const auto& points = trace_.at_batch_size(batch_size).power;  // ascending
  if (power_limit_w <= points.front().power_limit_w) {
    return points.front();
  }
  if (power_limit_w >= points.back().power_limit_w) {
    return points.back();
  }
  for (std::size_t i = 1; i < points.size(); ++i) {
    if (power_limit_w <= points[i].power_limit_w) {
      const PowerPoint& low = points[i - 1];
      const PowerPoint& high = points[i];
      const double f =
          (power_limit_w - low.power_limit_w) / (high.power_limit_w - low.power_limit_w);
      PowerPoint point;
      point.power_limit_w = static_cast<int>(std::lround(power_limit_w));
      point.time_per_epoch_s =
          low.time_per_epoch_s + f * (high.time_per_epoch_s - low.time_per_epoch_s);
      point.average_power_w =
          low.average_power_w + f * (high.average_power_w - low.average_power_w);
      return point;
    }
  }
  return points.back();
}

int WorkloadModel::steps_per_epoch(int batch_size) const {
  return std::max(1, (samples_ + batch_size - 1) / batch_size);
}

std::optional<int> WorkloadModel::target_epoch(int batch_size, std::size_t run) const {
  const auto& epochs = trace_.at_batch_size(batch_size).target_epochs;
  return epochs[run % epochs.size()];
}

optimizer::Rng run_stream(std::uint64_t seed, int recurrence) {
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(recurrence);
  return optimizer::Rng(optimizer::splitmix64(state));
}

// ---- Scenario ----

Scenario::Scenario(const ScenarioConfig& config, WorkloadModel model, std::string url,
                   fs::path work_dir)
    : config_(config), model_(std::move(model)), url_(std::move(url)), dir_(std::move(work_dir)) {
  const device::SimulatedGpuModel& gpu_model = device::simulated_gpu_model(config_.gpu_model);
  std::vector<std::shared_ptr<device::Gpu>> as_gpus;
  std::vector<int> physical;
  for (int i = 0; i < config_.gpus; ++i) {
    sim_gpus_.push_back(std::make_shared<device::SimulatedGpu>(gpu_model, i, clock_));
    as_gpus.push_back(sim_gpus_.back());
    physical.push_back(i);
  }
  gpus_ = device::Gpus(as_gpus, physical);
  monitor::ZeusMonitorOptions options;
  options.clock = clock_;
  options.cpu_indices = std::vector<int>{};
  options.start_sampler_thread = false;  // counter-less GPUs are sampled at every change
  monitor_ = std::make_shared<monitor::ZeusMonitor>(
      gpus_, std::vector<std::shared_ptr<device::Cpu>>{}, options);
  if (monitor_->sampler() != nullptr) {
    monitor_->sampler()->sample_once();
  }

  const WorkloadTrace& trace = model_.trace();
  spec_.job_id_prefix = "demo-" + trace.workload.dataset;
  if (config_.fixed_job_id) {
    spec_.job_id = spec_.job_id_prefix;  // a fresh database: a fixed, readable id
  }
  for (const auto& batch : trace.batch_sizes) {
    spec_.batch_sizes.push_back(batch.batch_size);
  }
  spec_.default_batch_size = trace.workload.default_batch_size;
  spec_.eta_knob = config_.eta;
  spec_.beta_knob = config_.beta > 0.0 ? std::optional<double>(config_.beta) : std::nullopt;
  spec_.target_metric = trace.workload.target_metric;
  spec_.higher_is_better_metric = trace.workload.higher_is_better;
  spec_.max_epochs = trace.workload.max_epochs;
  spec_.mab_seed = static_cast<std::int64_t>(config_.seed & 0x7fffffffffffffffULL);

  client_options_.retry.max_attempts = 4;
  client_options_.retry.initial_delay_s = 0.05;
  client_options_.retry.max_delay_s = 1.0;
}

RunRecord Scenario::train(int recurrence, int attempt, std::size_t run) {
  RunRecord record;
  record.recurrence = recurrence;
  record.attempt = attempt;

  bso::BatchSizeOptimizer bso(monitor_, gpus_, url_, spec_, client_options_);
  spec_.job_id = bso.job().job_id;  // the server's id when it assigned one
  max_power_w_ = bso.job().max_power_w;
  const int batch_size = bso.get_batch_size();
  record.batch_size = batch_size;
  record.trial_number = bso.trial()->trial_number;

  const int steps = model_.steps_per_epoch(batch_size);
  runtime::PowerLimitOptimizerOptions plo_options;
  plo_options.selector = std::make_shared<optimizer::ZeusCostSelector>(config_.eta, config_.gpus);
  // Short enough that every limit fits in one epoch even with few steps per epoch.
  plo_options.warmup_steps = std::clamp(steps / 20, 1, 10);
  plo_options.profile_steps = std::clamp(steps / 10, 2, 40);
  plo_options.profile_path = dir_ / fmt::format("plo-profile-bs{}.json", batch_size);
  plo_options.restore_on_signal = false;  // simulated GPUs: nothing to restore
  record.profiled = !fs::exists(plo_options.profile_path);
  runtime::PowerLimitOptimizer plo(monitor_, gpus_, plo_options);

  const std::optional<int> target_epoch = model_.target_epoch(batch_size, run);
  bso.on_train_begin();
  for (int epoch = 1;; ++epoch) {
    train_epoch(plo, batch_size, steps);
    plo.on_epoch_end();
    record.epochs = epoch;
    try {
      const bso::ReportResponse response = bso.on_evaluate(metric(epoch, target_epoch));
      if (response.stop_train) {
        record.outcome = "reached";
        record.message = response.message;
        break;
      }
    } catch (const bso::TrainFailedError& error) {
      record.message = error.response().message;
      record.outcome = record.message.find("cost upper bound") != std::string::npos
                           ? "early-stopped"
                           : "max-epochs";
      break;
    }
    if (epoch > spec_.max_epochs) {
      throw Error(ErrorKind::kUnknown,
                  fmt::format("the BSO server did not stop trial {} after {} epochs (max_epochs "
                              "is {})",
                              record.trial_number, epoch, spec_.max_epochs));
    }
  }
  record.power_limit_w = static_cast<int>(units::whole_watts_from_milliwatts(
      plo.optimal_power_limit_mw().value_or(sim_gpus_[0]->power_limit_mw())));
  record.energy_j = bso.energy_j();
  record.time_s = bso.time_s();
  record.cost = optimizer::zeus_cost(record.energy_j, record.time_s, config_.eta, max_power_w_);
  return record;  // the optimizers go: the limit is restored, the trial ended (PATCH /trials)
}

// The validation metric after `epoch` epochs of a run that reaches the target at
// `target_epoch`: it crosses the target exactly there.
double Scenario::metric(int epoch, std::optional<int> target_epoch) const {
  const double target = spec_.target_metric;
  const bool higher = spec_.higher_is_better_metric;
  if (!target_epoch) {  // never reaches it: approaches it from the wrong side
    const double gap = 0.05 + 0.5 / epoch;
    return higher ? target * (1.0 - gap) : target * (1.0 + gap);
  }
  const double progress = static_cast<double>(epoch) / *target_epoch;  // 1.0 exactly at target
  return higher ? target * progress : target / progress;
}

// Makes every GPU draw the model's power for `batch_size` at its current power limit.
void Scenario::apply_power(int batch_size, int steps) {
  const std::uint32_t limit_mw = sim_gpus_[0]->power_limit_mw();
  if (limit_mw == applied_limit_mw_ && batch_size == applied_batch_size_) {
    return;
  }
  const PowerPoint point = model_.at(batch_size, units::watts_from_milliwatts(limit_mw));
  for (const auto& gpu : sim_gpus_) {
    const device::SimulatedGpuModel& m = gpu->model();
    gpu->set_utilization((units::milliwatts_from_watts(point.average_power_w) - m.idle_power_mw) /
                         (static_cast<double>(m.peak_power_mw) - m.idle_power_mw));
  }
  if (monitor_->sampler() != nullptr) {
    monitor_->sampler()->sample_once();
  }
  step_time_s_ = point.time_per_epoch_s / steps;
  applied_limit_mw_ = limit_mw;
  applied_batch_size_ = batch_size;
}

// One epoch: step by step while the power-limit optimizer profiles, then the rest at once.
void Scenario::train_epoch(runtime::PowerLimitOptimizer& plo, int batch_size, int steps) {
  for (int step = 0; step < steps; ++step) {
    const bool profiling = !plo.optimal_power_limit_mw().has_value();
    if (step == 0 || profiling) {
      plo.on_step_begin();
      apply_power(batch_size, steps);
      clock_->advance_s(step_time_s_);
      continue;
    }
    apply_power(batch_size, steps);
    clock_->advance_s(step_time_s_ * (steps - step));
    break;
  }
}

// ---- The Default baseline ----

Totals default_recurrence(const WorkloadModel& model, const ScenarioConfig& config, int recurrence,
                          double max_power_w) {
  const WorkloadTrace& trace = model.trace();
  const int b0 = trace.workload.default_batch_size;
  const PowerPoint point = model.at(b0, model.max_power_limit_w());
  optimizer::Rng stream = run_stream(config.seed, recurrence);
  Totals totals;
  for (int attempt = 1; attempt <= config.max_tries; ++attempt) {
    const std::optional<int> target = model.target_epoch(b0, stream.below(model.runs()));
    const bool reached = target && *target <= trace.workload.max_epochs;
    const int epochs = reached ? *target : trace.workload.max_epochs;
    const double energy_j = epochs * point.energy_per_epoch_j() * config.gpus;
    const double time_s = epochs * point.time_per_epoch_s;
    totals.add(energy_j, time_s, optimizer::zeus_cost(energy_j, time_s, config.eta, max_power_w));
    if (reached) {
      break;
    }
  }
  return totals;
}

std::pair<int, int> most_chosen(const std::vector<RunRecord>& runs, int after_recurrence) {
  std::pair<int, int> final_config{0, 0};
  std::vector<std::pair<int, int>> chosen;
  for (const RunRecord& run : runs) {
    if (run.outcome == "reached" && run.recurrence > after_recurrence) {
      chosen.emplace_back(run.batch_size, run.power_limit_w);
    }
  }
  long best = 0;
  for (const auto& config : chosen) {
    const long count = std::count(chosen.begin(), chosen.end(), config);
    if (count >= best) {
      best = count;
      final_config = config;
    }
  }
  return final_config;
}

}  // namespace zeus::sim
