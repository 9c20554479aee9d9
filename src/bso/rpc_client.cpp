// The batch-size-optimizer RPC client: the five routes, their bodies and their answers.
#include "zeus/bso/rpc_client.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <utility>

#include "bso/transport.hpp"

namespace zeus::bso {
namespace {

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
  const double exchange_s = options.exchange_timeout_s.value_or(1.0);
  if (!(exchange_s > 0.0) || !std::isfinite(exchange_s) || !(options.request_timeout_s > 0.0) ||
      !std::isfinite(options.request_timeout_s) || options.max_body_bytes == 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("BSO client: exchange_timeout_s and request_timeout_s must be positive "
                            "and finite, max_body_bytes > 0 (not {}, {}, {})",
                            exchange_s, options.request_timeout_s, options.max_body_bytes));
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

BsoClient::BsoClient(const std::string& server_url, ClientOptions options)
    : url_(ServerUrl::parse(server_url)), options_(std::move(options)) {
  check_options(options_);
  transport_ = std::make_unique<Transport>(url_, options_);
}

BsoClient::~BsoClient() = default;

JobSpec BsoClient::register_job(const JobSpec& spec, bool* created) {
  const std::string route = "POST /jobs";
  const Transport::Answer answer = transport_->request("POST", "/jobs", "", to_json(spec).dump());
  JobSpec stored = parse_answer(route, answer.status, answer.body, [](const nlohmann::json& json) {
    return job_spec_from_json(json);
  });
  if (!stored.job_id) {
    throw ServerError(ErrorKind::kUnknown, route, answer.status, answer.body,
                      fmt::format("BSO server {} answered {} without a job_id: {}", route,
                                  answer.status, quote_body(answer.body)));
  }
  // An answer names the policy only when it is not the paper's (so that a paper job's answer is
  // the reference's, and the reference's server knows no other policy).
  if (!stored.policy) {
    stored.policy = "zeus";
  }
  if (created != nullptr) {
    *created = answer.status == 201;
  }
  return stored;
}

TrialId BsoClient::next_batch_size(const std::string& job_id) {
  const Transport::Answer answer =
      transport_->request("GET", "/jobs/batch_size", "?job_id=" + encode_query_value(job_id), "");
  return parse_answer("GET /jobs/batch_size", answer.status, answer.body,
                      [](const nlohmann::json& json) { return trial_id_from_json(json); });
}

ReportResponse BsoClient::report(const TrainingResult& result) {
  const Transport::Answer answer =
      transport_->request("POST", "/report", "", to_json(result).dump());
  return parse_answer("POST /report", answer.status, answer.body,
                      [](const nlohmann::json& json) { return report_response_from_json(json); });
}

void BsoClient::end_trial(const TrialId& trial) {
  transport_->request("PATCH", "/trials", "", to_json(trial).dump());
}

bool BsoClient::delete_job(const std::string& job_id) {
  const Transport::Answer answer =
      transport_->request("DELETE", "/jobs", "?job_id=" + encode_query_value(job_id), "", {404});
  return answer.status != 404;
}

}  // namespace zeus::bso
