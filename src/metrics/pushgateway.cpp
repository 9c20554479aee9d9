// PushgatewayClient (on the one HTTP client, http/client.hpp) and the counter and gauge families
// that the pushers send, in the text format of metrics/exposition.hpp.
#include "zeus/metrics/pushgateway.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/base64.hpp"
#include "common/text.hpp"
#include "http/client.hpp"
#include "http/url.hpp"
#include "metrics/exposition.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"

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

// URL-safe base64 with padding, which the Pushgateway decodes in "@base64" path segments; "="
// is its spelling of an empty value.
std::string base64_url(std::string_view bytes) {
  const std::string encoded = base64url_encode(bytes, Base64Padding::kPadded);
  return encoded.empty() ? "=" : encoded;
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

}  // namespace

std::string pushgateway_group_path(std::string_view job, const GroupingKey& grouping) {
  std::string path = "/metrics" + group_segment("job", job);
  for (const auto& [name, value] : grouping) {
    path.append(group_segment(name, value));
  }
  return path;
}

struct PushgatewayClient::State {
  std::string path;  // prefix + group path
  std::string group_url;
  std::unique_ptr<http::Client> client;
};

PushgatewayClient::PushgatewayClient(PushgatewayOptions options)
    : state_(std::make_unique<State>()) {
  State& state = *state_;
  const http::Url url = http::parse_url(options.url, {"Pushgateway", false});
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
  http::ClientOptions client_options;
  client_options.connect_timeout_s = check_timeout(options.connect_timeout_s, "connect");
  client_options.read_timeout_s = check_timeout(options.timeout_s, "read");
  client_options.write_timeout_s = client_options.read_timeout_s;
  // The two timeouts bound the whole push, however slowly the gateway answers; its answer (empty
  // when all is well) is read up to a bound (outside_services.hpp).
  client_options.total_timeout_s = client_options.connect_timeout_s + client_options.read_timeout_s;
  client_options.max_body_bytes = outside_services::kPushgatewayMaxBodyBytes;
  state.path = pushgateway_group_path(options.job, options.grouping);
  state.group_url = url.base() + state.path;
  try {
    state.client = std::make_unique<http::Client>(url, std::move(client_options));
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("Pushgateway URL \"{}\": {}", options.url, error.what()));
  }
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
  state_->client->cancel();
}

void PushgatewayClient::send(const char* method, const std::string& body) const {
  const State& state = *state_;
  const http::Client& client = *state.client;
  if (client.cancelled()) {
    throw Error(ErrorKind::kUnavailable,
                fmt::format("push to the Pushgateway at {} not sent: the pusher is shutting down",
                            state.group_url));
  }
  http::ClientRequest request;
  request.method = method;
  request.target = state.path;
  if (request.method != "DELETE") {
    request.body = body;
    request.content_type = "text/plain; version=0.0.4; charset=utf-8";
  }
  const http::Outcome outcome = client.send(request);
  if (!outcome.response) {
    const std::string why = outcome.failure == http::Failure::kCancelled
                                ? "the push was cancelled (shutting down)"
                                : http::describe(outcome, client.options());
    throw Error(ErrorKind::kUnavailable,
                fmt::format("{} to the Pushgateway at {} failed: {} (timeouts: connect {} s, "
                            "read {} s)",
                            method, state.group_url, why, client.options().connect_timeout_s,
                            client.options().read_timeout_s));
  }
  const http::ClientResponse& response = *outcome.response;
  if (response.status < 200 || response.status >= 300) {
    std::string answer(text::trim(response.body));
    if (answer.size() > 500) {
      answer = answer.substr(0, 500) + "...";
    }
    throw Error(ErrorKind::kUnavailable,
                fmt::format("{} to the Pushgateway at {} was refused with HTTP {}: {}", method,
                            state.group_url, response.status,
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
