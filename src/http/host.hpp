// The one HTTP host of zeus-cpp: `zeus bso serve`, `zeusd serve` and the Prometheus exporter all
// serve through it (docs/security.md lists its limits).
//
// Event-driven on Boost.Asio with Boost.Beast's HTTP/1.1 parser: connections live on a few I/O
// threads and hold no worker while they are idle, slow or streaming; a request occupies one of
// the worker threads only once its head and body have arrived in full. Every connection is
// bounded: a deadline for the whole request head and another for the body, limits on header
// bytes and count and on the body (chunked bodies included; compressed request bodies are
// refused), a cap on connections under which idle ones give way to newcomers, a hard per-peer
// cap, a bounded keep-alive, and a graceful stop that finishes requests in flight within a
// deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeus/common/error.hpp"

namespace zeus::http {

// The process at the other end of a Unix-socket connection (SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct Peer {
  std::string address;                         // "127.0.0.1", "::1", or "unix"
  int port = 0;                                // 0 on Unix sockets
  std::optional<PeerCredentials> credentials;  // Unix sockets, when the kernel says
};

using Fields = std::vector<std::pair<std::string, std::string>>;

// One parsed request. Header names are lower case; the query string is percent-decoded once
// ('+' is a space); the path is not decoded (percent_decode() it where a route wants to).
struct Request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // the request-target as sent
  std::string path;    // the target before '?'
  std::string query;   // the target after '?', raw
  Fields params;       // decoded query parameters, in order
  Fields headers;
  std::string body;  // decoded (chunked bodies de-chunked); empty in a head filter
  Peer peer;

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
  bool has_param(std::string_view name) const;
  // The first value of that parameter, if any.
  std::optional<std::string> param(std::string_view name) const;
  std::size_t param_count(std::string_view name) const;
};

// A response body produced piece by piece (server-sent events). `next` runs on a worker thread
// right away and then every `period` until it returns false, the client goes away, or the host
// stops; what it appends to `out` goes out as one chunk (nothing is sent when it appends none).
struct StreamSource {
  std::chrono::milliseconds period{1000};
  std::function<bool(std::string& out)> next;
  // `next` never blocks and costs microseconds (it copies what another thread already read): it
  // then runs on the connection's I/O thread, sparing each subscriber two thread hand-offs a
  // period. Leave false for a `next` that reads hardware or waits.
  bool non_blocking = false;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Fields headers;  // extra headers (WWW-Authenticate, Cache-Control, ...)
  // When set, the body is streamed (chunked) from it and `body` is ignored.
  std::shared_ptr<StreamSource> stream;
  // Ask the host to close the connection after this response.
  bool close = false;
};

// Runs on a worker thread. An exception that escapes becomes a 500 with a generic message (the
// exception's text goes to the log only).
using Handler = std::function<void(const Request&, Response&)>;
// Runs on an I/O thread with the head only (body empty), before the body is read: return true
// with `response` filled to answer without reading the body (e.g. 401 before a large upload).
// Keep it cheap and non-blocking.
using HeadFilter = std::function<bool(const Request& head, Response& response)>;
// The body of the errors the host answers itself (400, 408, 413, 415, 431, 503, ...).
using ErrorBody = std::function<void(int status, const std::string& message, Response& response)>;

struct HostLimits {
  std::size_t max_header_bytes = 16 * 1024;  // request line and headers together -> 431
  std::size_t max_header_count = 100;        // -> 431
  std::size_t max_body_bytes = 1 << 20;      // after de-chunking -> 413
  // From the first byte of a request to the end of its head (408 and close), and from the end
  // of the head to the end of the body.
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  // How long a connection may wait for the first byte of its next request (or of its first).
  std::chrono::milliseconds idle_timeout{5'000};
  // For writing one response (a client that does not read is dropped).
  std::chrono::milliseconds write_timeout{10'000};
  std::size_t max_requests_per_connection = 1000;
  // Connections open at once, and of those from one peer (one IP address, or one uid on a Unix
  // socket). At max_connections a newcomer evicts an idle connection (no whole request head
  // yet, idle between requests, or lingering): the oldest-idle one of the peer holding the
  // most connections; it gets 503 and is closed only when none is evictable. Connections
  // handling, writing or streaming are never evicted. max_connections_per_peer is hard: past it
  // a connection gets 503 and is closed (docs/security.md, "Connection limits and eviction").
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 256;
  // stop(): requests in flight get this long to finish before connections are cut.
  std::chrono::milliseconds shutdown_grace{10'000};
  // Responses at least this large are gzip-compressed when the client accepts gzip.
  std::size_t compress_min_bytes = 1024;
};

struct HostOptions {
  std::string name = "http";  // in log lines: "zeus bso", "zeusd", ...
  HostLimits limits;
  int worker_threads = 8;  // requests handled at once
  int io_threads = 1;
  int listen_backlog = 1024;
  HeadFilter head_filter;  // optional
  ErrorBody error_body;    // default: {"detail": message} as JSON
};

// A bind failure; `error_number` is the errno (EADDRINUSE, EACCES, ...).
class BindError : public Error {
 public:
  BindError(const std::string& message, int error_number)
      : Error(ErrorKind::kIo, message), error_number_(error_number) {}
  int error_number() const noexcept { return error_number_; }

 private:
  int error_number_;
};

struct HostStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t connections_refused = 0;  // over a connection cap
  std::uint64_t connections_evicted = 0;  // idle ones closed to admit a newcomer at the cap
  std::uint64_t requests = 0;             // answered by the handler
  std::uint64_t rejected_requests = 0;    // answered by the host itself (4xx/5xx)
  std::uint64_t timeouts = 0;             // head, body, idle or write deadlines hit
  std::size_t open_connections = 0;
  std::size_t evicting_connections = 0;  // of those, picked to make room and closing
};

class Host {
 public:
  Host(HostOptions options, Handler handler);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // Listens on host:port (port 0: any free one); returns the port. Throws BindError.
  int bind_tcp(const std::string& host, int port);
  // Listens on a Unix socket at `path` (which must not exist; the caller prepares it and sets
  // the umask). Throws BindError.
  void bind_unix(const std::filesystem::path& path);

  // Serves until stop(); returns once every connection is closed (at most shutdown_grace after
  // stop()). Call once, after bind_*.
  void serve();
  // Starts serve() on a background thread and returns.
  void start();
  // Stops accepting, closes idle and half-read connections, lets requests in flight finish
  // (their responses close the connection) and ends streams; past shutdown_grace everything is
  // closed. Thread-safe and async-signal-unsafe; may be called before serve() and repeatedly.
  void stop();
  // Waits for a start()ed host to finish (after stop()).
  void join();

  bool running() const;
  HostStats stats() const;

  struct Impl;  // defined in host.cpp

 private:
  std::shared_ptr<Impl> impl_;
};

// Percent-decodes `text` ('+' as a space when `plus_is_space`); nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
// Parses a query string into decoded pairs; nullopt on a malformed escape.
std::optional<Fields> parse_query(std::string_view query);
// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b);

// RFC 9110's optional whitespace around a header value or a token: spaces and tabs.
inline constexpr std::string_view kOptionalWhitespace = " \t";
// The token of an `Authorization: Bearer <token>` header (the scheme matched case-insensitively,
// RFC 7235); nullopt for another scheme or none.
std::optional<std::string_view> bearer_token(std::string_view authorization);
// The standard reason phrase of a status code ("Not Found"), or "Unknown".
std::string_view reason_phrase(int status);

}  // namespace zeus::http
