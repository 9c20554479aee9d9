// Workloads and their traces: what the simulator needs to know about one (workload, GPU) pair.
//
// Two sources fill the same structure: the reference's public trace files (summary_train.csv and
// summary_power_<gpu>.csv, see load_trace) and the project's built-in parametric workload models
// (builtin_trace), which are the simulator's embedded default.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::sim {

struct Workload {
  std::string dataset;    // "librispeech"
  std::string network;    // "deepspeech2"
  std::string optimizer;  // "adamw"
  double target_metric = 0.0;
  int max_epochs = 0;
  int default_batch_size = 0;  // b0
  bool higher_is_better = true;
};

// The six paper workloads (librispeech, squad, sentiment140, imagenet, cifar100, movielens-1m).
const std::vector<Workload>& paper_workloads();
// Throws zeus::Error(kInvalidArgument) listing the valid dataset names.
const Workload& paper_workload(std::string_view dataset);

// GPU models with public power traces: "v100", "a40", "rtx6000", "p100".
const std::vector<std::string>& trace_gpus();
// Throws zeus::Error(kInvalidArgument) listing them when `gpu` is not one.
void check_trace_gpu(std::string_view gpu);

struct PowerPoint {
  int power_limit_w = 0;
  double time_per_epoch_s = 0.0;
  double average_power_w = 0.0;
  double energy_per_epoch_j() const { return time_per_epoch_s * average_power_w; }
};

struct BatchSizeTrace {
  int batch_size = 0;
  // One entry per training run (seed): the 1-based epoch at which the target metric was first
  // reached, or nullopt when it never was.
  std::vector<std::optional<int>> target_epochs;
  // One entry per power limit, ascending by power limit.
  std::vector<PowerPoint> power;

  // The point for `power_limit_w`; nullptr when absent.
  const PowerPoint* at_power_limit(int power_limit_w) const;
};

struct WorkloadTrace {
  Workload workload;  // default_batch_size possibly capped (see notes)
  std::string gpu;
  std::vector<BatchSizeTrace> batch_sizes;  // ascending; only sizes present in both traces
  std::vector<int> power_limits_w;          // ascending, the union over batch sizes
  double max_power_w = 0.0;                 // the largest power limit in this GPU's power trace
  std::vector<std::string> notes;           // e.g. "b0 192 is not in the v100 trace; capped to 128"
  std::string source;                       // "builtin" or the trace directory

  const BatchSizeTrace& at_batch_size(int batch_size) const;  // throws kInvalidArgument
};

// Loads one (workload, GPU) from the reference's trace files in `trace_dir`. Errors (zeus::Error):
// kNotFound for a missing file (naming it); kInvalidArgument naming file and line for a malformed
// row, a missing column, or a workload with no rows. When b0 is not among the trace's batch sizes,
// b0 becomes the largest trace batch size below it (the reference's capping rule) and a note says
// so. Throws kInvalidArgument when b0 never reaches the target in any run.
WorkloadTrace load_trace(const std::filesystem::path& trace_dir, std::string_view gpu,
                         const Workload& workload);

// The same, for many cells: reads each file once.
class TraceDirectory {
 public:
  explicit TraceDirectory(std::filesystem::path trace_dir);
  WorkloadTrace load(std::string_view gpu, const Workload& workload) const;

 private:
  struct Data;
  std::filesystem::path dir_;
  std::shared_ptr<const Data> data_;
};

// The built-in parametric model of `workload` on `gpu` (any of trace_gpus()): deterministic,
// needs no file. See docs/workload-models.md for the model. Any finite target metric: the
// epochs to a target other than the paper's follow each workload's learning curve. Throws
// kInvalidArgument for a non-finite target, a metric direction that is not the model's, and a
// target that no batch size (or b0) reaches.
WorkloadTrace builtin_trace(std::string_view gpu, const Workload& workload);

// A change to a built-in model's convergence: the drift scenarios (`zeus sim --drift`).
struct ConvergenceShift {
  // Beyond these every batch size of a model is many log2 steps from the best, and the model
  // says nothing useful.
  static constexpr double kMinFactor = 1.0 / 1024.0;
  static constexpr double kMaxFactor = 1024.0;
  double best_batch_size_factor = 1.0;  // the best batch size times this, in [kMin, kMaxFactor]
};
WorkloadTrace builtin_trace(std::string_view gpu, const Workload& workload,
                            const ConvergenceShift& shift);

}  // namespace zeus::sim
