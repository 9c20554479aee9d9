#include "server/http_server.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "bso/wire_text.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"

namespace zeus::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Client bytes may reach an error message: never let serialising it throw.
template <typename Json>
std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void send_json(http::Response& res, int status, std::string body) {
  res.status = status;
  res.content_type = "application/json";
  res.body = std::move(body);
}

void send_message(http::Response& res, int status, const std::string& message) {
  send_json(res, status, dump(json{{"message", message}}));
}

void send_detail(http::Response& res, int status, const std::string& detail) {
  send_json(res, status, dump(json{{"detail", detail}}));
}

// No route: {"detail"} as FastAPI answers, without an Allow header.
void not_found(const http::Request&, http::Response& res) {
  send_detail(res, 404, "Not Found");
}

void method_not_allowed(const http::Request&, http::Response& res,
                        const std::vector<std::string>& /*allowed*/) {
  send_detail(res, 405, "Method Not Allowed");
}

// "//jobs//batch_size/" -> "/jobs/batch_size"
std::string normalize_path(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (const char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') {
      continue;
    }
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') {
    out.pop_back();
  }
  return out.empty() ? "/" : out;
}

bso::ValidationError query_error(const std::string& name, const std::string& message,
                                 const std::string& type) {
  return bso::ValidationError({{{"query", name}, message, type, nullptr}});
}

// The required query parameter, or a 422 in FastAPI's shape.
std::string query_param(const http::Request& req, const std::string& name) {
  auto value = req.param(name);
  if (!value) {
    throw query_error(name, "field required", "value_error.missing");
  }
  if (!is_valid_utf8(*value)) {
    throw query_error(name, "the value is not valid UTF-8 (percent-encode UTF-8 text)",
                      "value_error.str.utf8");
  }
  return *value;
}

// An optional whole-number query parameter from `low` to `high` (`fallback` when absent), or a
// 422 naming the range and `what` it is.
long long whole_number_param(const http::Request& req, const std::string& name, long long low,
                             long long high, long long fallback, const std::string& what) {
  if (!req.has_param(name)) {
    return fallback;
  }
  const std::string text = query_param(req, name);
  long long parsed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (error != std::errc() || end != text.data() + text.size() || parsed < low || parsed > high) {
    throw query_error(name,
                      "ensure " + name + " is a whole number from " + std::to_string(low) + " to " +
                          std::to_string(high) + " " + what,
                      "value_error.number.not_le");
  }
  return parsed;
}

