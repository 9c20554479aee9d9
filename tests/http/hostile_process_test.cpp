// The servers as processes under hostile clients: slow-header (slowloris) and idle sockets
// beside valid clients, against `zeus bso serve` and `zeusd serve` (TCP and its Unix socket),
// and SIGTERM while slow sockets are open. Bounded: a few dozen sockets, a few seconds each.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>
#include <vector>

#include "http/raw_client.hpp"
#include "http/running_servers.hpp"

namespace {

using namespace std::chrono_literals;
using zeus::testing::RawClient;
using zeus::testing::SpawnedProcess;
using zeus::testing::TempDir;

constexpr int kSlowSockets = 64;
constexpr int kIdleSockets = 70;

using Server = zeus::testing::RunningServer;
using zeus::testing::start_bso;
using zeus::testing::start_zeusd;

std::string get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
}

// Opens slow-header and idle sockets, then checks that valid clients keep getting answers, fast,
// while the slow ones keep dripping.
void valid_clients_keep_getting_answers(const Server& server, const std::string& path,
                                        int slow_sockets = kSlowSockets,
                                        int idle_sockets = kIdleSockets) {
  std::vector<RawClient> slow;
  std::vector<RawClient> idle;
  for (int i = 0; i < slow_sockets; ++i) {
    slow.push_back(server.connect());
    slow.back().send("GET " + path + " HTTP/1.1\r\nHost: localhost\r\n");
  }
  for (int i = 0; i < idle_sockets; ++i) {
    idle.push_back(server.connect());
  }
  for (int probe = 0; probe < 6; ++probe) {
    for (auto& client : slow) {
      client.send("X-Drip: " + std::to_string(probe) + "\r\n");
    }
    const auto started = std::chrono::steady_clock::now();
    RawClient valid = server.connect();
    valid.send(get(path));
    auto response = valid.read_response(2s);
    ASSERT_TRUE(response) << "probe " << probe << " got no answer";
    EXPECT_EQ(response->status, 200) << response->body;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s) << "probe " << probe;
    std::this_thread::sleep_for(250ms);
  }
}

TEST(HostileClients, BsoServerKeepsAnswering) {
  TempDir dir("zeus-hostile");
  Server server = start_bso(dir);
  valid_clients_keep_getting_answers(server, "/healthz");
}

TEST(HostileClients, ZeusdOverTcpKeepsAnswering) {
  TempDir dir("zeus-hostile");
  Server server = start_zeusd(dir, true);
  valid_clients_keep_getting_answers(server, "/time");
}

TEST(HostileClients, ZeusdOverItsUnixSocketKeepsAnswering) {
  TempDir dir("zeus-hostile");
  Server server = start_zeusd(dir, false);
  valid_clients_keep_getting_answers(server, "/gpu/get_power_limit");
}

TEST(HostileClients, ExporterKeepsAnswering) {
  TempDir dir("zeus-hostile");
  Server server = zeus::testing::start_exporter(dir);
  // Four times the old thread pool in slow sockets, within the exporter's per-peer share (64).
  valid_clients_keep_getting_answers(server, "/metrics", 32, 16);
}

void sigterm_exits_promptly(Server& server) {
  std::vector<RawClient> dripping;
  for (int i = 0; i < 10; ++i) {
    dripping.push_back(server.connect());
    dripping.back().send("GET / HTTP/1.1\r\nX-Slow: 1\r\n");
  }
  std::this_thread::sleep_for(100ms);
  server.process->signal(SIGTERM);
  const auto status = server.process->wait_for(5s);
  ASSERT_TRUE(status) << "still running 5 s after SIGTERM: " << server.process->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << server.process->log();
  for (auto& client : dripping) {
    EXPECT_TRUE(client.closed_within(100ms));
  }
}

TEST(HostileClients, BsoServerStopsOnSigtermWithSlowSocketsOpen) {
  TempDir dir("zeus-hostile");
  Server server = start_bso(dir);
  sigterm_exits_promptly(server);
}

TEST(HostileClients, ZeusdStopsOnSigtermWithSlowSocketsOpen) {
  TempDir dir("zeus-hostile");
  Server server = start_zeusd(dir, false);
  sigterm_exits_promptly(server);
}

}  // namespace
