// Where the zeusd daemon is, and the token for it: ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT and
// ZEUSD_TOKEN (docs/zeusd.md, "Using zeusd from jobs"). Discovery (discovery.hpp) wraps the GPUs
// in ZeusdGpus (zeusd_gpu.hpp) when they are set; ZeusdEventStream (zeusd_stream.hpp) reads the
// daemon's power streams.
#pragma once

#include <optional>
#include <string>

#include "zeus/common/env.hpp"

namespace zeus::device {

// Where the daemon is and how to authenticate.
struct ZeusdConfig {
  std::optional<std::string> socket_path;  // Unix socket; wins over host/port
  std::string host;                        // TCP when socket_path is unset
  int port = 0;
  std::optional<std::string> token;  // bearer token (ZEUSD_TOKEN)
  // Connect, read and write timeout of each request (the reference client's 5 s).
  double timeout_s = 5.0;

  // "unix socket /run/zeusd/zeusd.sock" or "127.0.0.1:4938", for messages.
  std::string describe() const;
};

// ZEUSD_SOCK_PATH (wins) or ZEUSD_HOST_PORT ("host:port"), and ZEUSD_TOKEN; empty values count
// as unset. std::nullopt when neither is set. Throws Error(kInvalidArgument) for a malformed
// ZEUSD_HOST_PORT.
std::optional<ZeusdConfig> zeusd_config_from_env(const EnvLookup& env);

}  // namespace zeus::device
