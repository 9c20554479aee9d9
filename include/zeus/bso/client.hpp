// The batch-size-optimizer client: the reference's Python `BatchSizeOptimizer(monitor,
// server_url, job, rank)` in C++, plus what the reference lacks: retries with exponential backoff,
// configurable timeouts, an optional bearer token and errors that name the route, the status and
// the server's message. See docs/bso-client.md.
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

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/bso/wire.hpp"
#include "zeus/common/env.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus::bso {

// Retries of one request. Only failures that say nothing reached the application are retried:
// connection errors (refused, reset, unreachable), timeouts, and HTTP 502, 503 and 504. Attempt
// k (k >= 1) is followed by a pause of min(max_delay_s, initial_delay_s * multiplier^(k-1)), or
// the server's Retry-After (capped the same way) when it is longer.
//
// A retried request may have been processed the first time (a timeout while the answer was on
// its way). The routes tolerate it: registering an identical job answers 200, a repeated final
// report answers "already reported" with the stored outcome, ending a trial twice is a no-op. A
// repeated GET /jobs/batch_size leaves the first trial dispatched until someone ends it; the
// alternative, failing the run, would leave it exactly the same.
struct RetryPolicy {
  int max_attempts = 6;  // >= 1; 1 means no retry
  double initial_delay_s = 0.5;
  double max_delay_s = 8.0;
  double multiplier = 2.0;  // >= 1
};

struct ClientOptions {
  // Connection, read and write timeout of each attempt (the reference's httpx default).
  double timeout_s = 5.0;
  RetryPolicy retry;
  // Sent as `Authorization: Bearer <token>`. Unset: ZEUS_BSO_TOKEN from `env` when set and not
  // empty; otherwise no Authorization header.
  std::optional<std::string> token;
  // This process's rank in data-parallel training. Only rank 0 asks for the batch size; the
  // others get the trial out of band (BatchSizeOptimizer::set_trial).
  int rank = 0;
  EnvLookup env = process_env();
  // https: the CA certificate(s) (PEM file) that sign the server's certificate; the system's
  // store when empty. The certificate is always verified.
  std::string ca_cert_path;
  // How to wait between attempts (tests record the delays instead of sleeping).
  std::function<void(double delay_s)> sleep;
};

// A request the server answered with a non-2xx status, a 2xx whose body could not be parsed, or
// no answer at all after every attempt. what() names the route ("POST /report"), the status and
// the server's message ({"message"} or {"detail"}) or the transport failure.
//
// Kinds: 400, 409, 422 -> kInvalidArgument; 404 -> kNotFound; 401, 403 -> kNoPermission; a
// timeout -> kTimeout; no connection or a certificate that does not verify -> kIo; anything else
// (5xx, malformed body) -> kUnknown.
class ServerError : public Error {
 public:
  ServerError(ErrorKind kind, std::string route, int status, std::string server_message,
              const std::string& what);
  const std::string& route() const noexcept { return route_; }
  // 0 when no response came back.
  int status() const noexcept { return status_; }
  // The server's {"message"} or {"detail"} text (the raw body when neither), or the transport
  // error when there was no response.
  const std::string& server_message() const noexcept { return server_message_; }

 private:
  std::string route_;
  int status_;
  std::string server_message_;
};

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

// A server base URL: "http[s]://host[:port][/prefix]" (no scheme means http). Trailing slashes
// are dropped, so "http://h:8000/bso/" and "http://h:8000/bso" are the same.
struct ServerUrl {
  std::string scheme = "http";  // "http" or "https"
  std::string host;             // without brackets for IPv6 literals
  int port = 80;                // 80 (http) or 443 (https) when not given
  std::string prefix;           // "" or "/bso" (leading slash, no trailing slash)

  // Throws Error(kInvalidArgument) quoting `url` for anything else.
  static ServerUrl parse(const std::string& url);
  // "http://host:port/prefix".
  std::string to_string() const;
};

// The five routes of the wire protocol, one call each, with retries. Thread-safe (requests are
// serialised).
class BsoClient {
 public:
  explicit BsoClient(const std::string& server_url, ClientOptions options = {});
  ~BsoClient();
  BsoClient(const BsoClient&) = delete;
  BsoClient& operator=(const BsoClient&) = delete;

  // POST /jobs: the job as stored (job_id set, batch sizes sorted); `created` tells 201 from 200.
  JobSpec register_job(const JobSpec& spec, bool* created = nullptr);
  // GET /jobs/batch_size?job_id=...: dispatches a new trial.
  TrialId next_batch_size(const std::string& job_id);
  // POST /report.
  ReportResponse report(const TrainingResult& result);
  // PATCH /trials: a trial that has not finished becomes failed.
  void end_trial(const TrialId& trial);
  // DELETE /jobs?job_id=...: false when the server had no such job (404).
  bool delete_job(const std::string& job_id);

  const ServerUrl& url() const { return url_; }
  const ClientOptions& options() const { return options_; }

 private:
  struct Transport;
  struct Answer {
    int status = 0;
    std::string body;
  };
  // One route with retries; returns a 2xx answer, or the statuses listed in `accepted`; throws
  // ServerError otherwise.
  Answer request(const std::string& method, const std::string& route_path, const std::string& query,
                 const std::string& body, const std::vector<int>& accepted = {});

  ServerUrl url_;
  ClientOptions options_;
  std::string token_;
  std::mutex mutex_;
  std::unique_ptr<Transport> transport_;
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
  BatchSizeOptimizer(std::shared_ptr<WindowMonitor> monitor, const Gpus& gpus,
                     const std::string& server_url, JobSpec job, ClientOptions options = {});
  // The same with the process-wide GPUs (get_gpus()), as a default-constructed ZeusMonitor uses.
  BatchSizeOptimizer(std::shared_ptr<WindowMonitor> monitor, const std::string& server_url,
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
  std::shared_ptr<WindowMonitor> monitor_;
  BsoClient client_;
  int rank_;
  JobSpec job_;
  bool job_created_ = false;
  std::optional<TrialId> trial_;
  bool dispatched_here_ = false;  // this process obtained the trial: it ends it
  bool ended_ = false;
  bool window_open_ = false;
  bool training_finished_ = false;
  int current_epoch_ = 0;
  double time_s_ = 0.0;
  double energy_j_ = 0.0;
  ReportResponse last_response_;
};

// The GPU part of a JobSpec for `gpu_indices` of `gpus` (see the constructor above). Throws
// Error(kInvalidArgument) for no GPU or GPUs of different models.
void fill_gpu_config(JobSpec& spec, const Gpus& gpus, const std::vector<int>& gpu_indices);

}  // namespace zeus::bso
