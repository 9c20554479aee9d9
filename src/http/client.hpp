// The one HTTP client of zeus (the client half of src/http: target zeus::http_client, on
// cpp-httplib, no Boost). Every call to an outside service goes through it: the BSO server,
// zeusd (TCP or its Unix socket, plain requests and SSE streams), the Pushgateway,
// ElectricityMaps, OpenEI and `zeus demo`'s readiness probe. One place holds what each of them
// needs: TCP, Unix-socket and TLS connections (the certificate always verified), connect, read
// and write timeouts, a deadline on the whole exchange, SIGPIPE held off the calling thread, a
// bounded body, cancellation from another thread, and (retry.hpp) retries with backoff and an
// overall deadline on the injected Clock. The defaults each service's client sets are in
// zeus/common/outside_services.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/url.hpp"

namespace zeus::http {

using Fields = std::vector<std::pair<std::string, std::string>>;

// "name=value&..." with each value percent-encoded, in the order of the names.
std::string query_string(const Fields& parameters);

struct ClientOptions {
  double connect_timeout_s = 5.0;
  double read_timeout_s = 5.0;  // the longest wait for the next bytes of an answer
  double write_timeout_s = 5.0;
  // The whole of one exchange (connect, request, every byte of the answer), however slowly the
  // bytes come: past it the exchange is stopped and fails with kDeadline. 0: none (the per-read
  // timeouts alone, for a long-lived stream).
  double total_timeout_s = 0.0;
  // A body longer than this is not read further: the call fails with kTooLarge. 0: no limit.
  std::size_t max_body_bytes = 0;
  // One connection kept and reused (calls are then serialised); otherwise one per call, and
  // calls may run concurrently.
  bool keep_alive = false;
  bool tcp_nodelay = false;  // headers and body leave at once, without waiting for an ACK
  // https: the PEM file of the CAs that sign the server's certificate; the system's when empty.
  std::string ca_cert_path;
  // Connect to this Unix socket instead of TCP (the URL's host and port then only fill Host).
  std::optional<std::string> unix_socket_path;
  // Sent as "Authorization: Bearer <token>".
  std::optional<std::string> bearer_token;
};

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // path and query, after the URL's prefix
  Fields headers;
  std::string body;
  std::string content_type;  // sent as Content-Type when not empty
  // This exchange's deadline when shorter than the client's total_timeout_s (what is left of a
  // retry loop's overall deadline); 0: the client's.
  double timeout_s = 0.0;
};

struct ClientResponse {
  int status = 0;
  std::string body;
  Fields headers;
  // The first value of header `name` (any case); "" when there is none.
  std::string header(std::string_view name) const;
};

// Why no (complete) answer came.
enum class Failure {
  kNone,
  kConnect,         // refused, reset or unreachable
  kConnectTimeout,  // no connection within connect_timeout_s
  kRead,            // the answer stopped: closed, or nothing for read_timeout_s
  kWrite,           // the request could not be sent
  kTls,             // the TLS handshake failed
  kTlsVerify,       // the server's certificate was refused, or the CA file could not be read
  kTooLarge,        // the body passed max_body_bytes
  kDeadline,        // the exchange was not over within its deadline (total_timeout_s)
  kCancelled,       // cancel() was called, or a stream callback asked to stop
  kOther,
};

struct Outcome {
  std::optional<ClientResponse> response;  // set when an answer came
  Failure failure = Failure::kNone;
  std::string detail;       // what cpp-httplib said about the failure
  double deadline_s = 0.0;  // kDeadline: the deadline that passed
  explicit operator bool() const { return response.has_value(); }
};

// One phrase for a failure, the same at every call site: "cannot connect (refused or
// unreachable)", "no connection within 2 s", "no complete answer within 5 s (the connection was
// closed, or nothing came)", "no complete answer within the 6 s deadline", ...
std::string describe(const Outcome& outcome, const ClientOptions& options);

class Client {
 public:
  // Throws Error(kNotSupported) for https in a build without TLS.
  Client(Url url, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One exchange, with SIGPIPE held off the calling thread. The target goes after the URL's
  // prefix. Never throws for a network failure: the outcome says what happened.
  Outcome send(const ClientRequest& request) const;

  // An exchange whose body is handed over as it arrives (an SSE stream): `on_head` sees the
  // status and headers (an empty body) before any byte of the body and returns false to stop;
  // `on_data` returns false to stop. max_body_bytes does not apply; total_timeout_s does. A
  // callback that throws ends the exchange and the exception is rethrown from here.
  Outcome stream(const ClientRequest& request,
                 const std::function<bool(const ClientResponse& head)>& on_head,
                 const std::function<bool(std::string_view bytes)>& on_data) const;

  // Ends every exchange in flight (from any thread) and makes later ones fail at once with
  // kCancelled, even one that is about to connect.
  void cancel() const;
  bool cancelled() const;

  const Url& url() const { return url_; }
  const ClientOptions& options() const { return options_; }

 private:
  struct State;
  Url url_;
  ClientOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace zeus::http
