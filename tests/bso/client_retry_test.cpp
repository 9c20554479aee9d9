// The batch-size-optimizer client against a scripted HTTP peer on a loopback port: retries with
// backoff, errors, the URL's prefix, the token, HTTPS and bad options, and hostile servers that
// trickle or flood (client_test.cpp: the requests and the lifecycle).
#include "zeus/runtime/batch_size_optimizer.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client_test_support.hpp"
#include "support/expect_error.hpp"
#include "support/hostile_http_peer.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using zeus::testing::expect_error;
// json, ErrorKind and the zeus::bso names come with the rig.
using namespace zeus::testing::bso_client;

// ---- Retries ----

TEST(BsoClient, RetriesUnavailableAnswersWithExponentialBackoff) {
  Peer peer;
  Rig rig(1, "v100");
  FastRetries retries;
  // Three unavailable answers, then the stored spec.
  JobSpec stored = sample_job();
  stored.batch_sizes = {32, 64, 128, 256};
  stored.max_power_w = 250.0;
  stored.number_of_gpus = 1;
  stored.gpu_model = "Tesla V100-PCIE-32GB";
  peer.script("POST /jobs", {{503, R"({"message": "database unavailable"})"},
                             {502, "bad gateway"},
                             {504, "gateway timeout"},
                             {201, zeus::bso::to_json(stored).dump()}});
  BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url(), sample_job(), retries.options(5));
  EXPECT_EQ(peer.requests("POST", "/jobs").size(), 4u);
  // 0.1, then doubled, capped at 0.3.
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2, 0.3}));
  EXPECT_TRUE(bso.job_created());
}

TEST(BsoClient, RetryAfterLengthensThePauseUpToTheCap) {
  Peer peer;
  FastRetries retries;
  peer.script("PATCH /trials", {{503, "{}", "0.25"}, {503, "{}", "60"}, {200, "null"}});
  BsoClient client(peer.url(), retries.options());
  client.end_trial(TrialId{"j", 1, 1});
  EXPECT_EQ(*retries.delays, std::vector<double>({0.25, 0.3}));
}

TEST(BsoClient, GivesUpAfterTheLastAttemptNamingTheRouteAndTheStatus) {
  Peer peer;
  FastRetries retries;
  peer.script("POST /report", {{503, R"({"message": "store is read-only"})"}});
  BsoClient client(peer.url(), retries.options(3));
  try {
    client.report({});
    ADD_FAILURE() << "no error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.status(), 503);
    EXPECT_EQ(error.route(), "POST /report");
    EXPECT_EQ(error.server_message(), "store is read-only");
    const std::string what = error.what();
    EXPECT_NE(what.find("POST /report"), std::string::npos) << what;
    EXPECT_NE(what.find("503"), std::string::npos) << what;
    EXPECT_NE(what.find("store is read-only"), std::string::npos) << what;
    EXPECT_NE(what.find("3 attempts"), std::string::npos) << what;
  }
  EXPECT_EQ(peer.requests().size(), 3u);
  EXPECT_EQ(retries.delays->size(), 2u);
}

TEST(BsoClient, RetriesARefusedConnectionUntilTheServerComesUp) {
  const int port = unused_port();
  std::unique_ptr<Peer> late;
  FastRetries retries;
  ClientOptions options = retries.options(5);
  int pauses = 0;
  retries.clock->on_sleep = [&] {
    if (++pauses == 2) {
      late = std::make_unique<Peer>(port);  // the server starts during the second pause
    }
  };
  BsoClient client("http://127.0.0.1:" + std::to_string(port), options);
  const TrialId trial = client.next_batch_size("job-1");
  EXPECT_EQ(trial.batch_size, 64);
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2}));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->requests().size(), 1u);
}

