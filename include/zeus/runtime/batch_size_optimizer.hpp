// The batch-size optimizer's training callback, beside the power-limit optimizer's
// (zeus/runtime/power_limit_optimizer.hpp): the reference's Python `BatchSizeOptimizer(monitor,
// server_url, job, rank)` in C++ (target zeus::bso, namespace zeus::bso as before), on top of
// the RPC client (zeus/bso/rpc_client.hpp: retries with exponential backoff, timeouts, bearer
// token, errors naming the route). See docs/bso-client.md.
//
// Lifecycle of one training run (one process):
//
//   BatchSizeOptimizer bso(monitor, gpus, "http://bso:8000", spec);  // POST /jobs
//   const int batch_size = bso.get_batch_size();                     // GET /jobs/batch_size
//   bso.on_train_begin();                                            // opens a monitor window
//   for (each epoch) { train(); bso.on_evaluate(metric); if (bso.training_finished()) break; }
//   // destructor (or end()): PATCH /trials, which marks a trial that never finished as failed
//
// on_evaluate() throws TrainFailedError when the server stops the trial without convergence
// (early stopping on cost, or max_epochs reached): relaunch the job and the server will try
// another batch size.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/bso/rpc_client.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::bso {

// The server stopped the trial without convergence (the reference's ZeusBSOTrainFailError): the
// cost exceeded beta * min_cost, or max_epochs passed. The batch size will not be dispatched again
// during pruning; relaunch the job.
class TrainFailedError : public Error {
 public:
  explicit TrainFailedError(ReportResponse response);
  const ReportResponse& response() const noexcept { return response_; }

 private:
  ReportResponse response_;
};

// One training run's batch-size optimizer (see the top of this file).
class BatchSizeOptimizer {
 public:
  // Registers `job` (POST /jobs). The GPU configuration of the spec is filled in from the
  // monitored GPUs: max_power = the first GPU's maximum power limit in whole watts (rounded down,
  // as the reference does) times their number, number_of_gpus, gpu_model = the first GPU's name.
  // `gpus` are the GPUs the monitor's indices refer to. Throws Error(kInvalidArgument) when the
  // monitor has no GPU, the GPUs are not all the same model, or the spec is invalid (every bad
  // field listed), and ServerError when registration fails.
  BatchSizeOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor, const device::Gpus& gpus,
                     const std::string& server_url, JobSpec job, ClientOptions options = {});
  // The same with the process-wide GPUs (get_gpus()), as a default-constructed ZeusMonitor uses.
  BatchSizeOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor, const std::string& server_url,
                     JobSpec job, ClientOptions options = {});
  // end(); errors are logged, never thrown.
  ~BatchSizeOptimizer();
  BatchSizeOptimizer(const BatchSizeOptimizer&) = delete;
  BatchSizeOptimizer& operator=(const BatchSizeOptimizer&) = delete;

  // The batch size to train with. Rank 0 only (Error(kInvalidArgument) otherwise). The first call
  // dispatches a trial (GET /jobs/batch_size); later calls return it without a request. Throws
  // ServerError when the server answers a batch size the job does not have.
  int get_batch_size();
  // For ranks != 0: the trial rank 0 obtained, received out of band. Throws
  // Error(kInvalidArgument) when it is not a trial of this job, or a trial is already set.
  void set_trial(const TrialId& trial);

  // Opens the measurement window. Needs a trial (get_batch_size() or set_trial()).
  void on_train_begin();
  // After each epoch's evaluation: closes the window, adds its time and GPU energy to the run's
  // totals and reports them (POST /report) with `metric`. When the server says to go on, the
  // window is reopened; when it says to stop, training_finished() becomes true and, if the trial
  // did not converge, TrainFailedError is thrown. When the report fails (ServerError), the window
  // is reopened before the error propagates, so a caller may go on training and the next report
  // carries the totals so far. After training finished this is a no-op that returns the last
  // response.
  ReportResponse on_evaluate(double metric);
  // Ends the trial this process dispatched (PATCH /trials) and closes the window if open. Once
  // only; the destructor calls it. Throws ServerError when the server cannot be reached.
  void end();

  // Interruption and resumption (zeus_cpp's, not the reference's; docs/python-optimizers.md):
  // suspend() leaves an undecided trial open on the server for a later run to resume: it closes
  // the window (returning what it measured since the last report, which is not added to the
  // totals: the resumed run repeats that epoch) and makes end() a no-op, so no PATCH /trials
  // marks the trial failed. nullopt when no window was open.
  std::optional<monitor::Measurement> suspend();
  // Continues `trial`, dispatched to an earlier run of this job that reported `epochs` epochs,
  // `time_s` and `energy_j` (its totals) before it was interrupted: the next report carries
  // them plus this run's. This process then ends the trial as if it had dispatched it. Throws
  // Error(kInvalidArgument) as set_trial() does, or for negative or non-finite totals.
  void resume(const TrialId& trial, int epochs, double time_s, double energy_j);

  // The job as the server stored it (job_id set).
  const JobSpec& job() const { return job_; }
  bool job_created() const { return job_created_; }  // 201 (new job) rather than 200
  const std::optional<TrialId>& trial() const { return trial_; }
  bool training_finished() const { return training_finished_; }
  int current_epoch() const { return current_epoch_; }
  // Totals so far over this run's windows: what the last report carried.
  double time_s() const { return time_s_; }
  double energy_j() const { return energy_j_; }
  BsoClient& client() { return client_; }

  static constexpr const char* kWindowName = "__zeus_bso_client";

 private:
  // Opens the measurement window when the trial is handed out (get_batch_size, resume), so that
  // on_evaluate() works without on_train_begin(), as in the reference.
  void begin_implicitly();

  std::shared_ptr<monitor::WindowMonitor> monitor_;
  BsoClient client_;
  int rank_;
  JobSpec job_;
  bool job_created_ = false;
  std::optional<TrialId> trial_;
  bool dispatched_here_ = false;  // this process obtained the trial: it ends it
  bool ended_ = false;
  bool window_open_ = false;
  bool implicit_window_ = false;  // opened when the trial was handed out (begin_implicitly)
  bool training_finished_ = false;
  int current_epoch_ = 0;
  double time_s_ = 0.0;
  double energy_j_ = 0.0;
  ReportResponse last_response_;
};

// The GPU part of a JobSpec for `gpu_indices` of `gpus` (see the constructor above). Throws
// Error(kInvalidArgument) for no GPU or GPUs of different models.
void fill_gpu_config(JobSpec& spec, const device::Gpus& gpus, const std::vector<int>& gpu_indices);

}  // namespace zeus::bso
