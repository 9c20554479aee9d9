// The virtual-time scenario engine behind `zeus demo`: a recurring training job on simulated
// GPUs, driven through the production pieces (the BSO client against a running server, the
// just-in-time power-limit optimizer, ZeusMonitor) with the job's epoch time, power draw and
// epochs to target taken from the built-in workload models, and time advancing on a ManualClock.
// The Default baseline (b0 at the maximum power limit) is charged from the same model and the
// same runs, so that the two face the same luck.
//
// It is its own target, zeus::sim_scenario (sim + device + monitor + runtime + bso), so that the
// trace-driven simulator zeus::sim stays free of the runtime and the HTTP client; the CLI
// (src/cli/demo_command.cpp) only parses arguments, hosts the server child and prints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/optimizer/rng.hpp"
#include "zeus/runtime/batch_size_optimizer.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::sim {

// GPU models a scenario can run on: those with both a simulated board and a built-in workload
// model in the GPU catalogue (device/gpu_models.hpp), in its order.
std::vector<std::string> scenario_gpus();

// Training samples per epoch of each paper workload (the datasets' sizes, as in
// docs/workload-models.md); 100000 for any other dataset.
int samples_per_epoch(const std::string& dataset);

// The workload model: time and power per (batch size, power limit), epochs per run.
class WorkloadModel {
 public:
  explicit WorkloadModel(WorkloadTrace trace);

  const WorkloadTrace& trace() const { return trace_; }
  // Epoch time and average power of one GPU at `power_limit_w`, interpolated linearly between
  // the model's power limits (the power-limit optimizer's 25 W grid lands on them exactly).
  PowerPoint at(int batch_size, double power_limit_w) const;
  // ceil(samples per epoch / batch size), at least 1.
  int steps_per_epoch(int batch_size) const;
  // Training runs (seeds) per batch size.
  std::size_t runs() const { return trace_.batch_sizes.front().target_epochs.size(); }
  // The epoch at which run `run` of `batch_size` reaches the target (nullopt: never).
  std::optional<int> target_epoch(int batch_size, std::size_t run) const;
  int max_power_limit_w() const { return trace_.power_limits_w.back(); }

 private:
  WorkloadTrace trace_;
  int samples_;
};

// The run stream of one recurrence: which run (seed of the workload model) each try gets, the
// same for Zeus and for Default.
optimizer::Rng run_stream(std::uint64_t seed, int recurrence);

struct ScenarioConfig {
  int gpus = 1;
  std::string gpu_model = "v100";  // one of scenario_gpus()
  double eta = 0.5;
  double beta = 2.0;  // <= 0 disables early stopping
  std::uint64_t seed = 1;
  int max_tries = 20;
  // A fresh database: the job gets the fixed, readable id "demo-<dataset>". Otherwise the
  // server assigns one from that prefix.
  bool fixed_job_id = true;
};

// One training run.
struct RunRecord {
  int recurrence = 0;  // 1-based
  int attempt = 0;     // 1-based try within the recurrence
  int trial_number = 0;
  int batch_size = 0;
  int power_limit_w = 0;
  bool profiled = false;  // this run profiled the power limits (first run of its batch size)
  int epochs = 0;
  double energy_j = 0.0;  // all GPUs
  double time_s = 0.0;
  double cost = 0.0;
  std::string outcome;  // "reached", "early-stopped", "max-epochs"
  std::string message;  // the server's
};

struct Totals {
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
  void add(double energy, double time, double cost_value) {
    energy_j += energy;
    time_s += time;
    cost += cost_value;
  }
};

// The job on `config.gpus` simulated GPUs against the BSO server at `url`; power-limit profiles
// go to `work_dir`.
class Scenario {
 public:
  Scenario(const ScenarioConfig& config, WorkloadModel model, std::string url,
           std::filesystem::path work_dir);

  const device::Gpus& gpus() const { return gpus_; }
  const bso::JobSpec& spec() const { return spec_; }
  const WorkloadModel& model() const { return model_; }
  // The job's max power (the server's, W), known after the first train().
  double max_power_w() const { return max_power_w_; }

  // One training run of recurrence `recurrence`, as a training script would do it, with run
  // `run` of the workload model.
  RunRecord train(int recurrence, int attempt, std::size_t run);

 private:
  double metric(int epoch, std::optional<int> target_epoch) const;
  void apply_power(int batch_size, int steps);
  void train_epoch(runtime::PowerLimitOptimizer& plo, int batch_size, int steps);

  ScenarioConfig config_;
  WorkloadModel model_;
  std::string url_;
  std::filesystem::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::vector<std::shared_ptr<device::SimulatedGpu>> sim_gpus_;
  device::Gpus gpus_;
  std::shared_ptr<monitor::ZeusMonitor> monitor_;
  bso::JobSpec spec_;
  bso::ClientOptions client_options_;
  double max_power_w_ = 0.0;
  std::uint32_t applied_limit_mw_ = 0;
  int applied_batch_size_ = 0;
  double step_time_s_ = 0.0;
};

// Default: b0 at the maximum power limit, with the same runs as Zeus got in `recurrence`; a run
// that misses the target costs max_epochs and is retried (up to config.max_tries).
Totals default_recurrence(const WorkloadModel& model, const ScenarioConfig& config, int recurrence,
                          double max_power_w);

// The (batch size, power limit) chosen most often by the successful runs of recurrences after
// `after_recurrence` (ties: the latest); {0, 0} when there is none.
std::pair<int, int> most_chosen(const std::vector<RunRecord>& runs, int after_recurrence);

}  // namespace zeus::sim