TEST(BsoClient, ARefusedConnectionFailsWithKindIoAfterTheLastAttempt) {
  FastRetries retries;
  BsoClient client("http://127.0.0.1:" + std::to_string(unused_port()), retries.options(3));
  expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kIo,
               {"GET /jobs/batch_size", "cannot connect", "gave up after 3 attempts"});
  EXPECT_EQ(*retries.delays, std::vector<double>({0.1, 0.2}));
  // The pauses are sleeps on the injected clock, not wall time.
  EXPECT_EQ(retries.clock->time.slept_ns(), 300'000'000);
  EXPECT_EQ(retries.clock->time.sleeps(), 2);
}

TEST(BsoClient, ATimeoutIsRetriedThenReported) {
  Peer peer;
  FastRetries retries;
  ClientOptions options = retries.options(2);
  options.timeout_s = 0.2;
  peer.script("GET /jobs/batch_size", {{200, "{}", "", 0.6}});
  BsoClient client(peer.url(), options);
  expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kTimeout,
               {"GET /jobs/batch_size", "0.2 s", "gave up after 2 attempts"});
  EXPECT_EQ(retries.delays->size(), 1u);
}

// ---- Hostile servers: bounded time and memory ----

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A byte every 100 ms never trips the 0.5 s read timeout; the exchange's deadline (3 of them)
// ends it, and it is not retried.
TEST(BsoClient, ATricklingAnswerEndsAtTheExchangeDeadline) {
  for (const auto hostility :
       {zeus::testing::Hostility::kTrickleHead, zeus::testing::Hostility::kTrickleBody}) {
    zeus::testing::HostileHttpPeer peer(hostility, std::chrono::milliseconds(100));
    FastRetries retries;
    ClientOptions options = retries.options(4);
    options.timeout_s = 0.5;
    BsoClient client(peer.url(), options);
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kTimeout,
                 {"GET /jobs/batch_size", "within the 1.5 s deadline", "gave up after 1 attempt"});
    EXPECT_LT(seconds_since(start), 5.0);
    EXPECT_EQ(peer.connections(), 1);
  }
}

TEST(BsoClient, AHugeAnswerIsCutAtTheBodyCap) {
  EXPECT_EQ(ClientOptions{}.max_body_bytes, std::size_t{16} << 20);
  for (const auto hostility :
       {zeus::testing::Hostility::kHugeLength, zeus::testing::Hostility::kEndlessChunked,
        zeus::testing::Hostility::kEndlessUnannounced}) {
    zeus::testing::HostileHttpPeer peer(hostility);
    FastRetries retries;
    ClientOptions options = retries.options(4);
    options.max_body_bytes = 1 << 20;
    BsoClient client(peer.url(), options);
    const auto start = std::chrono::steady_clock::now();
    expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kIo,
                 {"GET /jobs/batch_size", "over 1048576 bytes"});
    EXPECT_LT(seconds_since(start), 10.0);
    EXPECT_EQ(peer.connections(), 1);  // not retried
  }
}

// Attempts that each end at their read timeout are retried until the request's deadline (on the
// client's clock, which here counts only the pauses) leaves no room for another.
TEST(BsoClient, RetriesStopAtTheRequestDeadline) {
  zeus::testing::HostileHttpPeer peer(zeus::testing::Hostility::kHangAfterHead);
  FastRetries retries;
  ClientOptions options = retries.options(50);
  options.timeout_s = 0.1;
  options.request_timeout_s = 1.0;
  BsoClient client(peer.url(), options);
  expect_error([&] { client.next_batch_size("job-1"); }, ErrorKind::kTimeout,
               {"the 1 s request deadline"});
  // Pauses of 0.1, 0.2, 0.3, 0.3 leave 0.1 s: a fifth attempt, and no pause after it.
  EXPECT_EQ(retries.delays->size(), 4u);
  EXPECT_EQ(peer.connections(), 5);
}

