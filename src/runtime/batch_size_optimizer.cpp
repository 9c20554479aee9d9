// The training-run lifecycle of the batch-size optimizer (BatchSizeOptimizer): the monitor window
// around each epoch, the cumulative reports, the trial's end. The only part of the client that
// needs the monitor and device layers.
#include "zeus/runtime/batch_size_optimizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/log.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"

namespace zeus::bso {

TrainFailedError::TrainFailedError(ReportResponse response)
    : Error(ErrorKind::kUnknown, "Train failed: " + response.message +
                                     " This batch size will not be selected again. Please "
                                     "re-launch the training"),
      response_(std::move(response)) {}

void fill_gpu_config(JobSpec& spec, const device::Gpus& gpus, const std::vector<int>& gpu_indices) {
  if (gpu_indices.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the batch size optimizer needs the monitor to measure at least one GPU");
  }
  device::Gpu& first = gpus.at(gpu_indices.front());
  const std::string name = first.name();
  for (const int index : gpu_indices) {
    const std::string other = gpus.at(index).name();
    if (other != name) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("the batch size optimizer needs GPUs of one model, but GPU {} is "
                              "\"{}\" and GPU {} is \"{}\"",
                              gpu_indices.front(), name, index, other));
    }
  }
  const std::uint32_t max_mw = first.power_limit_constraints_mw().max_mw;
  // The reference sends max_mw // 1000 * count: whole watts, so that a job registered by the
  // Python client matches ours field for field.
  spec.max_power_w = static_cast<double>(units::whole_watts_from_milliwatts(max_mw)) *
                     static_cast<double>(gpu_indices.size());
  spec.number_of_gpus = static_cast<int>(gpu_indices.size());
  spec.gpu_model = name;
}

namespace {

// Checks the spec with the wire format's own validation (every bad field listed).
JobSpec validated(const JobSpec& spec) {
  try {
    return job_spec_from_json(nlohmann::json::parse(to_json(spec).dump()));
  } catch (const ValidationError& error) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("invalid batch size optimizer job: {}", error.what()));
  }
}

}  // namespace

BatchSizeOptimizer::BatchSizeOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor,
                                       const device::Gpus& gpus, const std::string& server_url,
                                       JobSpec job, ClientOptions options)
    : monitor_(std::move(monitor)),
      client_(server_url, std::move(options)),
      rank_(client_.options().rank) {
  if (monitor_ == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "the batch size optimizer needs a monitor");
  }
  fill_gpu_config(job, gpus, monitor_->gpu_indices());
  job_ = client_.register_job(validated(job), &job_created_);
  log().info("BSO: job {} {} at {} (batch sizes {})", *job_.job_id,
             job_created_ ? "created" : "registered again", client_.url().to_string(),
             fmt::join(job_.batch_sizes, ", "));
}

BatchSizeOptimizer::BatchSizeOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor,
                                       const std::string& server_url, JobSpec job,
                                       ClientOptions options)
    : BatchSizeOptimizer(std::move(monitor), device::get_gpus(), server_url, std::move(job),
                         std::move(options)) {}

BatchSizeOptimizer::~BatchSizeOptimizer() {
  try {
    end();
  } catch (const std::exception& error) {
    log().error("BSO: could not end trial {} of job {}: {}", trial_ ? trial_->trial_number : 0,
                job_.job_id.value_or(""), error.what());
  }
}

int BatchSizeOptimizer::get_batch_size() {
  if (trial_) {
    return trial_->batch_size;
  }
  if (rank_ != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("only rank 0 asks the BSO server for the batch size (this is rank "
                            "{}); pass rank 0's trial to set_trial()",
                            rank_));
  }
  TrialId trial = client_.next_batch_size(*job_.job_id);
  const bool known = std::find(job_.batch_sizes.begin(), job_.batch_sizes.end(),
                               trial.batch_size) != job_.batch_sizes.end();
  if (!known || trial.job_id != *job_.job_id) {
    const std::string route = "GET /jobs/batch_size";
    throw ServerError(
        ErrorKind::kUnknown, route, 200, "",
        fmt::format("BSO server {} answered a strange trial: job {} batch size {} (job {} has "
                    "batch sizes {})",
                    route, trial.job_id, trial.batch_size, *job_.job_id,
                    fmt::join(job_.batch_sizes, ", ")));
  }
  trial_ = std::move(trial);
  dispatched_here_ = true;
  log().info("BSO: trial {} of job {}: batch size {}", trial_->trial_number, *job_.job_id,
             trial_->batch_size);
  begin_implicitly();
  return trial_->batch_size;
}

// The reference lets rank 0 call on_evaluate() without on_train_begin(): measuring starts when
// the trial is handed out, and on_train_begin() restarts it from there when it is called.
void BatchSizeOptimizer::begin_implicitly() {
  if (window_open_ || training_finished_) {
    return;
  }
  try {
    monitor_->begin_window(kWindowName);
  } catch (const Error&) {
    return;  // another client on the same monitor measures: on_train_begin() will say so
  }
  window_open_ = true;
  implicit_window_ = true;
}

