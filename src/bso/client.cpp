// The batch-size-optimizer client: HTTP with retries (BsoClient) and the training-run lifecycle
// (BatchSizeOptimizer).
#include "zeus/bso/client.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <utility>

#include "common/log.hpp"
#include "zeus/device/discovery.hpp"

namespace zeus::bso {
namespace {

constexpr std::size_t kMaxQuotedBody = 400;  // characters of a body quoted in an error

std::string quote_body(const std::string& body) {
  if (body.size() <= kMaxQuotedBody) {
    return body;
  }
  return body.substr(0, kMaxQuotedBody) + "... (" + std::to_string(body.size()) + " bytes)";
}

// The server's explanation: {"message": "..."} (logic errors), {"detail": "..."} (routing) or
// {"detail": [{"loc": [...], "msg": "..."}]} (validation); the raw body otherwise.
std::string server_message_of(const std::string& body) {
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    if (const auto message = parsed.find("message");
        message != parsed.end() && message->is_string()) {
      return message->get<std::string>();
    }
    if (const auto detail = parsed.find("detail"); detail != parsed.end()) {
      if (detail->is_string()) {
        return detail->get<std::string>();
      }
      if (detail->is_array()) {
        std::string text;
        for (const auto& item : *detail) {
          if (!text.empty()) {
            text += "; ";
          }
          if (item.is_object() && item.contains("msg")) {
            std::string location;
            for (const auto& part : item.value("loc", nlohmann::json::array())) {
              location += (location.empty() ? "" : ".") +
                          (part.is_string() ? part.get<std::string>() : part.dump());
            }
            text += location + ": " + item["msg"].dump();
          } else {
            text += item.dump();
          }
        }
        return text;
      }
    }
  }
  return quote_body(body);
}

ErrorKind kind_for_status(int status) {
  switch (status) {
    case 400:
    case 409:
    case 422:
      return ErrorKind::kInvalidArgument;
    case 404:
      return ErrorKind::kNotFound;
    case 401:
    case 403:
      return ErrorKind::kNoPermission;
    default:
      return ErrorKind::kUnknown;
  }
}

bool retryable_status(int status) {
  return status == 502 || status == 503 || status == 504;
}

// Percent-encoding of a query value (RFC 3986 unreserved characters kept).
std::string encode_query_value(const std::string& value) {
  std::string out;
  for (const unsigned char c : value) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

void check_options(const ClientOptions& options) {
  const RetryPolicy& retry = options.retry;
  if (!(options.timeout_s > 0.0) || !std::isfinite(options.timeout_s)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("BSO client: timeout_s must be positive, not {}", options.timeout_s));
  }
  if (retry.max_attempts < 1 || !(retry.initial_delay_s >= 0.0) || !(retry.max_delay_s >= 0.0) ||
      !(retry.multiplier >= 1.0) || !std::isfinite(retry.max_delay_s)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("BSO client: invalid retry policy (max_attempts {} must be >= 1, "
                            "initial_delay_s {} and max_delay_s {} >= 0 and finite, multiplier "
                            "{} >= 1)",
                            retry.max_attempts, retry.initial_delay_s, retry.max_delay_s,
                            retry.multiplier));
  }
  if (options.rank < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("BSO client: rank must be >= 0, not {}", options.rank));
  }
}

std::pair<time_t, time_t> split_seconds(double seconds) {
  const auto whole = static_cast<time_t>(seconds);
  const auto micro =
      static_cast<time_t>(std::llround((seconds - static_cast<double>(whole)) * 1e6));
  return {whole, micro};
}

// Seconds from a Retry-After header given in seconds (the HTTP-date form is ignored).
std::optional<double> retry_after_s(const std::string& value) {
  if (value.empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double seconds = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(seconds >= 0.0) || !std::isfinite(seconds)) {
    return std::nullopt;
  }
  return seconds;
}

