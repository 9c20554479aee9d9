// `zeus bso serve`'s HTTP front on the hardened host, with raw sockets: the transport findings of
// the hostile-client probe (chunked and compressed bodies, auth before the body, Range,
// compression of small answers, half-closed requests, strict heads, ids decoded once).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "http/raw_client.hpp"
#include "server/server_harness.hpp"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using zeus::test::peer_job_spec;
using zeus::test::ServerHarness;
using zeus::testing::RawClient;

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Sends a chunked body of `total` bytes in 64 KiB chunks until the server stops reading.
void send_chunked(RawClient& client, const std::string& path, std::size_t total,
                  const std::string& extra = "") {
  client.send("POST " + path + " HTTP/1.1\r\nHost: localhost\r\n" + extra +
              "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "10000\r\n" + std::string(65536, ' ') + "\r\n";
  for (std::size_t sent = 0; sent < total && client.send(chunk); sent += 65536) {
  }
}

TEST(BsoTransport, AChunkedBodyOverTheLimitIs413WithoutBeingBuffered) {
  ServerHarness server;
  RawClient client = RawClient::tcp(server.port());
  send_chunked(client, "/jobs", 200u << 20);
  auto response = client.read_response(10s);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 413);
  EXPECT_EQ(json::parse(response->body)
                .at("detail")
                .get<std::string>()
                .rfind("Request body too large", 0),
            0u);
}

TEST(BsoTransport, TheTokenIsCheckedBeforeTheBodyAndTheSchemeIsCaseInsensitive) {
  zeus::server::HttpServerOptions options;
  options.token = "0123456789abcdef-secret";
  ServerHarness server({}, options);
  RawClient client = RawClient::tcp(server.port());
  send_chunked(client, "/jobs", 200u << 20);
  auto response = client.read_response(10s);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 401);
  EXPECT_TRUE(response->has_header("www-authenticate: bearer"));
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    RawClient ok = RawClient::tcp(server.port());
    ok.send(post("/jobs", peer_job_spec("peer-" + scheme).dump(),
                 "Authorization: " + scheme + " " + options.token + "\r\n"));
    response = ok.read_response();
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 201) << scheme << ": " << response->body;
  }
  RawClient basic = RawClient::tcp(server.port());
  basic.send(post("/jobs", "{}", "Authorization: Basic abc\r\n"));
  response = basic.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 401);
}

TEST(BsoTransport, CompressedRequestBodiesAre415) {
  ServerHarness server;
  RawClient client = RawClient::tcp(server.port());
  client.send(post("/jobs", std::string("\x1f\x8b\x08\x00", 4), "Content-Encoding: gzip\r\n"));
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 415);
  EXPECT_NE(json::parse(response->body).at("detail").get<std::string>().find("uncompressed"),
            std::string::npos);
}

TEST(BsoTransport, RangeIsIgnoredAndSmallAnswersAreNotCompressed) {
  ServerHarness server;
  ASSERT_EQ(server.request("POST", "/jobs", peer_job_spec("peer-r").dump())->status, 201);
  std::string ranges = "Range: bytes=0-";
  for (int i = 1; i < 1000; ++i) {
    ranges.append(",0-");
  }
  RawClient client = RawClient::tcp(server.port());
  client.send("GET /jobs HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip, br\r\n" + ranges +
              "\r\n\r\n");
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_FALSE(response->has_header("content-encoding"));
  EXPECT_EQ(json::parse(response->body).at("jobs"), json::array({"peer-r"}));
}

TEST(BsoTransport, AHalfClosedRequestIsAnswered) {
  ServerHarness server;
  RawClient client = RawClient::tcp(server.port());
  client.send(post("/jobs", peer_job_spec("peer-half").dump()));
  client.shutdown_write();
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 201);
}

TEST(BsoTransport, StrictHeadsAre400) {
  ServerHarness server;
  for (const std::string head :
       {"POST /report HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "POST /report HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n"}) {
    RawClient client = RawClient::tcp(server.port());
    client.send(head);
    auto response = client.read_response();
    ASSERT_TRUE(response) << head;
    EXPECT_EQ(response->status, 400) << head;
  }
  EXPECT_EQ(server.request("GET", "/healthz")->status, 200);
}

TEST(BsoTransport, JobIdsInThePathAreDecodedOnce) {
  ServerHarness server;
  auto created = server.request("POST", "/jobs", peer_job_spec("peer-a%41").dump());
  ASSERT_EQ(created->status, 201) << created->body;
  auto res = server.request("GET", "/jobs/peer-a%2541");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  // A path far longer than any id: refused on the head, not later.
  RawClient client = RawClient::tcp(server.port());
  client.send("GET /jobs/" + std::string(300 * 1024, 'x') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  auto response = client.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 431);
}

}  // namespace