void BatchSizeOptimizer::set_trial(const TrialId& trial) {
  if (trial_) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("the BSO trial is already set (trial {}, batch size {})",
                            trial_->trial_number, trial_->batch_size));
  }
  const bool known = std::find(job_.batch_sizes.begin(), job_.batch_sizes.end(),
                               trial.batch_size) != job_.batch_sizes.end();
  if (trial.job_id != *job_.job_id || !known || trial.trial_number < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("set_trial: job {} batch size {} trial {} is not a trial of job {} "
                            "(batch sizes {})",
                            trial.job_id, trial.batch_size, trial.trial_number, *job_.job_id,
                            fmt::join(job_.batch_sizes, ", ")));
  }
  trial_ = trial;
}

void BatchSizeOptimizer::resume(const TrialId& trial, int epochs, double time_s, double energy_j) {
  if (epochs < 0 || !std::isfinite(time_s) || time_s < 0.0 || !std::isfinite(energy_j) ||
      energy_j < 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("resume: trial {} carries {} epochs, {} s and {} J; they must be "
                            "finite and not negative",
                            trial.trial_number, epochs, time_s, energy_j));
  }
  set_trial(trial);
  dispatched_here_ = true;
  current_epoch_ = epochs;
  time_s_ = time_s;
  energy_j_ = energy_j;
  log().info("BSO: trial {} of job {} (batch size {}) resumed after {} epochs, {:.3f} s, {:.3f} J",
             trial.trial_number, trial.job_id, trial.batch_size, epochs, time_s, energy_j);
  begin_implicitly();
}

std::optional<monitor::Measurement> BatchSizeOptimizer::suspend() {
  std::optional<monitor::Measurement> unfinished;
  if (ended_) {
    return unfinished;
  }
  ended_ = true;
  if (window_open_) {
    window_open_ = false;
    try {
      unfinished = monitor_->end_window(kWindowName, {.sync_execution = false});
    } catch (const std::exception& error) {
      log().warn("BSO: closing the measurement window: {}", error.what());
    }
  }
  return unfinished;
}

void BatchSizeOptimizer::on_train_begin() {
  if (!trial_) {
    throw Error(ErrorKind::kInvalidArgument,
                "on_train_begin: call get_batch_size() (rank 0) or set_trial() first");
  }
  if (training_finished_ || (window_open_ && !implicit_window_)) {
    return;
  }
  // Training starts here: a window opened when the trial was handed out starts again.
  monitor_->begin_window(kWindowName, {.restart = implicit_window_});
  window_open_ = true;
  implicit_window_ = false;
}

ReportResponse BatchSizeOptimizer::on_evaluate(double metric) {
  if (!trial_) {
    throw Error(ErrorKind::kInvalidArgument,
                "on_evaluate: call get_batch_size() (rank 0) or set_trial() first");
  }
  if (training_finished_) {
    return last_response_;
  }
  if (!window_open_) {
    throw Error(ErrorKind::kInvalidArgument, "on_evaluate: call on_train_begin() first");
  }
  if (implicit_window_ && current_epoch_ == 0) {
    log().info(
        "BSO: on_evaluate() before on_train_begin(): the first epoch is measured from "
        "get_batch_size()");
  }
  implicit_window_ = false;
  window_open_ = false;
  const monitor::Measurement measured = monitor_->end_window(kWindowName);
  ++current_epoch_;
  time_s_ += measured.time_s;
  energy_j_ += measured.total_energy_j();

  TrainingResult result;
  result.trial = *trial_;
  result.time_s = time_s_;
  result.energy_j = energy_j_;
  result.metric = metric;
  result.current_epoch = current_epoch_;
  try {
    last_response_ = client_.report(result);
  } catch (...) {
    // Keep measuring: a caller that goes on training after a failed report sends the cumulative
    // totals with the next one.
    monitor_->begin_window(kWindowName);
    window_open_ = true;
    throw;
  }
  if (!last_response_.stop_train) {
    monitor_->begin_window(kWindowName);
    window_open_ = true;
    return last_response_;
  }
  training_finished_ = true;
  log().info("BSO: trial {} of job {} stopped at epoch {}: {}", trial_->trial_number, *job_.job_id,
             current_epoch_, last_response_.message);
  if (!last_response_.converged) {
    throw TrainFailedError(last_response_);
  }
  return last_response_;
}

void BatchSizeOptimizer::end() {
  if (ended_) {
    return;
  }
  ended_ = true;
  if (window_open_) {
    window_open_ = false;
    try {
      monitor_->end_window(kWindowName, {.sync_execution = false, .cancel = true});
    } catch (const std::exception& error) {
      log().warn("BSO: closing the measurement window: {}", error.what());
    }
  }
  if (trial_ && dispatched_here_) {
    client_.end_trial(*trial_);
  }
}

}  // namespace zeus::bso
