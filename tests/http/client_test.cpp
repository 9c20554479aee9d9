// The one HTTP client (src/http, zeus::http_client): base URLs, the retry rule and loop on a
// manual clock, and real exchanges with loopback peers: bodies bounded whether their length is
// announced or chunked, headers, bearer tokens, a Unix socket, a peer that never answers, and
// cancel() from another thread.
#include "http/client.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/retry.hpp"
#include "http/url.hpp"
#include "support/expect_error.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/local_http_server.hpp"
#include "support/loopback_peers.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"

namespace zeus::http {
namespace {

using zeus::testing::expect_error;

Url url_of(const std::string& text) {
  return parse_url(text, {"Test", false});
}

TEST(HttpUrl, ReadsSchemeHostPortAndPrefix) {
  Url url = url_of("HTTPS://Example.org:8443/a/b//");
  EXPECT_EQ(url.scheme, "https");
  EXPECT_EQ(url.host, "Example.org");
  EXPECT_EQ(url.port, 8443);
  EXPECT_TRUE(url.port_given);
  EXPECT_EQ(url.prefix, "/a/b");
  EXPECT_EQ(url.base(), "https://Example.org:8443/a/b");
  url = url_of(" gateway ");
  EXPECT_EQ(url.scheme, "http");
  EXPECT_EQ(url.port, 80);
  EXPECT_FALSE(url.port_given);
  EXPECT_EQ(url.base(), "http://gateway");
  EXPECT_EQ(url.with_port(), "http://gateway:80");
  url = url_of("[::1]:9000/x");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.base(), "http://[::1]:9000/x");
  EXPECT_EQ(url_of("https://h").port, 443);
}

TEST(HttpUrl, RefusesWhatIsNotABaseUrlNamingTheServiceAndTheText) {
  for (const char* bad :
       {"", "  ", "ftp://h", "http://", "http://:80", "http://h:0", "http://h:65536", "http://h:8x",
        "http://h:", "http://u@h:1", "http://h:1/p?q=1", "http://h/#f", "http://[::1",
        "http://[::1]x", "http://::1:80", "http://a b:1", "http://h\x01"}) {
    expect_error([&] { url_of(bad); }, ErrorKind::kInvalidArgument,
                 {"Test URL \"", "expected http[s]://host[:port][/prefix]"});
  }
  expect_error(
      [] {
        parse_url("h:80", {"Svc", true});
      },
      ErrorKind::kInvalidArgument, {"Svc URL \"h:80\"", "must start with http:// or https://"});
}

TEST(HttpQuery, EncodesValuesInTheOrderOfTheNames) {
  EXPECT_EQ(query_string({{"zone", "DE"}, {"a", "x y&z"}}), "a=x%20y%26z&zone=DE");
  EXPECT_EQ(query_string({}), "");
}

Outcome answered(int status, Fields headers = {}) {
  Outcome outcome;
  outcome.response = ClientResponse{status, "", std::move(headers)};
  return outcome;
}

Outcome failed(Failure failure) {
  Outcome outcome;
  outcome.failure = failure;
  return outcome;
}

TEST(HttpRetry, TryLaterStatusesAndBrokenLinksRetryEveryFiveHundredOnlyWhenIdempotent) {
  for (const int status : {429, 502, 503, 504}) {
    EXPECT_TRUE(worth_retrying(answered(status), false)) << status;
  }
  EXPECT_FALSE(worth_retrying(answered(500), false));
  EXPECT_TRUE(worth_retrying(answered(500), true));
  EXPECT_TRUE(worth_retrying(answered(501), true));
  for (const int status : {200, 204, 400, 401, 404, 409, 422}) {
    EXPECT_FALSE(worth_retrying(answered(status), true)) << status;
  }
  for (const Failure failure :
       {Failure::kConnect, Failure::kConnectTimeout, Failure::kRead, Failure::kWrite}) {
    EXPECT_TRUE(worth_retrying(failed(failure), false));
  }
  for (const Failure failure :
       {Failure::kTls, Failure::kTlsVerify, Failure::kTooLarge, Failure::kCancelled}) {
    EXPECT_FALSE(worth_retrying(failed(failure), true));
  }
}

TEST(HttpRetry, RetryAfterInSecondsOnly) {
  EXPECT_EQ(retry_after_s(ClientResponse{503, "", {{"retry-after", "2.5"}}}), 2.5);
  EXPECT_EQ(retry_after_s(ClientResponse{503, "", {{"Retry-After", "0"}}}), 0.0);
  for (const char* value : {"", "soon", "-1", "nan", "inf", "Wed, 21 Oct 2015 07:28:00 GMT"}) {
    EXPECT_FALSE(retry_after_s(ClientResponse{503, "", {{"Retry-After", value}}})) << value;
  }
}

TEST(HttpRetry, BacksOffOnTheClockUpToTheCapAndStopsAtTheLastAttempt) {
  const ManualClock clock;
  Backoff backoff{5, 0.1, 0.3, 2.0};
  std::vector<double> pauses;
  int calls = 0;
  const RetryResult result = with_retries(
      backoff, clock,
      [&](int attempt, double timeout_s) {
        ++calls;
        EXPECT_EQ(attempt, calls);
        EXPECT_EQ(timeout_s, 0.0);  // no overall deadline
        return Attempt{answered(503), true, "busy"};
      },
      [&](int, double pause_s, const std::string& why) {
        pauses.push_back(pause_s);
        EXPECT_EQ(why, "busy");
      });
  EXPECT_EQ(result.attempts, 5);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(pauses, (std::vector<double>{0.1, 0.2, 0.3, 0.3}));
  EXPECT_EQ(clock.sleeps(), 4);
}

TEST(HttpRetry, RetryAfterLengthensAPauseButNotPastTheCap) {
  const ManualClock clock;
  std::vector<double> pauses;
  int calls = 0;
  const RetryResult result = with_retries(
      Backoff{3, 0.1, 5.0, 2.0}, clock,
      [&](int, double) {
        ++calls;
        const char* after = calls == 1 ? "1.5" : "60";
        return Attempt{answered(503, {{"Retry-After", after}}), calls < 3, "busy"};
      },
      [&](int, double pause_s, const std::string&) { pauses.push_back(pause_s); });
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(pauses, (std::vector<double>{1.5, 5.0}));
}

TEST(HttpRetry, ADoneAttemptEndsTheLoopAtOnce) {
  const ManualClock clock;
  const RetryResult result = with_retries(
      Backoff{}, clock,
      [](int, double) {
        return Attempt{answered(200), false, ""};
      },
      nullptr);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(HttpRetry, AnOverallDeadlineCutsThePausesAndHandsEachAttemptWhatIsLeft) {
  const ManualClock clock;
  Backoff backoff{10, 1.0, 1.0, 1.0};
  backoff.total_s = 3.5;
  std::vector<double> deadlines;
  const RetryResult result = with_retries(
      backoff, clock,
      [&](int, double timeout_s) {
        deadlines.push_back(timeout_s);
        return Attempt{answered(503), true, "busy"};
      },
      nullptr);
  // Pauses of 1 s at 0, 1, 2 s; at 3 s a fourth attempt with 0.5 s left, and no pause after it.
  EXPECT_EQ(result.attempts, 4);
  EXPECT_TRUE(result.out_of_time);
  EXPECT_EQ(clock.sleeps(), 3);
  EXPECT_EQ(deadlines, (std::vector<double>{3.5, 2.5, 1.5, 0.5}));
}

// The last attempt, handed what was left of the request deadline, ran out on its own deadline
// (not retried): the request ended on its deadline all the same, and says so. Under load this is
// how a request deadline usually ends (the BSO client's "the 1 s request deadline").
TEST(HttpRetry, ALastAttemptCutShortByTheRequestDeadlineIsOutOfTime) {
  const ManualClock clock;
  Backoff backoff{10, 1.0, 1.0, 1.0};
  backoff.total_s = 2.5;
  int calls = 0;
  const RetryResult result = with_retries(
      backoff, clock,
      [&](int, double timeout_s) {
        ++calls;
        Outcome outcome;
        if (calls < 3) {
          outcome.failure = Failure::kRead;
          return Attempt{outcome, true, "timed out"};
        }
        // Its exchange deadline was all that was left; a test clock that sleeps virtually does not
        // count the attempt's own time, so the clock need not have moved.
        outcome.failure = Failure::kDeadline;
        outcome.deadline_s = timeout_s;
        return Attempt{outcome, false, "past its deadline"};
      },
      nullptr);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_TRUE(result.out_of_time);
}

TEST(HttpRetry, AnAnswerOrAnEarlyFailureIsNotOutOfTime) {
  const ManualClock clock;
  Backoff backoff{10, 1.0, 1.0, 1.0};
  backoff.total_s = 2.5;
  const RetryResult refused = with_retries(
      backoff, clock,
      [](int, double) {
        return Attempt{answered(400), false, "bad"};
      },
      nullptr);
  EXPECT_FALSE(refused.out_of_time);
  const RetryResult broken = with_retries(
      backoff, clock,
      [](int, double) {
        Outcome outcome;
        outcome.failure = Failure::kDeadline;
        outcome.deadline_s = 0.3;  // its own exchange bound, below the 2.5 s left
        return Attempt{outcome, false, "past its deadline"};
      },
      nullptr);
  EXPECT_FALSE(broken.out_of_time);  // 2.5 s were left: its own deadline, not the request's
}

TEST(HttpRetry, AnExchangePastItsDeadlineIsNotRetried) {
  Outcome late;
  late.failure = Failure::kDeadline;
  EXPECT_FALSE(worth_retrying(late, true));
}

// A loopback server with the routes the exchanges below need.
class Service {
 public:
  Service() {
    server_.server().Get("/echo", [](const httplib::Request& request, httplib::Response& response) {
      response.set_header("X-Seen-Auth", request.get_header_value("Authorization"));
      response.set_content("path=" + request.path + " q=" + request.get_param_value("q"),
                           "text/plain");
    });
    server_.server().Post(
        "/echo", [](const httplib::Request& request, httplib::Response& response) {
          response.set_content(request.get_header_value("Content-Type") + "|" + request.body,
                               "text/plain");
        });
    server_.server().Get("/big", [](const httplib::Request&, httplib::Response& response) {
      response.set_content(std::string(4096, 'x'), "text/plain");
    });
    server_.server().Get("/chunked", [](const httplib::Request&, httplib::Response& response) {
      response.set_chunked_content_provider("text/plain", [](std::size_t, httplib::DataSink& sink) {
        const std::string chunk(1024, 'y');
        for (int i = 0; i < 8; ++i) {
          sink.write(chunk.data(), chunk.size());
        }
        sink.done();
        return true;
      });
    });
    server_.start();
  }
  Url url(const std::string& prefix = "") const { return url_of(server_.url() + prefix); }

 private:
  zeus::testing::LocalHttpServer server_;
};

TEST(HttpClient, SendsUnderThePrefixWithTokenAndContentType) {
  Service service;
  ClientOptions options;
  options.bearer_token = "s3cret";
  const Client client(service.url("/"), options);
  ClientRequest get;
  get.target = "/echo?q=1%202";
  const Outcome answer = client.send(get);
  ASSERT_TRUE(answer) << answer.detail;
  EXPECT_EQ(answer.response->status, 200);
  EXPECT_EQ(answer.response->body, "path=/echo q=1 2");
  EXPECT_EQ(answer.response->header("x-seen-auth"), "Bearer s3cret");
  EXPECT_EQ(answer.response->header("No-Such-Header"), "");

  ClientRequest post;
  post.method = "POST";
  post.target = "/echo";
  post.body = R"({"a": 1})";
  post.content_type = "application/json";
  const Outcome posted = client.send(post);
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted.response->body, R"(application/json|{"a": 1})");
}

TEST(HttpClient, ABodyOverTheLimitIsNotReadWhetherAnnouncedOrChunked) {
  Service service;
  ClientOptions options;
  options.max_body_bytes = 1000;
  const Client client(service.url(), options);
  for (const char* target : {"/big", "/chunked"}) {
    ClientRequest request;
    request.target = target;
    const Outcome outcome = client.send(request);
    EXPECT_FALSE(outcome) << target;
    EXPECT_EQ(outcome.failure, Failure::kTooLarge) << target;
    EXPECT_NE(describe(outcome, options).find("over 1000 bytes"), std::string::npos);
  }
  options.max_body_bytes = 8192;
  const Client roomy(service.url(), options);
  ClientRequest chunked;
  chunked.target = "/chunked";
  const Outcome whole = roomy.send(chunked);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole.response->body.size(), 8192U);
}

