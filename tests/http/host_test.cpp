// The HTTP host against hostile and ordinary clients, over real sockets.
#include "http/host.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <thread>
#include <vector>

#include "http/raw_client.hpp"
#include "support/temp_dir.hpp"

namespace zeus::http {
namespace {

using namespace std::chrono_literals;
using testing::RawClient;

// Echoes what it got: method, path, params and body, as plain text.
void echo(const Request& req, Response& res) {
  res.content_type = "text/plain";
  res.body = req.method + " " + req.path;
  for (const auto& [key, value] : req.params) {
    res.body += " " + key + "=" + value;
  }
  res.body += " body=" + req.body;
  if (req.path == "/big") {
    res.body = std::string(4096, 'x');
  }
  if (req.path == "/slow") {
    std::this_thread::sleep_for(300ms);
  }
}

struct TestHost {
  explicit TestHost(HostOptions options = {}, Handler handler = echo)
      : host(std::move(options), std::move(handler)) {
    port = host.bind_tcp("127.0.0.1", 0);
    host.start();
  }
  ~TestHost() {
    host.stop();
    host.join();
  }
  Host host;
  int port = 0;
};

HostOptions short_limits() {
  HostOptions options;
  options.limits.header_timeout = 500ms;
  options.limits.body_timeout = 500ms;
  options.limits.idle_timeout = 500ms;
  options.limits.shutdown_grace = 2000ms;
  return options;
}

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

TEST(HttpHost, AnswersAndKeepsTheConnectionAlive) {
  TestHost server;
  RawClient client = RawClient::tcp(server.port);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.send(get("/a%20b?x=1&y=%C3%A9+z")));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "GET /a%20b x=1 y=\xC3\xA9 z body=");
  }
  EXPECT_EQ(server.host.stats().requests, 3u);
}

TEST(HttpHost, ReadsContentLengthAndChunkedBodiesWithTrailers) {
  TestHost server;
  RawClient client = RawClient::tcp(server.port);
  ASSERT_TRUE(client.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "POST /p body=hello");
  ASSERT_TRUE(
      client.send("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                  "chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n"
                  "X-Trailer: 1\r\n\r\n"));
  response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /p body=abcde");
}

TEST(HttpHost, AnswersAHalfClosedRequest) {
  TestHost server;
  RawClient client = RawClient::tcp(server.port);
  ASSERT_TRUE(client.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"));
  client.shutdown_write();
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST /p body=ok");
}

TEST(HttpHost, RefusesMalformedHeads) {
  TestHost server;
  const std::vector<std::pair<std::string, int>> cases = {
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
      {std::string("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n", 36), 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
      {"GET /?a=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"GET http://example/ HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx", 415},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       400},
  };
  for (const auto& [request, status] : cases) {
    SCOPED_TRACE(request);
    RawClient client = RawClient::tcp(server.port);
    ASSERT_TRUE(client.send(request));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, status);
    EXPECT_NE(response->body.find("\"detail\""), std::string::npos) << response->body;
    EXPECT_TRUE(client.closed_within(2s));
  }
  EXPECT_EQ(server.host.stats().requests, 0u);
}

TEST(HttpHost, BoundsHeaderBytesAndCount) {
  HostOptions options;
  options.limits.max_header_bytes = 2048;
  options.limits.max_header_count = 10;
  TestHost server(options);
  {
    RawClient client = RawClient::tcp(server.port);
    client.send(get("/", "X-Big: " + std::string(4000, 'a') + "\r\n"));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 431);
  }
  {
    std::string many;
    for (int i = 0; i < 11; ++i) {
      many += "X-" + std::to_string(i) + ": 1\r\n";
    }
    RawClient client = RawClient::tcp(server.port);
    client.send(get("/", many));
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 431);
  }
  {
    // Millions of header lines never reach the handler nor grow memory: the head limit cuts them.
    RawClient client = RawClient::tcp(server.port);
    client.send("GET / HTTP/1.1\r\n");
    std::string lines;
    for (int i = 0; i < 1000; ++i) {
      lines += "A: b\r\n";
    }
    for (int i = 0; i < 50 && client.send(lines); ++i) {
    }
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 431);
  }
}

