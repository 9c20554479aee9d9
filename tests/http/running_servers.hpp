// The three servers on the HTTP host as processes, for the hostile-client suites: `zeus bso
// serve`, `zeusd serve` (TCP or its Unix socket, over simulated GPUs) and `zeus exporter`, each
// in a temporary directory, with a raw connection to it. Needs ZEUS_CLI_PATH and ZEUSD_PATH.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/raw_client.hpp"
#include "support/spawned_process.hpp"
#include "support/temp_dir.hpp"

namespace zeus::testing {

struct RunningServer {
  std::unique_ptr<SpawnedProcess> process;
  int port = 0;             // TCP
  std::string socket_path;  // Unix
  RawClient connect() const {
    return socket_path.empty() ? RawClient::tcp(port) : RawClient::unix_socket(socket_path);
  }
};

inline RunningServer start_bso(const TempDir& dir) {
  RunningServer server;
  const auto port_file = dir.path() / "port";
  server.process = std::make_unique<SpawnedProcess>(
      std::vector<std::string>{ZEUS_CLI_PATH, "bso", "serve", "--db",
                               "sqlite:///" + (dir.path() / "bso.db").string(), "--port", "0",
                               "--port-file", port_file.string()},
      dir.path() / "bso.log");
  server.port = wait_for_port_file(port_file);
  EXPECT_GT(server.port, 0) << server.process->log();
  return server;
}

// zeusd over TCP on 127.0.0.1, or on a Unix socket in `dir` (with `extra` arguments such as
// --socket-permissions).
inline RunningServer start_zeusd(const TempDir& dir, bool tcp,
                                 const std::vector<std::string>& extra = {}) {
  using namespace std::chrono_literals;
  RunningServer server;
  std::vector<std::string> args = {ZEUSD_PATH, "serve"};
  if (tcp) {
    args.insert(args.end(), {"--mode", "tcp", "--tcp-bind-address", "127.0.0.1:0"});
  } else {
    server.socket_path = (dir.path() / "zeusd.sock").string();
    args.insert(args.end(), {"--socket-path", server.socket_path});
  }
  args.insert(args.end(), extra.begin(), extra.end());
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

inline RunningServer start_exporter(const TempDir& dir) {
  RunningServer server;
  const auto port_file = dir.path() / "port";
  server.process = std::make_unique<SpawnedProcess>(
      std::vector<std::string>{ZEUS_CLI_PATH, "exporter", "--port", "0", "--port-file",
                               port_file.string(), "--cpus", "none"},
      dir.path() / "exporter.log",
      std::vector<std::pair<std::string, std::string>>{{"ZEUS_SIMULATED_GPUS", "1:a100"}});
  server.port = wait_for_port_file(port_file);
  EXPECT_GT(server.port, 0) << server.process->log();
  return server;
}

}  // namespace zeus::testing
