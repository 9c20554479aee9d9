// The servers as processes under hostile clients: slow-header (slowloris) and idle sockets
// beside valid clients, against `zeus bso serve` and `zeusd serve` (TCP and its Unix socket),
// and SIGTERM while slow sockets are open. Bounded: a few dozen sockets, a few seconds each.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <regex>
#include <thread>
#include <vector>

#include "http/raw_client.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using zeus::testing::RawClient;
using zeus::testing::SpawnedProcess;
using zeus::testing::TempDir;

constexpr int kSlowSockets = 64;
constexpr int kIdleSockets = 70;

struct Server {
  std::unique_ptr<SpawnedProcess> process;
  int port = 0;             // TCP
  std::string socket_path;  // Unix
  RawClient connect() const {
    return socket_path.empty() ? RawClient::tcp(port) : RawClient::unix_socket(socket_path);
  }
};

Server start_bso(const TempDir& dir) {
  Server server;
  const auto port_file = dir.path() / "port";
  server.process = std::make_unique<SpawnedProcess>(
      std::vector<std::string>{ZEUS_CLI_PATH, "bso", "serve", "--db",
                               "sqlite:///" + (dir.path() / "bso.db").string(), "--port", "0",
                               "--port-file", port_file.string()},
      dir.path() / "bso.log");
  server.port = zeus::testing::wait_for_port_file(port_file);
  EXPECT_GT(server.port, 0) << server.process->log();
  return server;
}

Server start_zeusd(const TempDir& dir, bool tcp) {
  Server server;
  std::vector<std::string> args = {ZEUSD_PATH, "serve"};
  if (tcp) {
    args.insert(args.end(), {"--mode", "tcp", "--tcp-bind-address", "127.0.0.1:0"});
  } else {
    server.socket_path = (dir.path() / "zeusd.sock").string();
    args.insert(args.end(), {"--socket-path", server.socket_path});
  }
  server.process = std::make_unique<SpawnedProcess>(
      args, dir.path() / "zeusd.log",
      std::vector<std::pair<std::string, std::string>>{{"ZEUS_SIMULATED_GPUS", "2:a100"},
                                                       {"ZEUS_LOG_LEVEL", "info"}});
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string log = server.process->log();
    std::smatch match;
    if (tcp && std::regex_search(log, match, std::regex("listening on tcp [^:]+:([0-9]+)"))) {
      server.port = std::stoi(match[1]);
      break;
    }
    if (!tcp && log.find("listening on") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(!tcp || server.port > 0) << server.process->log();
  return server;
}

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
  Server server;
  const auto port_file = dir.path() / "port";
  server.process = std::make_unique<SpawnedProcess>(
      std::vector<std::string>{ZEUS_CLI_PATH, "exporter", "--port", "0", "--port-file",
                               port_file.string(), "--cpus", "none"},
      dir.path() / "exporter.log",
      std::vector<std::pair<std::string, std::string>>{{"ZEUS_SIMULATED_GPUS", "1:a100"}});
  server.port = zeus::testing::wait_for_port_file(port_file);
  ASSERT_GT(server.port, 0) << server.process->log();
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
