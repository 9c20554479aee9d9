// The built-in parametric workload models: the simulator's embedded default, needing no file.
// docs/workload-models.md states the formulas and explains the parameters.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "common/text.hpp"
#include "device/gpu_models.hpp"
#include "trace_internal.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/rng.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::sim {
namespace {

// The GPU side of the model comes from the one GPU catalogue (device/gpu_models.hpp).
using GpuModel = device::WorkloadGpuModel;

constexpr double kMinBestBatchSizeFactor = ConvergenceShift::kMinFactor;
constexpr double kMaxBestBatchSizeFactor = ConvergenceShift::kMaxFactor;

// Epoch time on the V100 at full clock: samples_per_epoch * (compute_s_per_sample +
// overhead_s_per_step / b). Only the compute part scales with the GPU's speed and clock.
struct ThroughputModel {
  double samples_per_epoch;
  double compute_s_per_sample;
  double overhead_s_per_step;  // input pipeline, launches, optimizer step: not GPU-clock bound
  double intensity;            // fraction of the GPU's dynamic power its kernels draw
};

// Epochs to target: min_epochs * (1 + small_penalty * L_small^2 + large_penalty * L_large^2) with
// L the log2 distance below / above best_batch_size; each run multiplies by (1 + noise * z).
struct ConvergenceModel {
  double min_epochs;
  double best_batch_size;
  double small_penalty;
  double large_penalty;
  double noise;
  int epoch_budget;  // a run needing more epochs than this never reaches the target (nullopt)
  int runs;          // training runs (seeds) per batch size
};

// How the epochs to target depend on the target metric: an inverse power law learning curve,
// gap(e) = |asymptote(b) - metric(e)| proportional to e^(-1/exponent), so reaching target T takes
// (gap(T0) / gap(T))^exponent times the epochs to the paper's target T0. Large batches level off
// further from the asymptote (the generalisation gap): asymptote(b) is worse by large_batch_gap
// per log2 step above best_batch_size. A target at or beyond asymptote(b) is never reached.
struct LearningCurve {
  bool higher_is_better;
  double asymptote;        // the metric a run at the best batch size approaches
  double exponent;         // epochs grow as gap^-exponent
  double large_batch_gap;  // metric units per log2 above best_batch_size
};

struct WorkloadModel {
  std::string_view dataset;
  std::string_view network;
  std::string_view optimizer;
  double target_metric;
  std::vector<int> batch_sizes;  // ascending
  ThroughputModel throughput;
  ConvergenceModel convergence;
  LearningCurve curve;
};

const std::vector<WorkloadModel>& workload_models() {
  static const std::vector<WorkloadModel> models = {
      {.dataset = "librispeech",
       .network = "deepspeech2",
       .optimizer = "adamw",
       .target_metric = 40.0,
       .batch_sizes = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256},
       .throughput = {281000, 0.0185, 0.12, 0.8},
       .convergence = {6.3, 12, 0.05, 0.032, 0.05, 30, 5},
       .curve = {false, 28.0, 1.3, 0.5}},
      {.dataset = "squad",
       .network = "bert_base_uncased",
       .optimizer = "adamw",
       .target_metric = 84.0,
       .batch_sizes = {4, 8, 12, 16, 24, 32, 48, 64},
       .throughput = {88000, 0.0195, 0.02, 1.0},
       .convergence = {3.9, 16, 0.03, 0.05, 0.06, 12, 10},
       .curve = {true, 86.0, 0.77, 0.1}},
      {.dataset = "sentiment140",
       .network = "bert_base_uncased",
       .optimizer = "adamw",
       .target_metric = 0.84,
       .batch_sizes = {8, 16, 32, 64, 128, 256},
       .throughput = {160000, 0.025, 0.2, 0.95},
       .convergence = {2.6, 32, 0.04, 0.03, 0.05, 10, 10},
       .curve = {true, 0.86, 0.75, 0.0}},
      {.dataset = "imagenet",
       .network = "resnet50",
       .optimizer = "adadelta",
       .target_metric = 0.65,
       .batch_sizes = {64, 128, 192, 256, 360, 512},
       .throughput = {1281167, 0.00272, 0.011, 0.95},
       .convergence = {20.5, 300, 0.37, 0.12, 0.05, 50, 5},
       .curve = {true, 0.72, 1.1, 0.01}},
      {.dataset = "cifar100",
       .network = "shufflenetv2",
       .optimizer = "adadelta",
       .target_metric = 0.6,
       .batch_sizes = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096},
       .throughput = {50000, 1.48e-4, 0.038, 0.8},
       .convergence = {16.5, 32, 0.36, 0.155, 0.06, 150, 5},
       .curve = {true, 0.68, 0.9, 0.003}},
      {.dataset = "movielens-1m",
       .network = "ncf",
       .optimizer = "adam",
       .target_metric = 0.41,
       .batch_sizes = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384},
       .throughput = {1000000, 6.5e-6, 0.0163, 0.1},
       .convergence = {4.0, 2048, 0.12, 0.01, 0.08, 20, 5},
       .curve = {true, 0.425, 0.75, 0.0}},
  };
  return models;
}

