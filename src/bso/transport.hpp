// One BSO route over the one HTTP client (http/client.hpp) with its retry loop (http/retry.hpp,
// the policy of RetryPolicy in zeus/bso/rpc_client.hpp): the bearer token, the BSO's reading of
// the server's error bodies, and the ServerError that names the route, the status and the
// server's message. Internal to the client.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/client.hpp"
#include "zeus/bso/rpc_client.hpp"

namespace zeus::bso {

// A body as quoted in an error message: cut to a few hundred characters.
std::string quote_body(const std::string& body);

class Transport {
 public:
  struct Answer {
    int status = 0;
    std::string body;
  };

  // Throws Error(kNotSupported) for https in a build without TLS.
  Transport(const ServerUrl& url, const ClientOptions& options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // One route with retries; returns a 2xx answer, or one of the statuses in `accepted`; throws
  // ServerError otherwise. Requests are serialised.
  Answer request(const std::string& method, const std::string& route_path, const std::string& query,
                 const std::string& body, const std::vector<int>& accepted = {});

 private:
  ServerUrl url_;
  RetryPolicy retry_;
  double request_timeout_s_;
  std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::unique_ptr<http::Client> http_;
};

}  // namespace zeus::bso