TEST(HttpHost, EnforcesTheBodyLimitOnChunkedBodies) {
  HostOptions options;
  options.limits.max_body_bytes = 1000;
  TestHost server(options);
  {
    RawClient client = RawClient::tcp(server.port);
    client.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 413);
  }
  {
    RawClient client = RawClient::tcp(server.port);
    client.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "100\r\n" + std::string(256, 'a') + "\r\n";
    for (int i = 0; i < 200 && client.send(chunk); ++i) {
    }
    auto response = client.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 413);
  }
  EXPECT_EQ(server.host.stats().requests, 0u);
}

TEST(HttpHost, SlowHeadersHoldNoWorkerAndTimeOut) {
  HostOptions options = short_limits();
  options.worker_threads = 2;
  options.limits.header_timeout = 1500ms;
  TestHost server(options);
  // 64 connections that drip one header line at a time.
  std::vector<RawClient> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(RawClient::tcp(server.port));
    slow.back().send("GET / HTTP/1.1\r\nX-Slow: 1\r\n");
  }
  for (int probe = 0; probe < 5; ++probe) {
    for (auto& client : slow) {
      client.send("X-More: 1\r\n");
    }
    RawClient valid = RawClient::tcp(server.port);
    valid.send(get("/ok"));
    const auto started = std::chrono::steady_clock::now();
    auto response = valid.read_response(1000ms);
    ASSERT_TRUE(response) << "probe " << probe;
    EXPECT_EQ(response->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 500ms);
  }
  // The whole-head deadline: each slow client gets 408 and is closed.
  for (auto& client : slow) {
    auto response = client.read_response(3000ms);
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 408);
  }
  EXPECT_GE(server.host.stats().timeouts, 64u);
}

TEST(HttpHost, ClosesIdleConnections) {
  TestHost server(short_limits());
  RawClient idle = RawClient::tcp(server.port);
  EXPECT_TRUE(idle.closed_within(2000ms));
  RawClient kept = RawClient::tcp(server.port);
  kept.send(get("/"));
  ASSERT_TRUE(kept.read_response());
  EXPECT_TRUE(kept.closed_within(2000ms));
}

TEST(HttpHost, BodyDeadline) {
  TestHost server(short_limits());
  RawClient client = RawClient::tcp(server.port);
  client.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  auto response = client.read_response(3000ms);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 408);
}

TEST(HttpHost, CapsConnectionsPerPeerAndInAll) {
  HostOptions options;
  options.limits.max_connections_per_peer = 4;
  TestHost server(options);
  std::vector<RawClient> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(RawClient::tcp(server.port));
    held.back().send(get("/"));
    ASSERT_TRUE(held.back().read_response());
  }
  RawClient extra = RawClient::tcp(server.port);
  auto refused = extra.read_response();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_TRUE(refused->has_header("retry-after"));
  EXPECT_GE(server.host.stats().connections_refused, 1u);
  held.pop_back();
  // Once one closes, a new connection is served.
  for (int attempt = 0; attempt < 50; ++attempt) {
    RawClient again = RawClient::tcp(server.port);
    again.send(get("/"));
    auto response = again.read_response();
    if (response && response->status == 200) {
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  FAIL() << "no connection was served after one closed";
}

TEST(HttpHost, CompressesOnlyLargeResponsesThatAskForIt) {
  TestHost server;
  RawClient client = RawClient::tcp(server.port);
  client.send(get("/small", "Accept-Encoding: gzip, br\r\n"));
  auto small = client.read_response();
  ASSERT_TRUE(small);
  EXPECT_FALSE(small->has_header("content-encoding"));
  client.send(get("/big"));
  auto plain = client.read_response();
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_header("content-encoding"));
  EXPECT_EQ(plain->body.size(), 4096u);
  client.send(get("/big", "Accept-Encoding: gzip;q=0\r\n"));
  auto refused = client.read_response();
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->has_header("content-encoding"));
  client.send(get("/big", "Accept-Encoding: gzip\r\n"));
  auto compressed = client.read_response();
  ASSERT_TRUE(compressed);
  EXPECT_TRUE(compressed->has_header("content-encoding: gzip"));
  EXPECT_LT(compressed->body.size(), 200u);
  // It inflates to the original.
  std::string out(8192, '\0');
  z_stream stream{};
  ASSERT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
  stream.next_in = reinterpret_cast<Bytef*>(compressed->body.data());
  stream.avail_in = static_cast<uInt>(compressed->body.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  EXPECT_EQ(stream.total_out, 4096u);
  inflateEnd(&stream);
}