// ---- Deterministic noise: splitmix64 seeded by an FNV-1a hash of the cell's name ----

// Approximately standard normal (Irwin-Hall: the sum of 12 uniforms minus 6, within [-6, 6]).
// Plain arithmetic, so every platform draws the same values.
double standard_normal(std::uint64_t& state) {
  double sum = 0.0;
  for (int i = 0; i < 12; ++i) {
    sum += static_cast<double>(optimizer::splitmix64(state) >> 11) * 0x1.0p-53;
  }
  return sum - 6.0;
}

// ---- The model ----

double log2_distance(const ConvergenceModel& model, int batch_size) {
  return std::log2(static_cast<double>(batch_size) / model.best_batch_size);
}

double expected_epochs(const ConvergenceModel& model, int batch_size) {
  const double distance = log2_distance(model, batch_size);
  const double small = std::max(0.0, -distance);
  const double large = std::max(0.0, distance);
  return model.min_epochs *
         (1.0 + model.small_penalty * small * small + model.large_penalty * large * large);
}

// The metric a run of `batch_size` levels off at.
double asymptote(const WorkloadModel& model, const ConvergenceModel& convergence, int batch_size) {
  const LearningCurve& curve = model.curve;
  const double drop = curve.large_batch_gap * std::max(0.0, log2_distance(convergence, batch_size));
  return curve.higher_is_better ? curve.asymptote - drop : curve.asymptote + drop;
}

// The distance still to go from `metric` to the asymptote of `batch_size`, positive while the
// metric is reachable.
double remaining_gap(const WorkloadModel& model, const ConvergenceModel& convergence,
                     int batch_size, double metric) {
  const double level = asymptote(model, convergence, batch_size);
  return model.curve.higher_is_better ? level - metric : metric - level;
}

// How many times the epochs to the paper's target reaching `target` takes (nullopt: never).
std::optional<double> target_factor(const WorkloadModel& model, const ConvergenceModel& convergence,
                                    int batch_size, double target) {
  if (detail::same_metric(target, model.target_metric)) {
    return 1.0;  // the paper's target: the calibrated model itself
  }
  const double gap = remaining_gap(model, convergence, batch_size, target);
  if (!(gap > 0.0)) {
    return std::nullopt;
  }
  return std::pow(remaining_gap(model, convergence, batch_size, model.target_metric) / gap,
                  model.curve.exponent);
}

std::vector<std::optional<int>> target_epochs(const WorkloadModel& model,
                                              const ConvergenceModel& convergence, int batch_size,
                                              double target) {
  // Convergence does not depend on the GPU: every GPU sees the same runs, as in the paper's
  // train trace. A run keeps its noise draw at every target, so its learning curve is one curve:
  // it never reaches a harder target before an easier one.
  const std::optional<double> factor = target_factor(model, convergence, batch_size, target);
  const double expected = expected_epochs(convergence, batch_size);
  std::vector<std::optional<int>> epochs;
  for (int run = 1; run <= convergence.runs; ++run) {
    std::uint64_t state =
        text::fnv1a_64(std::string(model.dataset) + "/" + std::string(model.network) + "/" +
                       std::string(model.optimizer) + "#" + std::to_string(batch_size) + "#" +
                       std::to_string(run));
    const double z = standard_normal(state);
    if (!factor) {
      epochs.emplace_back(std::nullopt);
      continue;
    }
    // Compared before rounding: a target close to the asymptote needs more epochs than an int
    // holds.
    const double raw = expected * *factor * (1.0 + convergence.noise * z);
    if (!(raw < convergence.epoch_budget + 0.5)) {
      epochs.emplace_back(std::nullopt);
      continue;
    }
    const int epoch = std::max(1, static_cast<int>(std::lround(raw)));
    epochs.push_back(epoch <= convergence.epoch_budget ? std::optional<int>(epoch) : std::nullopt);
  }
  return epochs;
}

