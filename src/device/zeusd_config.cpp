// ZeusdConfig from the environment: ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT and ZEUSD_TOKEN.
#include "zeus/device/zeusd_config.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "zeus/common/error.hpp"

namespace zeus::device {
namespace {

std::optional<std::string> non_empty(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  if (value && value->empty()) {
    return std::nullopt;
  }
  return value;
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

}  // namespace zeus::device