template <typename Parse>
auto parse_answer(const std::string& route, int status, const std::string& body, Parse parse) {
  try {
    return parse(nlohmann::json::parse(body));
  } catch (const std::exception& error) {
    throw ServerError(ErrorKind::kUnknown, route, status, body,
                      fmt::format("BSO server {} answered {} with a malformed body ({}): {}", route,
                                  status, error.what(), quote_body(body)));
  }
}

}  // namespace

// ---- Errors ----

ServerError::ServerError(ErrorKind kind, std::string route, int status, std::string server_message,
                         const std::string& what)
    : Error(kind, what),
      route_(std::move(route)),
      status_(status),
      server_message_(std::move(server_message)) {}

TrainFailedError::TrainFailedError(ReportResponse response)
    : Error(ErrorKind::kUnknown, "Train failed: " + response.message +
                                     " This batch size will not be selected again. Please "
                                     "re-launch the training"),
      response_(std::move(response)) {}

// ---- URL ----

ServerUrl ServerUrl::parse(const std::string& url) {
  const auto fail = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("BSO server URL \"{}\": {}; expected http[s]://host[:port][/prefix]",
                             url, why));
  };
  ServerUrl parsed;
  std::string rest = url;
  if (const auto scheme_end = rest.find("://"); scheme_end != std::string::npos) {
    std::string scheme = rest.substr(0, scheme_end);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (scheme != "http" && scheme != "https") {
      throw fail("unknown scheme \"" + scheme + "\"");
    }
    parsed.scheme = scheme;
    parsed.port = scheme == "https" ? 443 : 80;
    rest = rest.substr(scheme_end + 3);
  }
  const auto path_start = rest.find('/');
  std::string authority = rest.substr(0, path_start);
  if (path_start != std::string::npos) {
    parsed.prefix = rest.substr(path_start);
    if (parsed.prefix.find_first_of("?#") != std::string::npos) {
      throw fail("a query or fragment is not allowed");
    }
    while (!parsed.prefix.empty() && parsed.prefix.back() == '/') {
      parsed.prefix.pop_back();
    }
  }
  if (authority.find('@') != std::string::npos) {
    throw fail("credentials in the URL are not supported (use the token option)");
  }
  std::string port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string::npos) {
      throw fail("unterminated IPv6 address");
    }
    parsed.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        throw fail("unexpected text after the IPv6 address");
      }
      port_text = after.substr(1);
    }
  } else {
    if (std::count(authority.begin(), authority.end(), ':') > 1) {
      throw fail("write an IPv6 address in brackets, e.g. http://[::1]:8000");
    }
    const auto colon = authority.rfind(':');
    parsed.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  if (parsed.host.empty()) {
    throw fail("no host");
  }
  if (!port_text.empty()) {
    const bool digits = std::all_of(port_text.begin(), port_text.end(),
                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    const long port =
        digits && port_text.size() <= 5 ? std::strtol(port_text.c_str(), nullptr, 10) : -1;
    if (port < 1 || port > 65535) {
      throw fail("invalid port \"" + port_text + "\"");
    }
    parsed.port = static_cast<int>(port);
  }
  return parsed;
}

std::string ServerUrl::to_string() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}{}", scheme, ipv6 ? "[" : "", host, ipv6 ? "]" : "", port,
                     prefix);
}

// ---- BsoClient ----

struct BsoClient::Transport {
  std::unique_ptr<httplib::ClientImpl> http;
  Transport(const ServerUrl& url, const ClientOptions& options) {
    if (url.scheme == "https") {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
      auto tls = std::make_unique<httplib::SSLClient>(url.host, url.port);
      if (!options.ca_cert_path.empty()) {
        tls->set_ca_cert_path(options.ca_cert_path);
      }
      tls->enable_server_certificate_verification(true);
      http = std::move(tls);
#else
      throw Error(ErrorKind::kNotSupported,
                  "BSO server URL " + url.to_string() +
                      ": this build's cpp-httplib has no TLS support; use http");
#endif
    } else {
      http = std::make_unique<httplib::ClientImpl>(url.host, url.port);
    }
    const auto [sec, usec] = split_seconds(options.timeout_s);
    http->set_connection_timeout(sec, usec);
    http->set_read_timeout(sec, usec);
    http->set_write_timeout(sec, usec);
    // One connection per request, as the reference client does: nothing stale to reuse after a
    // server restart.
    http->set_keep_alive(false);
    // Headers and body go out in two writes; without this the body can wait for a delayed ACK.
    http->set_tcp_nodelay(true);
  }
};

