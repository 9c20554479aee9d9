// The batch-size-optimizer RPC client: the five routes of the wire protocol (docs/bso-server.md),
// one call each, over HTTP with retries, timeouts, an optional bearer token and errors that name
// the route, the status and the server's message. No device or monitor code: the training-run
// lifecycle on top of it (BatchSizeOptimizer) is zeus/runtime/batch_size_optimizer.hpp. See
// docs/bso-client.md.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "zeus/bso/wire.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/env.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"

namespace zeus::bso {

class Transport;  // src/bso/transport.hpp

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
  // All of one attempt (connect, request, the whole answer), however slowly the server answers:
  // past it the attempt fails (kTimeout) and is not retried. Unset: 3 × timeout_s (15 s).
  std::optional<double> exchange_timeout_s;
  // All of one request: its attempts and the pauses between them.
  double request_timeout_s = outside_services::kBsoRequestTimeoutS;
  // A larger answer fails the request (kIo), read no further than that.
  std::size_t max_body_bytes = outside_services::kBsoMaxBodyBytes;
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
  // What the pauses between attempts sleep on; the steady clock when null (tests pass a
  // ManualClock, whose sleeps return at once).
  std::shared_ptr<Clock> clock;
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
  ServerUrl url_;
  ClientOptions options_;
  std::unique_ptr<Transport> transport_;  // the retries; requests are serialised there
};

}  // namespace zeus::bso