TEST(BsoClient, ClientErrorsAreNotRetried) {
  Peer peer;
  FastRetries retries;
  BsoClient client(peer.url(), retries.options());

  peer.script("POST /report", {{400, R"({"message": "Unknown trial job_id='x'"})"}});
  try {
    client.report({});
    ADD_FAILURE() << "no error";
  } catch (const ServerError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(error.status(), 400);
    const std::string what = error.what();
    EXPECT_NE(what.find("POST /report"), std::string::npos) << what;
    EXPECT_NE(what.find("answered 400: Unknown trial job_id='x'"), std::string::npos) << what;
  }
  EXPECT_EQ(peer.requests().size(), 1u);

  peer.script("PATCH /trials",
              {{404, R"({"message": "Could not find the trial: job_id='x' batch_size=1"})"}});
  expect_error(
      [&] {
        client.end_trial({"x", 1, 1});
      },
      ErrorKind::kNotFound, {"PATCH /trials", "404", "Could not find the trial"});

  peer.script("POST /jobs", {{409, R"({"message": "JobSpec doesn't match"})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kInvalidArgument,
               {"POST /jobs", "409", "JobSpec doesn't match"});

  peer.script("POST /jobs",
              {{422, R"({"detail": [{"loc": ["body", "max_power"], "msg": "ensure this value )"
                     R"(is greater than 0", "type": "value_error.number.not_gt"}]})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kInvalidArgument,
               {"422", "body.max_power: \"ensure this value is greater than 0\""});

  peer.script("GET /jobs/batch_size", {{401, R"({"detail": "missing bearer token"})"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kNoPermission,
               {"401", "missing bearer token"});

  peer.script("GET /jobs/batch_size", {{500, R"({"message": "No converged batch sizes has )"
                                             R"(observed."})"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kUnknown,
               {"500", "No converged batch sizes"});
  EXPECT_TRUE(retries.delays->empty());
}

TEST(BsoClient, AMalformedSuccessBodyIsAClearError) {
  Peer peer;
  BsoClient client(peer.url(), FastRetries().options());
  peer.script("GET /jobs/batch_size", {{200, "<html>proxy</html>"}});
  expect_error([&] { client.next_batch_size("x"); }, ErrorKind::kUnknown,
               {"GET /jobs/batch_size", "answered 200 with a malformed body", "<html>proxy"});
  peer.script("POST /report", {{200, R"({"stop_train": "maybe"})"}});
  expect_error([&] { client.report({}); }, ErrorKind::kUnknown, {"POST /report", "malformed body"});
  peer.script("POST /jobs", {{201, R"({"job_id": "x"})"}});
  expect_error([&] { client.register_job(sample_job()); }, ErrorKind::kUnknown,
               {"POST /jobs", "malformed"});
}

TEST(BsoClient, DeleteJobTellsWhetherThereWasOne) {
  Peer peer;
  BsoClient client(peer.url(), FastRetries().options());
  EXPECT_TRUE(client.delete_job("a b/c"));
  EXPECT_EQ(peer.requests().at(0).query_job_id, "a b/c");
  peer.script("DELETE /jobs", {{404, R"({"message": "No job was deleted."})"}});
  EXPECT_FALSE(client.delete_job("gone"));
}

// ---- URL, token ----

TEST(BsoClient, APrefixAndATrailingSlashAreHandled) {
  Peer peer;
  Rig rig(1, "v100");
  {
    BatchSizeOptimizer bso(rig.monitor, rig.set, peer.url("/zeus/bso/"), sample_job(),
                           FastRetries().options());
    bso.get_batch_size();
  }
  const auto requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].path, "/zeus/bso/jobs");
  EXPECT_EQ(requests[1].path, "/zeus/bso/jobs/batch_size");
  EXPECT_EQ(requests[2].path, "/zeus/bso/trials");
}

TEST(BsoClient, SendsTheBearerTokenFromOptionsOrEnvironment) {
  Peer peer;
  ClientOptions options = FastRetries().options();
  options.token = "s3cret";
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  options.token.reset();
  options.env = [](const std::string& name) -> std::optional<std::string> {
    return name == "ZEUS_BSO_TOKEN" ? std::optional<std::string>("from-env") : std::nullopt;
  };
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  options.env = [](const std::string&) -> std::optional<std::string> { return ""; };
  BsoClient(peer.url(), options).end_trial({"j", 1, 1});
  const auto requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].authorization, "Bearer s3cret");
  EXPECT_EQ(requests[1].authorization, "Bearer from-env");
  EXPECT_EQ(requests[2].authorization, "");
}