BsoClient::BsoClient(const std::string& server_url, ClientOptions options)
    : url_(ServerUrl::parse(server_url)), options_(std::move(options)) {
  check_options(options_);
  if (options_.token) {
    token_ = *options_.token;
  } else if (options_.env) {
    token_ = options_.env("ZEUS_BSO_TOKEN").value_or("");
  }
  if (!options_.sleep) {
    options_.sleep = [](double delay_s) {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    };
  }
  transport_ = std::make_unique<Transport>(url_, options_);
}

BsoClient::~BsoClient() = default;

BsoClient::Answer BsoClient::request(const std::string& method, const std::string& route_path,
                                     const std::string& query, const std::string& body,
                                     const std::vector<int>& accepted) {
  const std::string route = method + " " + route_path;
  const std::string target = url_.prefix + route_path + query;
  httplib::Headers headers;
  if (!token_.empty()) {
    headers.emplace("Authorization", "Bearer " + token_);
  }
  const RetryPolicy& retry = options_.retry;
  double delay_s = retry.initial_delay_s;
  const std::lock_guard lock(mutex_);
  for (int attempt = 1;; ++attempt) {
    httplib::Result result = [&] {
      if (method == "GET") {
        return transport_->http->Get(target, headers);
      }
      if (method == "POST") {
        return transport_->http->Post(target, headers, body, "application/json");
      }
      if (method == "PATCH") {
        return transport_->http->Patch(target, headers, body, "application/json");
      }
      return transport_->http->Delete(target, headers);
    }();

    std::string failure;  // why this attempt may be retried
    std::optional<double> server_delay_s;
    ErrorKind kind = ErrorKind::kIo;
    if (!result) {
      const httplib::Error error = result.error();
      if (error == httplib::Error::ConnectionTimeout) {
        failure = fmt::format("no connection within {} s", options_.timeout_s);
        kind = ErrorKind::kTimeout;
      } else if (error == httplib::Error::Read) {
        failure = fmt::format("no complete answer within {} s (or the connection was closed)",
                              options_.timeout_s);
        kind = ErrorKind::kTimeout;
      } else if (error == httplib::Error::Connection) {
        failure = "cannot connect (connection refused or host unreachable)";
      } else if (error == httplib::Error::SSLServerVerification ||
                 error == httplib::Error::SSLLoadingCerts) {
        // A certificate problem does not go away by waiting.
        failure = httplib::to_string(error);
        throw ServerError(ErrorKind::kIo, route, 0, failure,
                          fmt::format("BSO server {} at {}: {} (check ca_cert_path)", route,
                                      url_.to_string(), failure));
      } else {
        failure = httplib::to_string(error);
      }
    } else {
      const int status = result->status;
      if ((status >= 200 && status < 300) ||
          std::find(accepted.begin(), accepted.end(), status) != accepted.end()) {
        return {status, result->body};
      }
      const std::string message = server_message_of(result->body);
      if (!retryable_status(status)) {
        throw ServerError(kind_for_status(status), route, status, message,
                          fmt::format("BSO server {} at {} answered {}: {}", route,
                                      url_.to_string(), status, message));
      }
      failure = fmt::format("answered {}: {}", status, message);
      kind = ErrorKind::kUnknown;
      server_delay_s = retry_after_s(result->get_header_value("Retry-After"));
      if (attempt >= retry.max_attempts) {
        throw ServerError(kind, route, status, message,
                          fmt::format("BSO server {} at {} {} (gave up after {} attempt{})", route,
                                      url_.to_string(), failure, attempt, attempt == 1 ? "" : "s"));
      }
    }
    if (attempt >= retry.max_attempts) {
      throw ServerError(kind, route, 0, failure,
                        fmt::format("BSO server {} at {}: {} (gave up after {} attempt{})", route,
                                    url_.to_string(), failure, attempt, attempt == 1 ? "" : "s"));
    }
    const double pause_s =
        std::min(retry.max_delay_s, std::max(delay_s, server_delay_s.value_or(0.0)));
    log().warn("BSO server {} at {}: {}; retrying in {:.3g} s (attempt {} of {})", route,
               url_.to_string(), failure, pause_s, attempt + 1, retry.max_attempts);
    options_.sleep(pause_s);
    delay_s = std::min(retry.max_delay_s, delay_s * retry.multiplier);
  }
}

