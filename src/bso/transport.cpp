// One BSO route over HTTP (cpp-httplib) with retries and backoff; the server URL.
#include "bso/transport.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "common/text.hpp"
#include "zeus/common/units.hpp"

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

bool retryable_status(int status) {
  return status == 502 || status == 503 || status == 504;
}

// Whole seconds and the remaining microseconds, as cpp-httplib's timeouts take them.
std::pair<time_t, time_t> split_seconds(double seconds) {
  const auto whole = static_cast<time_t>(seconds);
  const auto micro = static_cast<time_t>(
      std::llround(units::microseconds_from_seconds(seconds - static_cast<double>(whole))));
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
  const auto fail = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("BSO server URL \"{}\": {}; expected http[s]://host[:port][/prefix]",
                             url, why));
  };
  ServerUrl parsed;
  std::string rest = url;
  if (const auto scheme_end = rest.find("://"); scheme_end != std::string::npos) {
    const std::string scheme = text::ascii_lower(rest.substr(0, scheme_end));
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

// ---- Transport ----

Transport::Transport(const ServerUrl& url, const ClientOptions& options)
    : url_(url),
      timeout_s_(options.timeout_s),
      retry_(options.retry),
      clock_(options.clock ? options.clock : steady_clock()) {
  if (options.token) {
    token_ = *options.token;
  } else if (options.env) {
    token_ = options.env("ZEUS_BSO_TOKEN").value_or("");
  }
  if (url.scheme == "https") {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    auto tls = std::make_unique<httplib::SSLClient>(url.host, url.port);
    if (!options.ca_cert_path.empty()) {
      tls->set_ca_cert_path(options.ca_cert_path);
    }
    tls->enable_server_certificate_verification(true);
    http_ = std::move(tls);
#else
    throw Error(ErrorKind::kNotSupported,
                "BSO server URL " + url.to_string() +
                    ": this build's cpp-httplib has no TLS support; use http");
#endif
  } else {
    http_ = std::make_unique<httplib::ClientImpl>(url.host, url.port);
  }
  const auto [sec, usec] = split_seconds(options.timeout_s);
  http_->set_connection_timeout(sec, usec);
  http_->set_read_timeout(sec, usec);
  http_->set_write_timeout(sec, usec);
  // One connection per request, as the reference client does: nothing stale to reuse after a
  // server restart.
  http_->set_keep_alive(false);
  // Headers and body go out in two writes; without this the body can wait for a delayed ACK.
  http_->set_tcp_nodelay(true);
}

Transport::~Transport() = default;

Transport::Answer Transport::request(const std::string& method, const std::string& route_path,
                                     const std::string& query, const std::string& body,
                                     const std::vector<int>& accepted) {
  const std::string route = method + " " + route_path;
  const std::string target = url_.prefix + route_path + query;
  httplib::Headers headers;
  if (!token_.empty()) {
    headers.emplace("Authorization", "Bearer " + token_);
  }
  const RetryPolicy& retry = retry_;
  double delay_s = retry.initial_delay_s;
  const std::lock_guard lock(mutex_);
  for (int attempt = 1;; ++attempt) {
    httplib::Result result = [&] {
      const SigpipeGuard no_sigpipe;  // a server that closes mid-request is this attempt's error
      if (method == "GET") {
        return http_->Get(target, headers);
      }
      if (method == "POST") {
        return http_->Post(target, headers, body, "application/json");
      }
      if (method == "PATCH") {
        return http_->Patch(target, headers, body, "application/json");
      }
      return http_->Delete(target, headers);
    }();

    std::string failure;  // why this attempt may be retried
    std::optional<double> server_delay_s;
    ErrorKind kind = ErrorKind::kIo;
    if (!result) {
      const httplib::Error error = result.error();
      if (error == httplib::Error::ConnectionTimeout) {
        failure = fmt::format("no connection within {} s", timeout_s_);
        kind = ErrorKind::kTimeout;
      } else if (error == httplib::Error::Read) {
        failure = fmt::format("no complete answer within {} s (or the connection was closed)",
                              timeout_s_);
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
    clock_->sleep_for_ns(units::nanoseconds_from_seconds(pause_s));
    delay_s = std::min(retry.max_delay_s, delay_s * retry.multiplier);
  }
}

}  // namespace zeus::bso
