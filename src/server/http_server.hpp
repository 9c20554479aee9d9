// The batch-size-optimizer's HTTP front: the reference's routes (POST /jobs,
// GET /jobs/batch_size, POST /report, PATCH /trials, DELETE /jobs) plus GET /jobs/{id},
// GET /jobs and GET /healthz, served by the hardened HTTP host (zeus::http). JSON bodies are
// parsed whatever the Content-Type; every error is JSON ({"message"} for logic errors,
// {"detail"} for validation, routing, auth and transport errors).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http/host.hpp"
#include "http/router.hpp"
#include "server/peer_rate.hpp"
#include "server/service.hpp"

namespace zeus::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see port())
  // When set, every route but /healthz needs "Authorization: Bearer <token>".
  std::string token;
  std::size_t max_body_bytes = 1 << 20;  // larger bodies get 413 (chunked ones too)
  int threads = 64;  // requests handled at once (connections are not bounded by it)
  int listen_backlog = 1024;
  // Deadlines, header and connection limits of the host; max_body_bytes above overrides its
  // body limit.
  http::HostLimits limits;
  // GET/POST/PATCH /_noop answer "null" without touching the database: the HTTP stack's own
  // ceiling, for benchmarks.
  bool noop_route = false;
  // POST /jobs per peer address: a bucket of this many that refills at this many a minute;
  // beyond it 429 (0: no limit).
  int max_registrations_per_minute = 600;
};

// GET /jobs pages: `?limit=` defaults to and may not exceed kMaxJobsPage ids.
inline constexpr std::size_t kMaxJobsPage = 1000;
// Each time the answers sent since the last trim add up to this many bytes, malloc_trim gives
// what building them took back to the system (docs/security.md, "BSO listings and quotas"): a
// few pages of a long job's trials count as one large answer did.
inline constexpr std::size_t kTrimAfterAnswerBytes = 1 << 20;

// GET /jobs/{id}'s body.
nlohmann::ordered_json to_json(const JobState& state);

class HttpServer {
 public:
  HttpServer(BsoService& service, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket; throws zeus::Error(kInvalidArgument) when the address is unusable (in
  // use, not local, no permission). Returns the bound port.
  int bind();
  // Serves until stop(); bind() first.
  void serve();
  // Stops accepting, finishes requests in flight (within the host's shutdown grace), and makes
  // serve() return. Thread-safe; may be called before serve().
  void stop();
  int port() const { return port_; }
  bool running() const;

  // Requests answered so far (for logs and tests).
  std::uint64_t requests() const { return requests_.load(); }

 private:
  void add_routes();
  void handle(const http::Request& request, http::Response& response);
  bool check_token(const http::Request& head, http::Response& response) const;

  BsoService& service_;
  HttpServerOptions options_;
  http::Router router_;
  std::unique_ptr<http::Host> host_;
  int port_ = 0;
  bool bound_ = false;
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::size_t> untrimmed_bytes_{0};  // answered since the last malloc_trim
  PeerRate registrations_;
};

}  // namespace zeus::server
