// The connection to zeusd (zeusd_connection.hpp): requests through the one HTTP client, the
// daemon's refusals as zeus::Errors, its capabilities from GET /discover and GET /auth/whoami.
#include "device/zeusd_connection.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "common/text.hpp"
#include "device/zeusd_endpoint.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"

namespace zeus::device {

using nlohmann::json;

std::string zeusd_error_text(const std::string& body) {
  try {
    const json parsed = json::parse(body);
    if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
      return parsed["error"].get<std::string>();
    }
    if (parsed.is_object() && parsed.contains("errors") && parsed["errors"].is_object()) {
      std::string text;
      for (const auto& [id, message] : parsed["errors"].items()) {
        text += (text.empty() ? "" : "; ") + std::string("GPU ") + id + ": " +
                (message.is_string() ? message.get<std::string>() : message.dump());
      }
      return text;
    }
  } catch (const json::exception&) {
    // Not JSON: the plain-text shape.
  }
  return body.empty() ? std::string("(empty body)") : body;
}

namespace {

// "00000000:3B:00.0" and "0000:3b:00.0" -> "0:3b:00.0".
std::string normalize_pci(const std::string& address) {
  std::string lower = text::ascii_lower(address);
  const auto colon = lower.find(':');
  if (colon == std::string::npos || colon == 0) {
    return lower;
  }
  try {
    return std::to_string(std::stoull(lower.substr(0, colon), nullptr, 16)) + lower.substr(colon);
  } catch (const std::exception&) {
    return lower;
  }
}

Error unreachable(const ZeusdConfig& config, const std::string& operation,
                  const http::Outcome& outcome) {
  return Error(ErrorKind::kIo, "cannot " + operation + ": the zeusd daemon at " +
                                   config.describe() + " is unreachable (" + outcome.detail +
                                   "); is it running, and may this user open its socket? "
                                   "(ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT select the daemon)");
}

// The daemon's refusal as a zeus::Error.
Error refused(const ZeusdConfig& config, const std::string& operation, int status,
              const std::string& body) {
  const std::string text = "zeusd refused to " + operation + " (HTTP " + std::to_string(status) +
                           "): " + zeusd_error_text(body);
  if (status == 401) {
    return Error(ErrorKind::kNoPermission,
                 text + (config.token ? "; ZEUSD_TOKEN was rejected: issue a new one with "
                                        "`zeusd token issue` and the gpu-control scope"
                                      : "; the daemon requires a token: set ZEUSD_TOKEN"));
  }
  if (status == 403) {
    return Error(ErrorKind::kNoPermission,
                 text + "; the token in ZEUSD_TOKEN lacks the scope this call needs");
  }
  if (status == 404) {
    return Error(ErrorKind::kNotSupported, text);
  }
  if (status == 400) {
    return Error(ErrorKind::kInvalidArgument, text);
  }
  return Error(ErrorKind::kUnknown, text);
}

}  // namespace

struct ZeusdConnection::Impl {
  std::unique_ptr<http::Client> client;
  std::optional<json> discovered;                  // /discover, once it answered
  std::optional<std::vector<std::string>> scopes;  // /auth/whoami, once it answered 200
  std::optional<std::string> token_error;          // why the token was refused
  std::optional<std::string> control_error;        // why gpu-control is refused
  bool control_checked = false;

  // Every request to the daemon goes through here (the one HTTP client holds SIGPIPE off, so
  // that a daemon that goes mid-request is this request's error, not the end of the process).
  http::Outcome send(std::string_view method, const std::string& path_and_query) const {
    http::ClientRequest request;
    request.method = std::string(method);
    request.target = path_and_query;
    return client->send(request);
  }
};

ZeusdConnection::ZeusdConnection(ZeusdConfig config)
    : config_(std::move(config)), impl_(std::make_unique<Impl>()) {
  http::ClientOptions options;
  options.keep_alive = true;
  // The reference client's 5 s timeout by default; blocking setters finish well within it.
  options.connect_timeout_s = options.read_timeout_s = options.write_timeout_s = config_.timeout_s;
  // However slowly the daemon answers, and however much it sends (outside_services.hpp).
  options.total_timeout_s = outside_services::kReadTimeoutsPerExchange * config_.timeout_s;
  options.max_body_bytes = outside_services::kZeusdMaxBodyBytes;
  options.bearer_token = config_.token;
  impl_->client = std::make_unique<http::Client>(zeusd_url(config_, options), std::move(options));
}

ZeusdConnection::~ZeusdConnection() = default;

void ZeusdConnection::fetch_discover_locked() {
  if (impl_->discovered) {
    return;
  }
  const std::string where = "the zeusd daemon at " + config_.describe();
  const http::Outcome discover = impl_->send("GET", "/discover");
  if (!discover) {
    throw unreachable(config_, "check the daemon's capabilities", discover);
  }
  if (discover.response->status != 200) {
    throw Error(ErrorKind::kIo, where + " answered GET /discover with HTTP " +
                                    std::to_string(discover.response->status) + ": " +
                                    zeusd_error_text(discover.response->body));
  }
  json parsed;
  try {
    parsed = json::parse(discover.response->body);
    (void)parsed.at("enabled_api_groups").get<std::vector<std::string>>();
    (void)parsed.at("auth_required").get<bool>();
    (void)parsed.at("gpus").get<std::vector<json>>();
    for (const json& cpu : parsed.at("cpus").get<std::vector<json>>()) {
      (void)cpu.at("id").get<int>();
      (void)cpu.at("dram_available").get<bool>();
    }
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo, where + " sent a /discover reply this client cannot read (" +
                                    std::string(text::json_error_text(error.what())) + ")");
  }
  impl_->discovered = std::move(parsed);
}

