// Where the one HTTP client reaches zeusd: its Unix socket or host:port (ZeusdConfig), for the
// daemon's requests (zeusd_connection.cpp) and its power streams (zeusd_stream.cpp).
#pragma once

#include "http/client.hpp"
#include "http/url.hpp"
#include "zeus/device/zeusd_config.hpp"

namespace zeus::device {

// The daemon's URL; for a socket, also sets options.unix_socket_path (Host then names the
// socket, as the reference client's does).
inline http::Url zeusd_url(const ZeusdConfig& config, http::ClientOptions& options) {
  http::Url url;
  if (config.socket_path) {
    options.unix_socket_path = config.socket_path;
    url.host = *config.socket_path;
  } else {
    url.host = config.host;
    url.port = config.port;
    url.port_given = true;
  }
  return url;
}

}  // namespace zeus::device
