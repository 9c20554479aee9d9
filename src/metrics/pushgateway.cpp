// PushgatewayClient (cpp-httplib's client side) and the counter and gauge families that the
// pushers send, in the text format of metrics/exposition.hpp.
#include "zeus/metrics/pushgateway.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include "common/signals.hpp"
#include "common/text.hpp"
#include "metrics/exposition.hpp"
#include "zeus/common/error.hpp"

namespace zeus::metrics {
namespace {

bool valid_label_name(std::string_view name) {
  if (name.empty() || (std::isdigit(static_cast<unsigned char>(name[0])) != 0)) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

// URL-safe base64 with padding, which the Pushgateway decodes in "@base64" path segments.
std::string base64_url(std::string_view bytes) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
                   (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8) |
                   static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) {
      n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  if (out.empty()) {
    out = "=";  // the Pushgateway's spelling of an empty value
  }
  return out;
}

std::string percent_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.append(fmt::format("%{:02X}", byte));
    }
  }
  return out;
}

// One "/<name>/<value>" pair of a grouping key.
std::string group_segment(std::string_view name, std::string_view value) {
  if (value.empty() || value.find('/') != std::string_view::npos) {
    return fmt::format("/{}@base64/{}", name, base64_url(value));
  }
  return fmt::format("/{}/{}", name, percent_escape(value));
}

double check_timeout(double seconds, std::string_view what) {
  if (!std::isfinite(seconds) || seconds <= 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("the Pushgateway {} timeout must be a positive number of seconds; "
                            "got {}",
                            what, seconds));
  }
  return seconds;
}

std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (is the Pushgateway running, and is the host and port right?)";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "no complete answer (the connection was closed, or the read timed out)";
    case httplib::Error::Write:
      return "the body could not be sent (the connection was closed, or the write timed out)";
    case httplib::Error::Canceled:
      return "the push was cancelled (shutting down)";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLServerVerification:
    case httplib::Error::SSLLoadingCerts:
      return "the TLS connection failed";
    default:
      return "the request failed (" + httplib::to_string(error) + ")";
  }
}

}  // namespace

std::string pushgateway_group_path(std::string_view job, const GroupingKey& grouping) {
  std::string path = "/metrics" + group_segment("job", job);
  for (const auto& [name, value] : grouping) {
    path.append(group_segment(name, value));
  }
  return path;
}

struct PushgatewayClient::State {
  std::string scheme_host_port;  // what httplib::Client takes
  std::string path;              // prefix + group path
  std::string group_url;
  double connect_timeout_s = 3.0;
  double timeout_s = 10.0;
  std::mutex mutex;
  bool cancelled = false;
  std::set<httplib::Client*> in_flight;
};

PushgatewayClient::PushgatewayClient(PushgatewayOptions options)
    : state_(std::make_unique<State>()) {
  State& state = *state_;
  std::string url(text::trim(options.url));
  const auto bad_url = [&](std::string_view why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("Pushgateway URL '{}' is malformed: {}; give http://host:port "
                             "(e.g. http://localhost:9091)",
                             options.url, why));
  };
  if (url.empty()) {
    throw bad_url("it is empty");
  }
  for (const char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      throw bad_url("it holds a space or a control character");
    }
  }
  if (url.find_first_of("?#") != std::string::npos) {
    throw bad_url("a query or fragment has no meaning here");
  }
  std::string scheme = "http";
  const std::size_t scheme_end = url.find("://");
  if (scheme_end != std::string::npos) {
    scheme = text::ascii_lower(url.substr(0, scheme_end));
    url = url.substr(scheme_end + 3);
  }
  if (scheme != "http" && scheme != "https") {
    throw bad_url(fmt::format("scheme '{}' is not http or https", scheme));
  }
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (scheme == "https") {
    throw bad_url("this build has no TLS support; use http");
  }
#endif
  const std::size_t slash = url.find('/');
  const std::string authority = url.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') {
    prefix.pop_back();
  }
  if (authority.find('@') != std::string::npos) {
    throw bad_url("user names in the URL are not supported");
  }
  std::string host = authority;
  std::string port_text;
  const std::size_t bracket = authority.rfind(']');
  const std::size_t colon = authority.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
    const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                        std::all_of(port_text.begin(), port_text.end(),
                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits || std::stoi(port_text) < 1 || std::stoi(port_text) > 65535) {
      throw bad_url(fmt::format("port '{}' is not a number from 1 to 65535", port_text));
    }
  }
  if (host.empty() || host == "[]") {
    throw bad_url("it names no host");
  }
  if (options.job.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the Pushgateway job name is empty; give the job a name (any text, '/' allowed)");
  }
  for (std::size_t i = 0; i < options.grouping.size(); ++i) {
    const std::string& name = options.grouping[i].first;
    if (!valid_label_name(name) || name == "job" || name.rfind("__", 0) == 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("grouping label name '{}' is not allowed; use letters, digits and "
                              "'_' (not starting with a digit or '__'), and not 'job'",
                              name));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (options.grouping[j].first == name) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("grouping label '{}' is given twice", name));
      }
    }
  }
  state.connect_timeout_s = check_timeout(options.connect_timeout_s, "connect");
  state.timeout_s = check_timeout(options.timeout_s, "read");
  state.scheme_host_port = scheme + "://" + authority;
  state.path = prefix + pushgateway_group_path(options.job, options.grouping);
  state.group_url = state.scheme_host_port + state.path;
}

PushgatewayClient::~PushgatewayClient() = default;
PushgatewayClient::PushgatewayClient(PushgatewayClient&&) noexcept = default;
PushgatewayClient& PushgatewayClient::operator=(PushgatewayClient&&) noexcept = default;

const std::string& PushgatewayClient::group_url() const {
  return state_->group_url;
}

