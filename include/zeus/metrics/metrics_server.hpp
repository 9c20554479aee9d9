// The exporter's HTTP side: GET /metrics on the hardened HTTP host (docs/prometheus.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zeus::http {
class Host;
}

namespace zeus::metrics {

// An HTTP server answering GET /metrics (and / with a link) from its sources, concatenated,
// on the hardened HTTP host (zeus::http).
class MetricsServer {
 public:
  using Source = std::function<void(std::string& out)>;

  // Binds host:port (port 0: any free port). Throws Error(kIo) saying the address is in use or
  // cannot be bound, and what to do.
  MetricsServer(const std::string& host, int port, std::vector<Source> sources);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  // Serves on a background thread until stop() (or destruction).
  void start();
  void stop();
  // The body GET /metrics returns.
  std::string render() const;

 private:
  std::string host_;
  int port_ = 0;
  std::vector<Source> sources_;
  std::atomic<std::uint64_t> scrapes_{0};
  std::unique_ptr<http::Host> server_;  // last: stopped before the sources go
};

}  // namespace zeus::metrics