TEST(HttpClient, AClosedPortAndASilentPeerAreOutcomesNotHangs) {
  int port = 0;
  {
    const zeus::testing::SilentListener listener;
    port = listener.port();
  }
  Url closed = url_of("http://127.0.0.1:" + std::to_string(port));
  const Outcome refused = Client(closed, {}).send({});
  EXPECT_EQ(refused.failure, Failure::kConnect);
  EXPECT_NE(describe(refused, {}).find("cannot connect"), std::string::npos);

  const zeus::testing::RawHttpPeer silent([](const std::string&) { return std::nullopt; });
  ClientOptions options;
  options.read_timeout_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  const Outcome idle = Client(url_of(silent.url()), options).send({});
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(idle.failure, Failure::kRead);
  EXPECT_NE(describe(idle, options).find("no complete answer"), std::string::npos);
  EXPECT_LT(elapsed_s, 5.0);
}

TEST(HttpClient, CancelEndsAnExchangeInFlightAndRefusesLaterOnes) {
  const zeus::testing::RawHttpPeer silent([](const std::string&) { return std::nullopt; });
  ClientOptions options;
  options.read_timeout_s = 30.0;
  const Client client(url_of(silent.url()), options);
  std::atomic<int> failure{-1};
  const auto start = std::chrono::steady_clock::now();
  std::thread caller([&] { failure = static_cast<int>(client.send({}).failure); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  client.cancel();
  caller.join();
  EXPECT_EQ(failure.load(), static_cast<int>(Failure::kCancelled));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_TRUE(client.cancelled());
  EXPECT_EQ(client.send({}).failure, Failure::kCancelled);
}

TEST(HttpClient, StreamsABodyAndRethrowsWhatACallbackThrew) {
  Service service;
  const Client client(service.url(), {});
  ClientRequest request;
  request.target = "/chunked";
  int status = 0;
  std::size_t bytes = 0;
  const Outcome outcome = client.stream(
      request,
      [&](const ClientResponse& head) {
        status = head.status;
        return true;
      },
      [&](std::string_view data) {
        bytes += data.size();
        return true;
      });
  ASSERT_TRUE(outcome);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(bytes, 8192U);
  EXPECT_THROW(client.stream(request, nullptr,
                             [](std::string_view) -> bool { throw std::runtime_error("boom"); }),
               std::runtime_error);
}

TEST(HttpClient, TalksOverAUnixSocket) {
  const zeus::testing::TempDir dir;
  const std::string path = (dir.path() / "service.sock").string();
  httplib::Server server;
  server.set_address_family(AF_UNIX);
  server.Get("/hello", [](const httplib::Request& request, httplib::Response& response) {
    response.set_content("hi " + request.get_header_value("Host"), "text/plain");
  });
  ASSERT_TRUE(server.bind_to_port(path, 80));
  std::thread thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Url url;
  url.host = path;
  ClientOptions options;
  options.unix_socket_path = path;
  options.keep_alive = true;
  const Client client(url, options);
  ClientRequest request;
  request.target = "/hello";
  for (int i = 0; i < 2; ++i) {  // the kept connection serves both
    const Outcome outcome = client.send(request);
    ASSERT_TRUE(outcome) << outcome.detail;
    EXPECT_EQ(outcome.response->body, "hi " + path);
  }
  server.stop();
  thread.join();
}

}  // namespace

namespace {

using zeus::testing::HostileHttpPeer;
using zeus::testing::Hostility;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// A byte every 100 ms never trips a per-read timeout: only the deadline on the whole exchange
// ends it, in the head or in the body, and the failure says so.
TEST(HttpClient, ADeadlineEndsAnExchangeThatTricklesInTheHeadOrTheBody) {
  for (const Hostility hostility : {Hostility::kTrickleHead, Hostility::kTrickleBody}) {
    HostileHttpPeer peer(hostility, std::chrono::milliseconds(100));
    ClientOptions options;
    options.total_timeout_s = 1.0;
    const auto start = std::chrono::steady_clock::now();
    const Outcome outcome = Client(url_of(peer.url()), options).send({});
    const double elapsed_s = seconds_since(start);
    EXPECT_EQ(outcome.failure, Failure::kDeadline) << static_cast<int>(hostility);
    EXPECT_GE(elapsed_s, 0.9);
    EXPECT_LT(elapsed_s, 4.0);  // the read timeout (5 s) never fired
    EXPECT_EQ(describe(outcome, options),
              "no complete answer within the 1 s deadline (the service is too slow, or trickles)");
  }
}

TEST(HttpClient, ARequestsShorterDeadlineWinsAndStreamsHaveOneToo) {
  HostileHttpPeer peer(Hostility::kTrickleBody, std::chrono::milliseconds(50));
  ClientOptions options;
  options.total_timeout_s = 30.0;
  const Client client(url_of(peer.url()), options);
  ClientRequest request;
  request.timeout_s = 0.5;
  auto start = std::chrono::steady_clock::now();
  const Outcome sent = client.send(request);
  EXPECT_EQ(sent.failure, Failure::kDeadline);
  EXPECT_EQ(sent.deadline_s, 0.5);
  EXPECT_LT(seconds_since(start), 3.0);
  std::size_t bytes = 0;
  start = std::chrono::steady_clock::now();
  const Outcome streamed = client.stream(request, nullptr, [&](std::string_view data) {
    bytes += data.size();
    return true;
  });
  EXPECT_EQ(streamed.failure, Failure::kDeadline);
  EXPECT_GT(bytes, 0U);
  EXPECT_LT(seconds_since(start), 3.0);
}

// Floods end at the body cap, read no further, whether announced, chunked or unannounced.
TEST(HttpClient, FloodsEndAtTheBodyCapQuickly) {
  for (const Hostility hostility :
       {Hostility::kEndlessChunked, Hostility::kHugeLength, Hostility::kEndlessUnannounced}) {
    HostileHttpPeer peer(hostility);
    ClientOptions options;
    options.max_body_bytes = 1 << 20;
    options.total_timeout_s = 20.0;
    const auto start = std::chrono::steady_clock::now();
    const Outcome outcome = Client(url_of(peer.url()), options).send({});
    EXPECT_EQ(outcome.failure, Failure::kTooLarge) << static_cast<int>(hostility);
    EXPECT_LT(seconds_since(start), 10.0);
  }
  // Without a cap, the deadline still ends an endless body.
  HostileHttpPeer endless(Hostility::kEndlessChunked);
  ClientOptions options;
  options.total_timeout_s = 0.5;
  std::size_t bytes = 0;
  const Outcome outcome =
      Client(url_of(endless.url()), options).stream({}, nullptr, [&](std::string_view data) {
        bytes += data.size();
        return true;
      });
  EXPECT_EQ(outcome.failure, Failure::kDeadline);
  EXPECT_GT(bytes, 0U);
}

TEST(HttpClient, CancelStillEndsATrickleBeforeItsDeadline) {
  HostileHttpPeer peer(Hostility::kTrickleHead, std::chrono::milliseconds(100));
  ClientOptions options;
  options.total_timeout_s = 60.0;
  const Client client(url_of(peer.url()), options);
  std::atomic<int> failure{-1};
  const auto start = std::chrono::steady_clock::now();
  std::thread caller([&] { failure = static_cast<int>(client.send({}).failure); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  client.cancel();
  caller.join();
  EXPECT_EQ(failure.load(), static_cast<int>(Failure::kCancelled));
  EXPECT_LT(seconds_since(start), 10.0);
}

// Many exchanges with deadlines, some passing them, at once: the one watch thread keeps up.
TEST(HttpClient, ConcurrentDeadlinesEachEndTheirOwnExchange) {
  HostileHttpPeer peer(Hostility::kTrickleBody, std::chrono::milliseconds(50));
  Service service;
  std::vector<std::thread> callers;
  std::atomic<int> late{0};
  std::atomic<int> answered_in_time{0};
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      ClientOptions options;
      options.total_timeout_s = 0.3 + 0.1 * i;
      if (Client(url_of(peer.url()), options).send({}).failure == Failure::kDeadline) {
        ++late;
      }
      ClientRequest echo;
      echo.target = "/echo";
      if (Client(service.url(), options).send(echo)) {
        ++answered_in_time;
      }
    });
  }
  for (std::thread& caller : callers) {
    caller.join();
  }
  EXPECT_EQ(late.load(), 8);
  EXPECT_EQ(answered_in_time.load(), 8);
}

}  // namespace zeus::http