void PushgatewayClient::push(const std::string& body) const {
  send("PUT", body);
}

void PushgatewayClient::push_add(const std::string& body) const {
  send("POST", body);
}

void PushgatewayClient::remove() const {
  send("DELETE", "");
}

void PushgatewayClient::cancel() const {
  const std::lock_guard lock(state_->mutex);
  state_->cancelled = true;
  for (httplib::Client* client : state_->in_flight) {
    client->stop();
  }
}

void PushgatewayClient::send(const char* method, const std::string& body) const {
  State& state = *state_;
  httplib::Client client(state.scheme_host_port);
  const auto to_duration = [](double seconds) {
    return std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::duration<double>(seconds));
  };
  client.set_connection_timeout(to_duration(state.connect_timeout_s));
  client.set_read_timeout(to_duration(state.timeout_s));
  client.set_write_timeout(to_duration(state.timeout_s));
  client.set_keep_alive(false);
  {
    const std::lock_guard lock(state.mutex);
    if (state.cancelled) {
      throw Error(ErrorKind::kUnavailable,
                  fmt::format("push to the Pushgateway at {} not sent: the pusher is shutting down",
                              state.group_url));
    }
    state.in_flight.insert(&client);
  }
  const std::string_view verb = method;
  constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
  const SigpipeGuard no_sigpipe;  // a gateway that closes mid-body, or cancel() shutting it down
  httplib::Result result = verb == "PUT"    ? client.Put(state.path, body, kContentType)
                           : verb == "POST" ? client.Post(state.path, body, kContentType)
                                            : client.Delete(state.path);
  {
    const std::lock_guard lock(state.mutex);
    state.in_flight.erase(&client);
  }
  if (!result) {
    throw Error(ErrorKind::kUnavailable,
                fmt::format("{} to the Pushgateway at {} failed: {} (timeouts: connect {} s, "
                            "read {} s)",
                            method, state.group_url, describe(result.error()),
                            state.connect_timeout_s, state.timeout_s));
  }
  if (result->status < 200 || result->status >= 300) {
    std::string answer(text::trim(result->body));
    if (answer.size() > 500) {
      answer = answer.substr(0, 500) + "...";
    }
    throw Error(ErrorKind::kUnavailable,
                fmt::format("{} to the Pushgateway at {} was refused with HTTP {}: {}", method,
                            state.group_url, result->status,
                            answer.empty() ? "(no body)" : escape_help(answer)));
  }
}

// ---- families ------------------------------------------------------------------------------

namespace {

void render_series(std::string& out, std::string_view name, std::string_view type,
                   std::string_view help,
                   const std::map<std::pair<std::string, int>, double>& map) {
  if (map.empty()) {
    return;
  }
  write_family_header(out, name, type, help);
  for (const auto& [key, value] : map) {
    fmt::format_to(std::back_inserter(out), "{}{{window=\"{}\",index=\"{}\"}} {}\n", name,
                   escape_label_value(key.first), key.second, format_value(value));
  }
}

void erase_window(std::map<std::pair<std::string, int>, double>& map, const std::string& window) {
  auto it = map.lower_bound({window, std::numeric_limits<int>::min()});
  while (it != map.end() && it->first.first == window) {
    it = map.erase(it);
  }
}

std::optional<double> find(const std::map<std::pair<std::string, int>, double>& map,
                           const std::string& window, int index) {
  const auto it = map.find({window, index});
  if (it == map.end()) {
    return std::nullopt;
  }
  return it->second;
}

}  // namespace

void WindowEnergyCounters::add(const std::string& window, const monitor::Measurement& measurement) {
  // A counter only goes up: a negative delta (a counter reset the monitor did not catch) adds 0.
  for (const auto& [index, joules] : measurement.gpu_energy_j) {
    gpu_j_[{window, index}] += std::max(0.0, joules);
  }
  for (const auto& [index, joules] : measurement.cpu_energy_j) {
    cpu_j_[{window, index}] += std::max(0.0, joules);
  }
  for (const auto& [index, joules] : measurement.dram_energy_j) {
    dram_j_[{window, index}] += std::max(0.0, joules);
  }
}

void WindowEnergyCounters::erase(const std::string& window) {
  erase_window(gpu_j_, window);
  erase_window(cpu_j_, window);
  erase_window(dram_j_, window);
}

void WindowEnergyCounters::render(std::string& out) const {
  render_series(out, "energy_monitor_gpu_energy_joules_total", "counter",
                "GPU energy of each window since it began, in joules", gpu_j_);
  render_series(out, "energy_monitor_cpu_energy_joules_total", "counter",
                "CPU package energy of each window since it began, in joules", cpu_j_);
  render_series(out, "energy_monitor_dram_energy_joules_total", "counter",
                "DRAM energy of each window since it began, in joules", dram_j_);
}

std::optional<double> WindowEnergyCounters::value(std::string_view kind, const std::string& window,
                                                  int index) const {
  if (kind == "gpu") {
    return find(gpu_j_, window, index);
  }
  if (kind == "cpu") {
    return find(cpu_j_, window, index);
  }
  if (kind == "dram") {
    return find(dram_j_, window, index);
  }
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("energy kind '{}' is not gpu, cpu or dram", kind));
}

void WindowPowerGauges::set(const std::string& window, int index, double watts) {
  watts_[{window, index}] = watts;
}

void WindowPowerGauges::erase(const std::string& window) {
  erase_window(watts_, window);
}

void WindowPowerGauges::render(std::string& out) const {
  render_series(out, "power_monitor_gpu_power_watts", "gauge",
                "GPU instant power during each window, in watts", watts_);
}

std::optional<double> WindowPowerGauges::value(const std::string& window, int index) const {
  return find(watts_, window, index);
}

}  // namespace zeus::metrics
