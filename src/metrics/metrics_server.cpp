// MetricsServer: GET /metrics on the HTTP host (zeus::http), the one place this layer uses it.
#include <fmt/format.h>

#include <cerrno>

#include "http/host.hpp"
#include "metrics/exposition.hpp"
#include "zeus/common/error.hpp"
#include "zeus/metrics/prometheus.hpp"

namespace zeus::metrics {

MetricsServer::MetricsServer(const std::string& host, int port, std::vector<Source> sources)
    : host_(host), sources_(std::move(sources)) {
  if (port < 0 || port > 65535) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("metrics port {} is out of range; use 1-65535 (or 0 for any)", port));
  }
  http::HostOptions options;
  options.name = "zeus exporter";
  options.worker_threads = 2;
  // Scrapes carry no body.
  options.limits.max_body_bytes = 4096;
  options.limits.max_connections = 256;
  options.limits.max_connections_per_peer = 64;
  options.error_body = [](int status, const std::string& message, http::Response& res) {
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.body = message + "\n";
  };
  server_ = std::make_unique<http::Host>(
      std::move(options), [this](const http::Request& req, http::Response& res) {
        if (req.method != "GET" && req.method != "HEAD") {
          res.status = 405;
          res.content_type = "text/plain; charset=utf-8";
          res.body = "only GET is served\n";
          res.headers.emplace_back("Allow", "GET");
          return;
        }
        if (req.path == "/metrics") {
          scrapes_.fetch_add(1, std::memory_order_relaxed);
          res.content_type = "text/plain; version=0.0.4; charset=utf-8";
          res.body = render();
        } else if (req.path == "/") {
          res.content_type = "text/html; charset=utf-8";
          res.body =
              "<html><head><title>zeus exporter</title></head><body><h1>zeus exporter</h1>"
              "<p><a href=\"/metrics\">/metrics</a></p></body></html>\n";
        } else {
          res.status = 404;
          res.content_type = "text/plain; charset=utf-8";
          res.body = "not found; metrics are at /metrics\n";
        }
      });
  try {
    port_ = server_->bind_tcp(host, port);
  } catch (const http::BindError& e) {
    const std::string reason =
        e.error_number() == EADDRINUSE
            ? "the address is already in use (another exporter or program listens there); "
              "choose another --port, or stop that program"
            : fmt::format("{}; check the host name or address and the port", e.what());
    throw Error(ErrorKind::kIo,
                fmt::format("cannot serve metrics on {}:{}: {}", host, port, reason));
  }
}

MetricsServer::~MetricsServer() {
  stop();
}

void MetricsServer::start() {
  server_->start();
}

void MetricsServer::stop() {
  server_->stop();
  server_->join();
}

std::string MetricsServer::render() const {
  std::string out;
  out.reserve(8192);
  for (const Source& source : sources_) {
    source(out);
  }
  write_family_header(out, "zeus_exporter_scrapes_total", "counter",
                      "Scrapes of /metrics served by this process");
  fmt::format_to(std::back_inserter(out), "zeus_exporter_scrapes_total {}\n",
                 scrapes_.load(std::memory_order_relaxed));
  return out;
}

}  // namespace zeus::metrics
