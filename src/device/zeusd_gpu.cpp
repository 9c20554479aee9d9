#include "zeus/device/zeusd_gpu.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "common/text.hpp"
#include "device/clock_range.hpp"
#include "device/zeusd_endpoint.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {
namespace {

using nlohmann::json;

std::optional<std::string> non_empty(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (value && value->empty()) {
    return std::nullopt;
  }
  return value;
}

// The text of an error body: {"error": m} -> m; {"errors": {"0": m}} -> "GPU 0: m"; else as is.
std::string body_text(const std::string& body) {
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

}  // namespace

std::string ZeusdConfig::describe() const {
  if (socket_path) {
    return "unix socket " + *socket_path;
  }
  return host + ":" + std::to_string(port);
}

std::optional<ZeusdConfig> zeusd_config_from_env(const EnvLookup& env) {
  ZeusdConfig config;
  config.token = non_empty(env, "ZEUSD_TOKEN");
  if (auto socket_path = non_empty(env, "ZEUSD_SOCK_PATH")) {
    config.socket_path = std::move(socket_path);
    return config;
  }
  const std::optional<std::string> host_port = non_empty(env, "ZEUSD_HOST_PORT");
  if (!host_port) {
    return std::nullopt;
  }
  const auto colon = host_port->rfind(':');
  const auto malformed = [&] {
    return Error(ErrorKind::kInvalidArgument,
                 "ZEUSD_HOST_PORT=\"" + *host_port +
                     "\" is not host:port (e.g. 127.0.0.1:4938); unset it, or set "
                     "ZEUSD_SOCK_PATH to the daemon's Unix socket");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port->size()) {
    throw malformed();
  }
  const std::string port_text = host_port->substr(colon + 1);
  if (!std::all_of(port_text.begin(), port_text.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; }) ||
      port_text.size() > 5) {
    throw malformed();
  }
  const int port = std::stoi(port_text);
  if (port < 1 || port > 65535) {
    throw malformed();
  }
  config.host = host_port->substr(0, colon);
  if (config.host.size() >= 2 && config.host.front() == '[' && config.host.back() == ']') {
    config.host = config.host.substr(1, config.host.size() - 2);  // [::1]:4938
  }
  if (config.host.empty()) {
    throw malformed();  // "[]:4938": brackets around nothing
  }
  config.port = port;
  return config;
}

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
  options.bearer_token = config_.token;
  impl_->client = std::make_unique<http::Client>(zeusd_url(config_, options), std::move(options));
}

ZeusdConnection::~ZeusdConnection() = default;

namespace {

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
                           "): " + body_text(body);
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

// `error` about the device family `subject` (the connection's errors are about whichever device
// the call was for).
Error about(const Error& error, ErrorSubject subject) {
  return Error(error.kind(), error.what(), subject);
}

}  // namespace

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
                                    body_text(discover.response->body));
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
          body_text(whoami.response->body) + "); issue a new one with `zeusd token issue`";
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

ZeusdCpu::ZeusdCpu(ZeusdCpuInfo info, std::shared_ptr<ZeusdConnection> daemon)
    : info_(info), daemon_(std::move(daemon)) {}

std::uint64_t ZeusdCpu::read(bool dram) {
  try {
    return read_energy_uj(dram);
  } catch (const Error& error) {
    throw about(error, ErrorSubject::kCpu);
  }
}

std::uint64_t ZeusdCpu::read_energy_uj(bool dram) {
  const std::string id = std::to_string(info_.id);
  const std::string what = dram ? "read the DRAM energy of CPU " : "read the energy of CPU ";
  const std::string body =
      daemon_->get(what + id, "/cpu/get_cumulative_energy?cpu_ids=" + id +
                                  (dram ? "&cpu=false&dram=true" : "&cpu=true&dram=false"));
  const char* field = dram ? "dram_energy_uj" : "cpu_energy_uj";
  try {
    const json reply = json::parse(body);
    return reply.at(id).at(field).get<std::uint64_t>();
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo,
                "the zeusd daemon at " + daemon_->config().describe() + " sent a reply without " +
                    field + " for CPU " + id + " (" +
                    std::string(text::json_error_text(error.what())) + "): " + body_text(body),
                ErrorSubject::kCpu);
  }
}

std::uint64_t ZeusdCpu::package_energy_uj() {
  return read(false);
}

std::uint64_t ZeusdCpu::dram_energy_uj() {
  if (!info_.dram_available) {
    throw Error(ErrorKind::kNotSupported,
                "CPU package " + std::to_string(info_.id) +
                    " has no DRAM zone on the zeusd daemon at " + daemon_->config().describe(),
                ErrorSubject::kCpu);
  }
  return read(true);
}