JobSpec BsoClient::register_job(const JobSpec& spec, bool* created) {
  const std::string route = "POST /jobs";
  const Answer answer = request("POST", "/jobs", "", to_json(spec).dump());
  JobSpec stored = parse_answer(route, answer.status, answer.body, [](const nlohmann::json& json) {
    return job_spec_from_json(json);
  });
  if (!stored.job_id) {
    throw ServerError(ErrorKind::kUnknown, route, answer.status, answer.body,
                      fmt::format("BSO server {} answered {} without a job_id: {}", route,
                                  answer.status, quote_body(answer.body)));
  }
  if (created != nullptr) {
    *created = answer.status == 201;
  }
  return stored;
}

TrialId BsoClient::next_batch_size(const std::string& job_id) {
  const Answer answer =
      request("GET", "/jobs/batch_size", "?job_id=" + encode_query_value(job_id), "");
  return parse_answer("GET /jobs/batch_size", answer.status, answer.body,
                      [](const nlohmann::json& json) { return trial_id_from_json(json); });
}

ReportResponse BsoClient::report(const TrainingResult& result) {
  const Answer answer = request("POST", "/report", "", to_json(result).dump());
  return parse_answer("POST /report", answer.status, answer.body,
                      [](const nlohmann::json& json) { return report_response_from_json(json); });
}

void BsoClient::end_trial(const TrialId& trial) {
  request("PATCH", "/trials", "", to_json(trial).dump());
}

bool BsoClient::delete_job(const std::string& job_id) {
  const Answer answer =
      request("DELETE", "/jobs", "?job_id=" + encode_query_value(job_id), "", {404});
  return answer.status != 404;
}

// ---- BatchSizeOptimizer ----

void fill_gpu_config(JobSpec& spec, const Gpus& gpus, const std::vector<int>& gpu_indices) {
  if (gpu_indices.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the batch size optimizer needs the monitor to measure at least one GPU");
  }
  Gpu& first = gpus.at(gpu_indices.front());
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
  spec.max_power_w = static_cast<double>(max_mw / 1000) * static_cast<double>(gpu_indices.size());
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

BatchSizeOptimizer::BatchSizeOptimizer(std::shared_ptr<WindowMonitor> monitor, const Gpus& gpus,
                                       const std::string& server_url, JobSpec job,
                                       ClientOptions options)
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

BatchSizeOptimizer::BatchSizeOptimizer(std::shared_ptr<WindowMonitor> monitor,
                                       const std::string& server_url, JobSpec job,
                                       ClientOptions options)
    : BatchSizeOptimizer(std::move(monitor), get_gpus(), server_url, std::move(job),
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
  return trial_->batch_size;
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

void BatchSizeOptimizer::on_train_begin() {
  if (!trial_) {
    throw Error(ErrorKind::kInvalidArgument,
                "on_train_begin: call get_batch_size() (rank 0) or set_trial() first");
  }
  if (training_finished_ || window_open_) {
    return;
  }
  monitor_->begin_window(kWindowName);
  window_open_ = true;
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
  window_open_ = false;
  const Measurement measured = monitor_->end_window(kWindowName);
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
      monitor_->end_window(kWindowName, /*sync_execution=*/false, /*cancel=*/true);
    } catch (const std::exception& error) {
      log().warn("BSO: closing the measurement window: {}", error.what());
    }
  }
  if (trial_ && dispatched_here_) {
    client_.end_trial(*trial_);
  }
}

}  // namespace zeus::bso