TEST(ServerUrl, ParsesHostPortAndPrefix) {
  ServerUrl url = ServerUrl::parse("http://bso.example:8000/");
  EXPECT_EQ(url.host, "bso.example");
  EXPECT_EQ(url.port, 8000);
  EXPECT_EQ(url.prefix, "");
  url = ServerUrl::parse("HTTP://10.0.0.2/a/b//");
  EXPECT_EQ(url.host, "10.0.0.2");
  EXPECT_EQ(url.port, 80);
  EXPECT_EQ(url.prefix, "/a/b");
  EXPECT_EQ(url.to_string(), "http://10.0.0.2:80/a/b");
  url = ServerUrl::parse("[::1]:9000");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, 9000);
  EXPECT_EQ(url.to_string(), "http://[::1]:9000");

  url = ServerUrl::parse("https://bso.example/");
  EXPECT_EQ(url.scheme, "https");
  EXPECT_EQ(url.port, 443);
  EXPECT_EQ(url.to_string(), "https://bso.example:443");

  for (const char* bad : {"ftp://h", "http://:80", "http://h:0", "http://h:99999", "http://h:8x",
                          "http://u@h:1", "http://h:1/p?q=1", "http://[::1", "http://::1:80"}) {
    expect_error([&] { ServerUrl::parse(bad); }, ErrorKind::kInvalidArgument,
                 {std::string("\"") + bad + "\""});
  }
}

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
// https with a self-signed certificate made by the openssl command (skipped without it).
TEST(BsoClient, TalksHttpsAndVerifiesTheCertificate) {
  const std::string dir = ::testing::TempDir() + "bso-tls-" + std::to_string(::getpid());
  const std::string command = "mkdir -p " + dir +
                              " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                              "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
                              dir + "/key.pem -out " + dir + "/cert.pem >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    GTEST_SKIP() << "no openssl command to make a certificate";
  }
  httplib::SSLServer server((dir + "/cert.pem").c_str(), (dir + "/key.pem").c_str());
  ASSERT_TRUE(server.is_valid());
  server.Get(".*", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(R"({"job_id": "j", "batch_size": 32, "trial_number": 7})",
                         "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  ClientOptions options = FastRetries().options();
  options.ca_cert_path = dir + "/cert.pem";
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(BsoClient(url, options).next_batch_size("j").trial_number, 7);
  options.ca_cert_path.clear();  // the system store does not know this certificate
  expect_error([&] { BsoClient(url, options).next_batch_size("j"); }, ErrorKind::kIo,
               {"GET /jobs/batch_size", "ca_cert_path"});

  server.stop();
  thread.join();
  std::filesystem::remove_all(dir);
}
#endif

TEST(BsoClient, RejectsBadOptions) {
  ClientOptions options;
  options.timeout_s = 0.0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"timeout_s"});
  options = {};
  options.retry.max_attempts = 0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"max_attempts"});
  options = {};
  options.rank = -1;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument, {"rank"});
  options = {};
  options.request_timeout_s = 0.0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"request_timeout_s"});
  options = {};
  options.max_body_bytes = 0;
  expect_error([&] { BsoClient("http://h:1", options); }, ErrorKind::kInvalidArgument,
               {"max_body_bytes"});
}

TEST(BsoClient, TheDestructorNeverThrowsWhenTheServerIsGone) {
  auto peer = std::make_unique<Peer>();
  Rig rig(1, "v100");
  FastRetries retries;
  auto bso = std::make_unique<BatchSizeOptimizer>(rig.monitor, rig.set, peer->url(), sample_job(),
                                                  retries.options(2));
  bso->get_batch_size();
  bso->on_train_begin();
  peer.reset();
  EXPECT_NO_THROW(bso.reset());
  EXPECT_EQ(retries.delays->size(), 1u);  // PATCH was tried twice
  EXPECT_TRUE(rig.monitor->open_windows().empty());
}

}  // namespace