ZeusdGpu::ZeusdGpu(std::shared_ptr<Gpu> inner, int daemon_index,
                   std::shared_ptr<ZeusdConnection> daemon, bool match_by_pci)
    : ForwardingGpu(std::move(inner)), daemon_(std::move(daemon)), match_by_pci_(match_by_pci) {
  if (!match_by_pci_) {
    daemon_index_ = daemon_index;
  }
}

int ZeusdGpu::daemon_index() {
  const std::lock_guard lock(index_mutex_);
  if (!daemon_index_) {
    daemon_index_ = daemon_->daemon_index_by_pci(inner_->pci_bus_id());
  }
  return *daemon_index_;
}

void ZeusdGpu::send(const std::string& operation, const std::string& route,
                    const std::string& extra, bool block) {
  try {
    daemon_->require_gpu_control();
    const int index = daemon_index();
    daemon_->post(operation + " of GPU " + std::to_string(index),
                  route + "?gpu_ids=" + std::to_string(index) + extra +
                      (block ? "&block=true" : "&block=false"));
  } catch (const Error& error) {
    throw about(error, ErrorSubject::kGpu);
  }
}

void ZeusdGpu::set_power_limit_mw(std::uint32_t power_limit_mw) {
  set_power_limit_mw(power_limit_mw, true);
}

void ZeusdGpu::set_power_limit_mw(std::uint32_t power_limit_mw, bool block) {
  if (inner_->power_limit_mw() == power_limit_mw) {
    return;
  }
  send("set the power limit", "/gpu/set_power_limit",
       "&power_limit_mw=" + std::to_string(power_limit_mw), block);
}

void ZeusdGpu::reset_power_limit() {
  reset_power_limit(true);
}

void ZeusdGpu::reset_power_limit(bool block) {
  set_power_limit_mw(inner_->default_power_limit_mw(), block);
}

void ZeusdGpu::set_persistence_mode(bool enabled) {
  set_persistence_mode(enabled, true);
}

void ZeusdGpu::set_persistence_mode(bool enabled, bool block) {
  send("set persistence mode", "/gpu/set_persistence_mode",
       std::string("&enabled=") + (enabled ? "true" : "false"), block);
}

void ZeusdGpu::check_clock_range(bool memory, std::uint32_t min_mhz, std::uint32_t max_mhz) {
  std::vector<std::uint32_t> supported;
  try {
    supported = memory ? inner_->supported_memory_clocks_mhz()
                       : inner_->supported_graphics_clocks_mhz(std::nullopt);
  } catch (const Error&) {
    // The local library cannot list them: only min <= max is checked here, the daemon does
    // the rest.
  }
  if (auto problem =
          clock_range_problem(memory ? "Memory" : "Graphics", min_mhz, max_mhz, supported)) {
    throw Error(ErrorKind::kInvalidArgument, *problem, ErrorSubject::kGpu);
  }
}

namespace {

std::string clock_query(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  return "&min_clock_mhz=" + std::to_string(min_mhz) + "&max_clock_mhz=" + std::to_string(max_mhz);
}

}  // namespace

void ZeusdGpu::set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  set_gpu_locked_clocks_mhz(min_mhz, max_mhz, true);
}

void ZeusdGpu::set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block) {
  check_clock_range(false, min_mhz, max_mhz);
  send("lock the GPU clocks", "/gpu/set_gpu_locked_clocks", clock_query(min_mhz, max_mhz), block);
}

void ZeusdGpu::reset_gpu_locked_clocks() {
  reset_gpu_locked_clocks(true);
}

void ZeusdGpu::reset_gpu_locked_clocks(bool block) {
  send("reset the GPU locked clocks", "/gpu/reset_gpu_locked_clocks", "", block);
}

void ZeusdGpu::set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  set_memory_locked_clocks_mhz(min_mhz, max_mhz, true);
}

void ZeusdGpu::set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz,
                                            bool block) {
  check_clock_range(true, min_mhz, max_mhz);
  send("lock the memory clocks", "/gpu/set_mem_locked_clocks", clock_query(min_mhz, max_mhz),
       block);
}

void ZeusdGpu::reset_memory_locked_clocks() {
  reset_memory_locked_clocks(true);
}

void ZeusdGpu::reset_memory_locked_clocks(bool block) {
  send("reset the memory locked clocks", "/gpu/reset_mem_locked_clocks", "", block);
}

void ZeusdGpu::reset_locked_clocks() {
  reset_locked_clocks(true);
}

void ZeusdGpu::reset_locked_clocks(bool block) {
  if (inner_->backend() == GpuBackend::kAmdSmi) {
    send("reset the locked clocks", "/gpu/reset_locked_clocks", "", block);
    return;
  }
  reset_gpu_locked_clocks(block);
  reset_memory_locked_clocks(block);
}

}  // namespace zeus::device