// Slowdown factor s in (0, 1] of the GPU's clock under `power_limit_w`: the largest s whose
// average power does not exceed the limit. At clock s the busy phase takes compute_s / s and draws
// static + dynamic * s^exponent; the overhead phase takes overhead_s and draws static. The average
// power rises with s, so bisection finds the clock.
double clock_scale(double compute_s, double overhead_s, double static_w, double dynamic_w,
                   double exponent, double power_limit_w) {
  const auto average_power_w = [&](double s) {
    const double busy_s = compute_s / s;
    return static_w + dynamic_w * std::pow(s, exponent) * busy_s / (busy_s + overhead_s);
  };
  if (average_power_w(1.0) <= power_limit_w) {
    return 1.0;
  }
  double low = 1e-3;
  double high = 1.0;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (low + high);
    (average_power_w(mid) <= power_limit_w ? low : high) = mid;
  }
  return low;
}

std::vector<PowerPoint> power_points(const WorkloadModel& model, const GpuModel& gpu,
                                     int batch_size) {
  const ThroughputModel& throughput = model.throughput;
  const double compute_s =
      throughput.samples_per_epoch * throughput.compute_s_per_sample / gpu.speed;
  const double overhead_s =
      throughput.samples_per_epoch / batch_size * throughput.overhead_s_per_step;
  const double dynamic_w = gpu.dynamic_power_w * throughput.intensity;
  std::vector<PowerPoint> points;
  for (const int limit_w : gpu.power_limits_w) {
    const double s = clock_scale(compute_s, overhead_s, gpu.static_power_w, dynamic_w,
                                 gpu.dvfs_exponent, limit_w);
    const double busy_s = compute_s / s;
    PowerPoint point;
    point.power_limit_w = limit_w;
    point.time_per_epoch_s = busy_s + overhead_s;
    point.average_power_w = gpu.static_power_w + dynamic_w * std::pow(s, gpu.dvfs_exponent) *
                                                     busy_s / point.time_per_epoch_s;
    points.push_back(point);
  }
  return points;
}

}  // namespace

WorkloadTrace builtin_trace(std::string_view gpu, const Workload& workload) {
  return builtin_trace(gpu, workload, ConvergenceShift{});
}

WorkloadTrace builtin_trace(std::string_view gpu, const Workload& workload,
                            const ConvergenceShift& shift) {
  check_trace_gpu(gpu);
  const GpuModel& gpu_model = *device::find_gpu_model(gpu)->workload;  // every trace GPU has one

  const WorkloadModel* model = nullptr;
  std::string known;
  for (const WorkloadModel& candidate : workload_models()) {
    if (candidate.dataset == workload.dataset && candidate.network == workload.network &&
        candidate.optimizer == workload.optimizer) {
      model = &candidate;
    }
    known += (known.empty() ? "" : ", ") + std::string(candidate.dataset) + "/" +
             std::string(candidate.network) + "/" + std::string(candidate.optimizer);
  }
  if (model == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "no built-in model for workload " +
                                                 detail::workload_label(workload) +
                                                 "; the built-in models are " + known);
  }
  if (!std::isfinite(workload.target_metric)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "the target metric of " + detail::workload_label(workload) + " must be a finite number");
  }
  if (workload.higher_is_better != model->curve.higher_is_better) {
    throw Error(ErrorKind::kInvalidArgument,
                "the metric of " + detail::workload_label(workload) + " is " +
                    (model->curve.higher_is_better ? "higher" : "lower") +
                    "-is-better in the built-in model, not " +
                    (workload.higher_is_better ? "higher" : "lower") + "-is-better");
  }
  if (!(shift.best_batch_size_factor >= kMinBestBatchSizeFactor &&
        shift.best_batch_size_factor <= kMaxBestBatchSizeFactor)) {
    std::ostringstream message;
    message << "the best batch size factor " << shift.best_batch_size_factor << " is outside ["
            << kMinBestBatchSizeFactor << ", " << kMaxBestBatchSizeFactor << "]";
    throw Error(ErrorKind::kInvalidArgument, message.str());
  }
  ConvergenceModel convergence = model->convergence;
  convergence.best_batch_size *= shift.best_batch_size_factor;

  WorkloadTrace trace;
  trace.workload = workload;
  trace.gpu = std::string(gpu);
  trace.source = "builtin";
  trace.max_power_w = gpu_model.power_limits_w.back();
  for (const int batch_size : model->batch_sizes) {
    BatchSizeTrace entry;
    entry.batch_size = batch_size;
    entry.target_epochs = target_epochs(*model, convergence, batch_size, workload.target_metric);
    entry.power = power_points(*model, gpu_model, batch_size);
    trace.batch_sizes.push_back(std::move(entry));
  }
  detail::collect_power_limits(trace);
  detail::cap_default_batch_size(trace, "the built-in model");
  std::ostringstream hint;
  hint << "the model's runs level off at " << model->curve.asymptote
       << " at best; choose an easier target";
  detail::check_target_reached(trace, hint.str());
  detail::check_default_converges(trace);
  return trace;
}

}  // namespace zeus::sim