TEST(HttpHost, IgnoresRange) {
  TestHost server;
  std::string ranges = "Range: bytes=0-";
  for (int i = 1; i < 1000; ++i) {
    ranges.append(",0-");
  }
  RawClient client = RawClient::tcp(server.port);
  client.send(get("/big", ranges + "\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body.size(), 4096u);
}

TEST(HttpHost, HeadFilterAnswersBeforeTheBody) {
  HostOptions options;
  options.head_filter = [](const Request& head, Response& res) {
    if (head.header("authorization")) {
      return false;
    }
    res.status = 401;
    res.body = R"({"detail":"no"})";
    return true;
  };
  std::atomic<int> handled{0};
  TestHost server(options, [&handled](const Request& req, Response& res) {
    ++handled;
    echo(req, res);
  });
  RawClient client = RawClient::tcp(server.port);
  // A chunked upload far over the body limit: refused on its head, the body never read.
  client.send("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "10000\r\n" + std::string(65536, 'a') + "\r\n";
  for (int i = 0; i < 8 && client.send(chunk); ++i) {
  }
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 401);
  EXPECT_TRUE(client.closed_within(3s));
  EXPECT_EQ(handled.load(), 0);
  RawClient authorized = RawClient::tcp(server.port);
  authorized.send("POST / HTTP/1.1\r\nHost: x\r\nAuthorization: x\r\nContent-Length: 1\r\n\r\nz");
  response = authorized.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
}

TEST(HttpHost, AnswersExpectContinue) {
  TestHost server;
  RawClient client = RawClient::tcp(server.port);
  client.send("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  auto interim = client.read_head_only(2s);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  client.send("abc");
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "POST / body=abc");
}

TEST(HttpHost, HandlerExceptionsBecomeAGeneric500) {
  TestHost server({}, [](const Request&, Response&) { throw std::runtime_error("secret detail"); });
  RawClient client = RawClient::tcp(server.port);
  client.send(get("/"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 500);
  EXPECT_EQ(response->body.find("secret"), std::string::npos);
}

TEST(HttpHost, StopFinishesRequestsInFlightAndDropsSlowClients) {
  auto server = std::make_unique<TestHost>(short_limits());
  std::vector<RawClient> dripping;
  for (int i = 0; i < 10; ++i) {
    dripping.push_back(RawClient::tcp(server->port));
    dripping.back().send("GET / HTTP/1.1\r\n");
  }
  RawClient idle = RawClient::tcp(server->port);
  RawClient busy = RawClient::tcp(server->port);
  busy.send(get("/slow"));
  std::this_thread::sleep_for(50ms);
  const auto started = std::chrono::steady_clock::now();
  server->host.stop();
  auto response = busy.read_response(2s);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_TRUE(response->has_header("connection: close"));
  server->host.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1500ms);
  for (auto& client : dripping) {
    EXPECT_TRUE(client.closed_within(100ms));
  }
  EXPECT_TRUE(idle.closed_within(100ms));
  EXPECT_THROW(RawClient::tcp(server->port), std::runtime_error);
}

TEST(HttpHost, StopCutsRequestsPastTheGrace) {
  HostOptions options = short_limits();
  options.limits.shutdown_grace = 200ms;
  std::atomic<bool> release{false};
  auto server = std::make_unique<TestHost>(options, [&release](const Request&, Response&) {
    while (!release) {
      std::this_thread::sleep_for(10ms);
    }
  });
  RawClient stuck = RawClient::tcp(server->port);
  stuck.send(get("/"));
  std::this_thread::sleep_for(50ms);
  const auto started = std::chrono::steady_clock::now();
  server->host.stop();
  EXPECT_TRUE(stuck.closed_within(1500ms));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1000ms);
  release = true;
  server.reset();
}

TEST(HttpHost, StreamsUntilTheClientLeavesOrTheHostStops) {
  std::atomic<int> ticks{0};
  TestHost server({}, [&ticks](const Request&, Response& res) {
    res.content_type = "text/event-stream";
    res.stream = std::make_shared<StreamSource>();
    res.stream->period = 20ms;
    res.stream->next = [&ticks](std::string& out) {
      out += "data: " + std::to_string(ticks++) + "\n\n";
      return true;
    };
  });
  {
    RawClient client = RawClient::tcp(server.port);
    client.send(get("/stream"));
    auto head = client.read_head_only(2s);
    ASSERT_TRUE(head);
    EXPECT_TRUE(head->has_header("transfer-encoding: chunked"));
    for (int i = 0; i < 3; ++i) {
      auto chunk = client.read_chunk(2s);
      ASSERT_TRUE(chunk);
      EXPECT_EQ(chunk->rfind("data: ", 0), 0u);
    }
  }
  // The client left: the stream stops ticking.
  std::this_thread::sleep_for(200ms);
  const int after_leave = ticks.load();
  std::this_thread::sleep_for(200ms);
  EXPECT_LE(ticks.load(), after_leave + 1);
  EXPECT_EQ(server.host.stats().open_connections, 0u);

  RawClient client = RawClient::tcp(server.port);
  client.send(get("/stream"));
  ASSERT_TRUE(client.read_head_only(2s));
  ASSERT_TRUE(client.read_chunk(2s));
  server.host.stop();
  EXPECT_TRUE(client.closed_within(2s));
  server.host.join();
}

TEST(HttpHost, UnixSocketsCarryPeerCredentials) {
  testing::TempDir dir("zeus-http");
  const std::string path = (dir.path() / "s.sock").string();
  Host host({}, [](const Request& req, Response& res) {
    res.content_type = "text/plain";
    res.body = req.peer.credentials ? std::to_string(req.peer.credentials->pid) : "none";
  });
  host.bind_unix(path);
  host.start();
  RawClient client = RawClient::unix_socket(path);
  client.send(get("/"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, std::to_string(::getpid()));
  host.stop();
  host.join();
}

TEST(HttpHost, BindErrorsSayWhy) {
  TestHost first;
  Host second({}, echo);
  try {
    second.bind_tcp("127.0.0.1", first.port);
    FAIL() << "bound a port in use";
  } catch (const BindError& e) {
    EXPECT_EQ(e.error_number(), EADDRINUSE);
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port)), std::string::npos);
  }
  EXPECT_THROW(second.bind_tcp("no-such-host.invalid", 0), BindError);
  EXPECT_THROW(second.bind_tcp("127.0.0.1", 70000), BindError);
}

TEST(HttpText, PercentDecodingAndBearer) {
  EXPECT_EQ(percent_decode("a%2Fb+c", false), "a/b+c");
  EXPECT_EQ(percent_decode("a%2fb+c", true), "a/b c");
  EXPECT_FALSE(percent_decode("%", true));
  EXPECT_FALSE(percent_decode("%4", true));
  EXPECT_FALSE(percent_decode("%zz", true));
  const auto query = parse_query("a=1&&b=&c&d=%41");
  ASSERT_TRUE(query);
  ASSERT_EQ(query->size(), 4u);
  EXPECT_EQ((*query)[3].second, "A");
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer abc"), "abc");
  EXPECT_EQ(bearer_token("BEARER   abc  "), "abc");
  EXPECT_FALSE(bearer_token("Basic abc"));
  EXPECT_FALSE(bearer_token("Bearer"));
  EXPECT_FALSE(bearer_token("Bearerabc"));
}

}  // namespace
}  // namespace zeus::http
