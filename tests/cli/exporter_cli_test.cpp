// `zeus exporter` and `zeus monitor --metrics-port`, end to end on simulated GPUs: the process
// serves /metrics, stops on time, and refuses bad flags and a port in use with clear messages.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::testing::run_command;

const std::string kZeus = ZEUS_CLI_PATH;
const std::string kEnv = "ZEUS_SIMULATED_GPUS=2:a100 ZEUS_POWERCAP_ROOT=/nonexistent ";

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() /
         ("zeus-exporter-cli-" + std::to_string(::getpid()) + "-" + name);
}

// A free loopback port (bound and released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// GET /metrics, retried until it answers or `seconds` pass; empty when it never did.
std::string scrape(int port, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1, 0);
    if (auto response = client.Get("/metrics"); response && response->status == 200) {
      return response->body;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

TEST(ExporterCli, ServesMetricsAndStopsAfterItsDuration) {
  const fs::path port_file = temp_path("port");
  fs::remove(port_file);
  auto run = std::async(std::launch::async, [&] {
    return run_command(kEnv + kZeus + " exporter --port 0 --interval 100ms --duration 4s " +
                       "--port-file " + port_file.string() + " 2>&1");
  });
  int port = 0;
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(port_file);
    in >> port;
  }
  ASSERT_GT(port, 0) << "no port file";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string body = scrape(port, 10);
  EXPECT_NE(body.find("# TYPE zeus_gpu_energy_joules_total counter"), std::string::npos) << body;
  EXPECT_NE(body.find("zeus_gpu_energy_joules_total{index=\"1\"}"), std::string::npos) << body;
  EXPECT_NE(body.find("zeus_gpu_power_limit_watts{index=\"0\"} 400"), std::string::npos) << body;
  EXPECT_NE(body.find("power_monitor_gpu_power_watts{index=\"0\",domain=\"device_instant\"}"),
            std::string::npos);
  const auto result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("serving http://127.0.0.1:"), std::string::npos) << result.output;
  fs::remove(port_file);
}

TEST(ExporterCli, PortInUseAndBadFlagsAreClearErrors) {
  httplib::Server holder;
  const int port = holder.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const auto taken = run_command(kEnv + kZeus + " exporter --duration 1s --port " +
                                 std::to_string(port) + " 2>&1");
  EXPECT_EQ(taken.exit_code, 1) << taken.output;
  EXPECT_NE(taken.output.find("already in use"), std::string::npos) << taken.output;

  for (const std::string& flags :
       {std::string("--interval 0"), std::string("--gpus 7"), std::string("--port 70000"),
        std::string("--interval soon"), std::string("--cpus 0")}) {
    const auto bad = run_command(kEnv + kZeus + " exporter --duration 1s " + flags + " 2>&1");
    EXPECT_NE(bad.exit_code, 0) << flags;
    EXPECT_NE(bad.exit_code, 1) << flags << ": a usage problem, not a run-time failure\n"
                                << bad.output;
    EXPECT_NE(bad.output.find("--"), std::string::npos) << flags << ": names the flag\n"
                                                        << bad.output;
  }
}

TEST(ExporterCli, MissingRaplIsTheSameExitCodeAsForTheMonitor) {
  // No powercap tree at all: "not supported" (4) from both commands, naming --cpus and RAPL.
  const auto exporter = run_command(kEnv + kZeus + " exporter --duration 1s --cpus 0 2>&1");
  const auto monitor = run_command(kEnv + kZeus + " monitor --cpus 0 -- true 2>&1");
  EXPECT_EQ(exporter.exit_code, 4) << exporter.output;
  EXPECT_EQ(monitor.exit_code, exporter.exit_code) << monitor.output;
  for (const auto* result : {&exporter, &monitor}) {
    EXPECT_NE(result->output.find("--cpus 0: cannot measure CPU packages: RAPL is not available"),
              std::string::npos)
        << result->output;
  }
}

TEST(ExporterCli, MonitorServesMetricsWhileTheCommandRuns) {
  const int port = free_port();
  auto run = std::async(std::launch::async, [&] {
    return run_command(kEnv + kZeus + " monitor --interval 100ms --metrics-port " +
                       std::to_string(port) + " -- sleep 3 2>&1");
  });
  const std::string body = scrape(port, 10);
  EXPECT_NE(body.find("zeus_gpu_energy_joules_total{index=\"0\"}"), std::string::npos) << body;
  const auto result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("serving metrics at http://127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << result.output;
  // Stopped with the command.
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1, 0);
  EXPECT_FALSE(after.Get("/metrics"));
}

}  // namespace