// The status of a refusal by the service. The kind's usual status, except where the reference's
// server answers otherwise (its clients key on these): an unknown job or trial of a dispatch or
// a report is 400, not 404; a report for a trial marked failed is 400; a job with nothing left
// to dispatch, or one deleted while it was being registered, is 500.
int status_for(const ServiceError& error, std::string_view route) {
  struct Exception {
    std::string_view route;
    ErrorKind kind;
    int status;
  };
  static constexpr Exception kReferenceStatuses[] = {
      {"GET /jobs/batch_size", ErrorKind::kNotFound, 400},
      {"GET /jobs/batch_size", ErrorKind::kConflict, 500},
      {"POST /report", ErrorKind::kNotFound, 400},
      {"POST /report", ErrorKind::kConflict, 400},
      {"POST /jobs", ErrorKind::kConflict, 500},
  };
  for (const Exception& exception : kReferenceStatuses) {
    if (exception.route == route && exception.kind == error.kind()) {
      return exception.status;
    }
  }
  switch (error.kind()) {
    case ErrorKind::kInvalidArgument:
      return 400;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kAlreadyExists:
    case ErrorKind::kConflict:
      return 409;
    case ErrorKind::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

template <typename T>
ordered_json optional_json(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

// Infinite precisions (all observations equal) as "inf": JSON has no infinity.
ordered_json number_or_text(double value) {
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  return value;
}

json body_of(const http::Request& req) {
  if (req.body.empty()) {
    throw bso::ValidationError({{{"body"}, "field required", "value_error.missing", nullptr}});
  }
  return bso::parse_body(req.body);
}

}  // namespace

// A job's spec as the server answers it. The paper's policy is not named, so that a job on it is
// answered exactly as the reference answers (its clients compare the spec's fields); an absent
// `policy` in an answer means "zeus" (optimizer::default_batch_size_policy_name()). A job on
// another policy names it.
ordered_json response_spec(const bso::JobSpec& spec) {
  bso::JobSpec shown = spec;
  if (shown.policy == optimizer::default_batch_size_policy_name()) {
    shown.policy.reset();
  }
  return bso::to_json(shown);
}

nlohmann::ordered_json to_json(const JobState& state) {
  ordered_json out;
  out["job_id"] = state.job_id;
  out["spec"] = response_spec(state.spec);
  out["stage"] = state.stage;
  out["min_cost"] = optional_json(state.min_cost);
  out["min_cost_batch_size"] = state.min_cost_batch_size;
  out["cost_threshold"] = optional_json(state.cost_threshold);
  out["created_ms"] = state.created_ms;
  ordered_json arms = ordered_json::array();
  for (const ArmSummary& summary : state.arms) {
    ordered_json entry;
    entry["batch_size"] = summary.batch_size;
    entry["param_mean"] = number_or_text(summary.arm.param_mean);
    entry["param_precision"] = number_or_text(summary.arm.param_precision);
    entry["reward_precision"] = number_or_text(summary.arm.reward_precision);
    entry["num_observations"] = summary.arm.observations;
    arms.push_back(std::move(entry));
  }
  // A policy other than the paper's has no Gaussian posterior to show: its own estimate of one
  // run's cost per batch size.
  for (const optimizer::ArmView& view : state.arm_views) {
    ordered_json entry;
    entry["batch_size"] = view.batch_size;
    entry["num_observations"] = view.observations;
    entry["mean_cost"] = number_or_text(view.mean_cost);
    arms.push_back(std::move(entry));
  }
  out["arms"] = std::move(arms);
  ordered_json list = ordered_json::array();
  for (const TrialSummary& summary : state.trials) {
    const TrialRecord& trial = summary.record;
    ordered_json entry;
    entry["trial_number"] = trial.trial_number;
    entry["batch_size"] = trial.batch_size;
    entry["type"] = trial.type;
    entry["status"] = trial.status;
    entry["start_ms"] = trial.start_ms;
    entry["end_ms"] = optional_json(trial.end_ms);
    entry["time"] = optional_json(trial.time_s);
    entry["energy"] = optional_json(trial.energy_j);
    entry["metric"] = optional_json(trial.metric);
    entry["epochs"] = optional_json(trial.epochs);
    entry["converged"] = optional_json(trial.converged);
    if (summary.cost) {
      entry["cost"] = *summary.cost;
    }
    if (summary.cost_threshold) {
      entry["cost_threshold"] = *summary.cost_threshold;
    }
    list.push_back(std::move(entry));
  }
  out["trials"] = std::move(list);
  if (state.trials_next) {
    out["trials_next"] = *state.trials_next;
  }
  return out;
}

HttpServer::HttpServer(BsoService& service, HttpServerOptions options)
    : service_(service),
      options_(std::move(options)),
      registrations_(options_.max_registrations_per_minute) {
  http::HostOptions host;
  host.name = "zeus bso";
  host.limits = options_.limits;
  host.limits.max_body_bytes = options_.max_body_bytes;
  host.worker_threads = options_.threads < 1 ? 1 : options_.threads;
  host.listen_backlog = options_.listen_backlog;
  host.error_body = [](int status, const std::string& message, http::Response& res) {
    send_detail(res, status, message);
  };
  // The token is checked on the head, before a body is read.
  host.head_filter = [this](const http::Request& head, http::Response& res) {
    return check_token(head, res);
  };
  add_routes();
  host_ = std::make_unique<http::Host>(
      std::move(host), [this](const http::Request& req, http::Response& res) { handle(req, res); });
}

HttpServer::~HttpServer() {
  stop();
}

bool HttpServer::check_token(const http::Request& head, http::Response& res) const {
  if (options_.token.empty() || normalize_path(head.path) == "/healthz" ||
      (options_.noop_route && normalize_path(head.path) == "/_noop")) {
    return false;
  }
  const auto header = head.header("authorization");
  const auto token = header ? http::bearer_token(*header) : std::nullopt;
  if (token && text::constant_time_equal(*token, options_.token)) {
    return false;
  }
  res.headers.emplace_back("WWW-Authenticate", "Bearer");
  send_detail(res, 401,
              !header  ? "Not authenticated: send Authorization: Bearer <token>"
              : !token ? "Unsupported authorization scheme: send Authorization: Bearer <token>"
                       : "Invalid token");
  return true;
}

// The reference's routes and this server's own (GET /jobs, GET /jobs/{id}, GET /healthz, and
// /_noop when asked for).
void HttpServer::add_routes() {
  if (options_.noop_route) {
    router_.add(http::Router::kAnyMethod, "/_noop",
                [](const http::Request&, http::Response& res) { send_json(res, 200, "null"); });
  }
  router_.add("GET", "/healthz", [this](const http::Request&, http::Response& res) {
    const StoreHealth health = service_.health();
    if (health.ok) {
      send_json(res, 200, R"({"status":"ok"})");
    } else {
      send_json(res, 503, dump(json{{"status", "unavailable"}, {"storage", health.message}}));
    }
  });
  router_.add("POST", "/jobs", [this](const http::Request& req, http::Response& res) {
    if (!registrations_.take(req.peer.address)) {
      res.headers.emplace_back("Retry-After", "1");
      throw QuotaError("this client (" + req.peer.address + ") registered " +
                       std::to_string(registrations_.per_minute()) +
                       " jobs within the last minute, the limit (zeus bso serve "
                       "--max-registrations-per-minute); retry later, or reuse job ids (an "
                       "identical spec answers 200)");
    }
    const RegisterResult result = service_.register_job(bso::job_spec_from_json(body_of(req)));
    send_json(res, result.created ? 201 : 200, dump(response_spec(result.spec)));
  });
  router_.add("DELETE", "/jobs", [this](const http::Request& req, http::Response& res) {
    if (service_.delete_job(query_param(req, "job_id"))) {
      send_json(res, 200, "null");
    } else {
      send_message(res, 404, "No job was deleted.");
    }
  });
  router_.add("GET", "/jobs", [this](const http::Request& req, http::Response& res) {
    const auto limit = static_cast<std::size_t>(
        whole_number_param(req, "limit", 1, kMaxJobsPage, kMaxJobsPage, "(the largest page)"));
    const std::string after = req.has_param("after") ? query_param(req, "after") : "";
    const JobIdPage page = service_.job_ids(after, limit);
    ordered_json body{{"jobs", page.ids}};
    if (page.next) {
      body["next"] = *page.next;
    }
    send_json(res, 200, dump(body));
  });
  router_.add("GET", "/jobs/batch_size", [this](const http::Request& req, http::Response& res) {
    send_json(res, 200, dump(bso::to_json(service_.next_batch_size(query_param(req, "job_id")))));
  });
  router_.add("POST", "/report", [this](const http::Request& req, http::Response& res) {
    send_json(res, 200,
              dump(bso::to_json(service_.report(bso::training_result_from_json(body_of(req))))));
  });
  router_.add("PATCH", "/trials", [this](const http::Request& req, http::Response& res) {
    service_.end_trial(bso::trial_id_from_json(body_of(req)));
    send_json(res, 200, "null");
  });
  router_.add(
      "GET", "/jobs/{job_id}",
      [this](const http::Request& req, http::Response& res, const http::PathParams& params) {
        // Decoded once, here (the host leaves paths as sent).
        const auto job_id = http::percent_decode(params.front().second, false);
        if (!job_id) {
          send_detail(res, 400, "malformed percent-encoding in the job id of the path");
          return;
        }
        if (!is_valid_utf8(*job_id)) {
          throw bso::ValidationError({{{"path", "job_id"},
                                       "the job id is not valid UTF-8",
                                       "value_error.str.utf8",
                                       nullptr}});
        }
        const auto limit = static_cast<std::size_t>(
            whole_number_param(req, "trials_limit", 1, BsoService::kMaxTrialsPage,
                               BsoService::kMaxTrialsPage, "(the largest page of trials)"));
        const auto after = static_cast<int>(
            whole_number_param(req, "trials_after", 0, std::numeric_limits<int>::max(), 0,
                               "(a trial number: the trials_next of the previous page)"));
        if (auto state = service_.job_state(*job_id, after, limit)) {
          send_json(res, 200, dump(to_json(*state)));
        } else {
          send_message(res, 404, "Unknown job(" + *job_id + ")");
        }
      });
}

void HttpServer::handle(const http::Request& req, http::Response& res) {
  // Paths are folded ("//jobs/" is "/jobs") before they are routed.
  const std::string path = normalize_path(req.path);
  const std::string& method = req.method;
  static const http::Router::NoRoute kNoRoute{not_found, method_not_allowed};
  try {
    router_.dispatch(req, path, res, kNoRoute);
  } catch (const bso::ValidationError& error) {
    send_json(res, 422, dump(error.to_json()));
  } catch (const QuotaError& error) {
    send_message(res, 429, error.what());
  } catch (const ServiceError& error) {
    send_message(res, status_for(error, method + " " + path), error.what());
  } catch (const StoreError& error) {
    switch (error.failure()) {
      case StoreFailure::kUnavailable:
        send_message(res, 503, std::string("database unavailable: ") + error.what());
        break;
      case StoreFailure::kReadOnly:
        send_message(res, 503,
                     std::string("the database refuses writes (read-only): ") + error.what());
        break;
      case StoreFailure::kConflict:
        send_message(res, 503, std::string("the database is busy; retry: ") + error.what());
        break;
      default:
        send_message(res, 500, std::string("database error: ") + error.what());
    }
    zeus::log().error("{} {}: {}", method, req.path, error.what());
  } catch (const std::exception& error) {
    // Never library text to the client: the log has it.
    send_message(res, 500, "internal error (the server's log has the details)");
    zeus::log().error("{} {}: {}", method, req.path, error.what());
  }
  if (untrimmed_bytes_.fetch_add(res.body.size()) + res.body.size() >= kTrimAfterAnswerBytes) {
    // What building large answers took (JSON nodes, rows) is free now, in pieces scattered over
    // the heap that glibc would otherwise keep. One thread trims; the others count on.
    untrimmed_bytes_ = 0;
    malloc_trim(0);
  }
  ++requests_;
}

int HttpServer::bind() {
  if (bound_) {
    return port_;
  }
  try {
    port_ = host_->bind_tcp(options_.host, options_.port);
  } catch (const http::BindError& error) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(error.what()) +
                    " (is another server on that port? choose another with --port, or --port 0 "
                    "for any free one)");
  }
  bound_ = true;
  return port_;
}

void HttpServer::serve() {
  if (!bound_) {
    bind();
  }
  host_->serve();
}

void HttpServer::stop() {
  host_->stop();
}

bool HttpServer::running() const {
  return host_->running();
}

}  // namespace zeus::server
