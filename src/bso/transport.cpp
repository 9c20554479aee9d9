// One BSO route over the one HTTP client, with its retry loop; the server URL.
#include "bso/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/log.hpp"
#include "http/retry.hpp"
#include "http/url.hpp"

namespace zeus::bso {
namespace {

constexpr std::size_t kMaxQuotedBody = 400;  // characters of a body quoted in an error

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

// The one HTTP client's form of a server URL (the port always given).
http::Url http_url_of(const ServerUrl& server) {
  http::Url url;
  url.scheme = server.scheme;
  url.host = server.host;
  url.port = server.port;
  url.port_given = true;
  url.prefix = server.prefix;
  return url;
}

}  // namespace

std::string quote_body(const std::string& body) {
  if (body.size() <= kMaxQuotedBody) {
    return body;
  }
  return body.substr(0, kMaxQuotedBody) + "... (" + std::to_string(body.size()) + " bytes)";
}

ServerError::ServerError(ErrorKind kind, std::string route, int status, std::string server_message,
                         const std::string& what)
    : Error(kind, what),
      route_(std::move(route)),
      status_(status),
      server_message_(std::move(server_message)) {}

// ---- URL ----

ServerUrl ServerUrl::parse(const std::string& url) {
  const http::Url parsed = http::parse_url(url, {"BSO server", false});
  ServerUrl server;
  server.scheme = parsed.scheme;
  server.host = parsed.host;
  server.port = parsed.port;
  server.prefix = parsed.prefix;
  return server;
}

std::string ServerUrl::to_string() const {
  return http_url_of(*this).with_port();
}

// ---- Transport ----

Transport::Transport(const ServerUrl& url, const ClientOptions& options)
    : url_(url),
      retry_(options.retry),
      request_timeout_s_(options.request_timeout_s),
      clock_(options.clock ? options.clock : steady_clock()) {
  http::ClientOptions http_options;
  http_options.connect_timeout_s = options.timeout_s;
  http_options.read_timeout_s = options.timeout_s;
  http_options.write_timeout_s = options.timeout_s;
  // However slowly the server answers, and however much it sends (outside_services.hpp).
  http_options.total_timeout_s = options.exchange_timeout_s.value_or(
      outside_services::kReadTimeoutsPerExchange * options.timeout_s);
  http_options.max_body_bytes = options.max_body_bytes;
  // One connection per request, as the reference client does: nothing stale to reuse after a
  // server restart.
  http_options.keep_alive = false;
  // Headers and body go out in two writes; without this the body can wait for a delayed ACK.
  http_options.tcp_nodelay = true;
  http_options.ca_cert_path = options.ca_cert_path;
  std::string token;
  if (options.token) {
    token = *options.token;
  } else if (options.env) {
    token = options.env("ZEUS_BSO_TOKEN").value_or("");
  }
  if (!token.empty()) {
    http_options.bearer_token = token;
  }
  // Throws Error(kNotSupported) naming the URL for https in a build without TLS.
  http_ = std::make_unique<http::Client>(http_url_of(url), http_options);
}

Transport::~Transport() = default;

Transport::Answer Transport::request(const std::string& method, const std::string& route_path,
                                     const std::string& query, const std::string& body,
                                     const std::vector<int>& accepted) {
  const std::string route = method + " " + route_path;
  http::ClientRequest request;
  request.method = method;
  request.target = route_path + query;
  if (method == "POST" || method == "PATCH") {
    request.body = body;
    request.content_type = "application/json";
  }
  const auto is_accepted = [&](int status) {
    return (status >= 200 && status < 300) ||
           std::find(accepted.begin(), accepted.end(), status) != accepted.end();
  };
  const std::lock_guard lock(mutex_);
  const http::Backoff backoff{retry_.max_attempts, retry_.initial_delay_s, retry_.max_delay_s,
                              retry_.multiplier, request_timeout_s_};
  const http::RetryResult result = http::with_retries(
      backoff, *clock_,
      [&](int, double timeout_s) {
        request.timeout_s = timeout_s;
        http::Attempt attempt{http_->send(request), false, ""};
        const http::Outcome& outcome = attempt.outcome;
        if (outcome.response && is_accepted(outcome.response->status)) {
          return attempt;
        }
        // The BSO routes change state on the server: a 500 is its answer, not a hiccup.
        attempt.retry = http::worth_retrying(outcome, /*idempotent=*/false);
        attempt.why = outcome.response ? fmt::format("answered {}: {}", outcome.response->status,
                                                     server_message_of(outcome.response->body))
                                       : http::describe(outcome, http_->options());
        return attempt;
      },
      [&](int attempt, double pause_s, const std::string& why) {
        log().warn("BSO server {} at {}: {}; retrying in {:.3g} s (attempt {} of {})", route,
                   url_.to_string(), why, pause_s, attempt + 1, retry_.max_attempts);
      });
  const http::Outcome& outcome = result.last.outcome;
  const std::string gave_up = fmt::format(
      "gave up after {} attempt{}{}", result.attempts, result.attempts == 1 ? "" : "s",
      result.out_of_time ? fmt::format(" (the {} s request deadline)", request_timeout_s_) : "");
  if (outcome.response) {
    const int status = outcome.response->status;
    if (is_accepted(status)) {
      return {status, outcome.response->body};
    }
    const std::string message = server_message_of(outcome.response->body);
    if (!result.last.retry) {
      throw ServerError(kind_for_status(status), route, status, message,
                        fmt::format("BSO server {} at {} answered {}: {}", route, url_.to_string(),
                                    status, message));
    }
    throw ServerError(ErrorKind::kUnknown, route, status, message,
                      fmt::format("BSO server {} at {} {} ({})", route, url_.to_string(),
                                  result.last.why, gave_up));
  }
  const std::string& failure = result.last.why;
  if (outcome.failure == http::Failure::kTlsVerify) {
    // A certificate problem does not go away by waiting.
    throw ServerError(ErrorKind::kIo, route, 0, failure,
                      fmt::format("BSO server {} at {}: {} (check ca_cert_path)", route,
                                  url_.to_string(), failure));
  }
  const bool timeout = outcome.failure == http::Failure::kConnectTimeout ||
                       outcome.failure == http::Failure::kRead ||
                       outcome.failure == http::Failure::kDeadline;
  throw ServerError(
      timeout ? ErrorKind::kTimeout : ErrorKind::kIo, route, 0, failure,
      fmt::format("BSO server {} at {}: {} ({})", route, url_.to_string(), failure, gave_up));
}

}  // namespace zeus::bso