std::optional<std::string> ZeusdConnection::group_error_locked(const std::string& group) {
  fetch_discover_locked();
  const std::string where = "the zeusd daemon at " + config_.describe();
  const json& discovered = *impl_->discovered;
  const auto groups = discovered["enabled_api_groups"].get<std::vector<std::string>>();
  if (std::find(groups.begin(), groups.end(), group) == groups.end()) {
    return where + " does not enable the " + group +
           " API group (it is read-only or was started with --enable without " + group + ")";
  }
  if (!discovered["auth_required"].get<bool>()) {
    return std::nullopt;
  }
  if (!config_.token) {
    return where +
           " requires a token: set ZEUSD_TOKEN to one issued with `zeusd token issue` "
           "carrying the " +
           group + " scope";
  }
  if (!impl_->scopes && !impl_->token_error) {
    const http::Outcome whoami = impl_->send("GET", "/auth/whoami");
    if (!whoami) {
      throw unreachable(config_, "check the token", whoami);
    }
    if (whoami.response->status != 200) {
      impl_->token_error =
          where + " rejected ZEUSD_TOKEN (HTTP " + std::to_string(whoami.response->status) + ": " +
          zeusd_error_text(whoami.response->body) + "); issue a new one with `zeusd token issue`";
    } else {
      std::vector<std::string> scopes;
      try {
        scopes = json::parse(whoami.response->body).at("scopes").get<std::vector<std::string>>();
      } catch (const json::exception&) {
        // No readable scopes: treated as none.
      }
      impl_->scopes = std::move(scopes);
    }
  }
  if (impl_->token_error) {
    return impl_->token_error;
  }
  if (std::find(impl_->scopes->begin(), impl_->scopes->end(), group) == impl_->scopes->end()) {
    return "the token in ZEUSD_TOKEN lacks the " + group + " scope required by " + where;
  }
  return std::nullopt;
}

void ZeusdConnection::require_gpu_control() {
  const std::lock_guard lock(mutex_);
  if (!impl_->control_checked) {
    impl_->control_error = group_error_locked("gpu-control");
    if (impl_->control_error) {
      *impl_->control_error += "; GPU settings cannot be changed through it (reading works)";
    }
    impl_->control_checked = true;
  }
  if (impl_->control_error) {
    throw Error(ErrorKind::kNoPermission, *impl_->control_error, ErrorSubject::kGpu);
  }
}

std::vector<ZeusdCpuInfo> ZeusdConnection::readable_cpus() {
  const std::lock_guard lock(mutex_);
  if (std::optional<std::string> error = group_error_locked("cpu-read")) {
    throw Error(ErrorKind::kNoPermission, *error + "; CPU energy cannot be read through it",
                ErrorSubject::kCpu);
  }
  std::vector<ZeusdCpuInfo> cpus;
  for (const json& cpu : (*impl_->discovered)["cpus"]) {
    cpus.push_back({cpu["id"].get<int>(), cpu["dram_available"].get<bool>()});
  }
  return cpus;
}

std::string ZeusdConnection::get(const std::string& operation, const std::string& path_and_query) {
  const std::lock_guard lock(mutex_);
  const http::Outcome result = impl_->send("GET", path_and_query);
  if (!result) {
    throw unreachable(config_, operation, result);
  }
  if (result.response->status != 200) {
    throw refused(config_, operation, result.response->status, result.response->body);
  }
  return result.response->body;
}

ZeusdReply ZeusdConnection::request(const std::string& method, const std::string& path_and_query) {
  if (method != "GET" && method != "POST") {
    throw Error(ErrorKind::kInvalidArgument,
                "zeusd requests are GET or POST, not \"" + method + "\"");
  }
  const std::lock_guard lock(mutex_);
  const http::Outcome result = impl_->send(method, path_and_query);
  if (!result) {
    throw unreachable(config_, method + " " + path_and_query, result);
  }
  return {result.response->status, result.response->body};
}

int ZeusdConnection::daemon_index_by_pci(const std::string& pci_bus_id) {
  require_gpu_control();
  const std::lock_guard lock(mutex_);
  const std::string wanted = normalize_pci(pci_bus_id);
  std::vector<int> matches;
  for (const json& gpu : (*impl_->discovered)["gpus"]) {
    if (gpu.contains("pci_address") && gpu["pci_address"].is_string() && gpu.contains("id") &&
        normalize_pci(gpu["pci_address"].get<std::string>()) == wanted) {
      matches.push_back(gpu["id"].get<int>());
    }
  }
  if (matches.size() != 1) {
    throw Error(ErrorKind::kNotFound,
                "the zeusd daemon at " + config_.describe() + " lists " +
                    std::to_string(matches.size()) + " GPU(s) with PCI address " + pci_bus_id +
                    " (exactly one expected)",
                ErrorSubject::kGpu);
  }
  return matches.front();
}

void ZeusdConnection::post(const std::string& operation, const std::string& path_and_query) {
  const std::lock_guard lock(mutex_);
  const http::Outcome result = impl_->send("POST", path_and_query);
  if (!result) {
    throw unreachable(config_, operation, result);
  }
  if (result.response->status != 200) {
    throw refused(config_, operation, result.response->status, result.response->body);
  }
}

}  // namespace zeus::device
