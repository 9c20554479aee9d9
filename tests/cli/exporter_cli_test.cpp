// `zeus exporter` and `zeus monitor --metrics-port`, end to end on simulated GPUs: the process
// serves /metrics, stops on time, and refuses bad flags and a port in use with clear messages.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "run_command.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/local_http_server.hpp"
#include "support/sanitizers.hpp"
#include "support/spawned_process.hpp"
#include "support/wait_until.hpp"

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

// The value of the sample line `series` (name and labels as rendered) in `body`.
std::optional<double> sample(const std::string& body, const std::string& series) {
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// Waits for `port_file` to hold the port (0 when it never did).
int wait_for_port(const fs::path& port_file) {
  int port = 0;
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(port_file);
    in >> port;
  }
  return port;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
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

TEST(ExporterCli, MonitorServesCarbonAndCostCountersWithItsFlags) {
  const int port = free_port();
  auto run = std::async(std::launch::async, [&] {
    return run_command(kEnv + kZeus + " monitor --interval 100ms --metrics-port " +
                       std::to_string(port) +
                       " --carbon-intensity 300 --price 0.3 -- sleep 3 2>&1");
  });
  // Until the first read priced an interval (a loaded machine may take more than a second).
  std::string body;
  zeus::testing::wait_until(
      [&] {
        body = scrape(port, 10);
        return sample(body, "zeus_gpu_carbon_emission_grams_total{index=\"0\"}").value_or(0.0) >
               0.0;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(300));
  EXPECT_EQ(sample(body, "zeus_carbon_intensity_gco2eq_per_kwh"), 300.0) << body;
  EXPECT_EQ(sample(body, "zeus_electricity_price_per_kwh"), 0.3) << body;
  const auto grams = sample(body, "zeus_gpu_carbon_emission_grams_total{index=\"0\"}");
  const auto cost = sample(body, "zeus_gpu_energy_cost_total{index=\"0\"}");
  ASSERT_TRUE(grams && cost) << body;
  EXPECT_GT(*grams, 0.0) << body;
  EXPECT_NEAR(*cost / 0.3, *grams / 300.0, 1e-9 * *grams) << body;
  const auto result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(ExporterCli, CarbonAndCostCountersFollowTheEnergyCounters) {
  const fs::path port_file = temp_path("carbon-port");
  fs::remove(port_file);
  auto run = std::async(std::launch::async, [&] {
    return run_command(kEnv + kZeus +
                       " exporter --port 0 --interval 100ms --duration 4s --carbon-intensity 400 "
                       "--price 0.2 --port-file " +
                       port_file.string() + " 2>&1");
  });
  const int port = wait_for_port(port_file);
  ASSERT_GT(port, 0) << "no port file";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string body = scrape(port, 10);
  for (const std::string family :
       {"zeus_gpu_carbon_emission_grams_total", "zeus_gpu_energy_cost_total",
        "zeus_cpu_carbon_emission_grams_total", "zeus_dram_energy_cost_total"}) {
    EXPECT_NE(body.find("# TYPE " + family + " counter"), std::string::npos) << body;
  }
  EXPECT_EQ(sample(body, "zeus_carbon_intensity_gco2eq_per_kwh"), 400.0) << body;
  EXPECT_EQ(sample(body, "zeus_electricity_price_per_kwh"), 0.2) << body;  // no currency label
  EXPECT_EQ(sample(body, "zeus_carbon_intensity_failures_total"), 0.0) << body;
  for (const std::string index : {"0", "1"}) {
    const std::string labels = "{index=\"" + index + "\"}";
    const auto joules = sample(body, "zeus_gpu_energy_joules_total" + labels);
    const auto grams = sample(body, "zeus_gpu_carbon_emission_grams_total" + labels);
    const auto cost = sample(body, "zeus_gpu_energy_cost_total" + labels);
    ASSERT_TRUE(joules && grams && cost) << body;
    EXPECT_GT(*joules, 30.0) << "55 W idle for over a second";
    // The emissions are those of the energy up to the last priced read: a scrape may fall
    // between a read's energy and its pricing, so they may trail by one read (100 ms, ~6 J).
    const double priced_j = *grams / 400.0 * 3.6e6;
    EXPECT_LE(priced_j, *joules + 1e-6) << body;
    EXPECT_GE(priced_j, *joules - std::max(15.0, 0.2 * *joules)) << body;
    // Both priced at the same reads.
    EXPECT_NEAR(*cost / 0.2, *grams / 400.0, 1e-9 * *grams) << body;
  }
  const auto result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("with carbon emissions and cost"), std::string::npos)
      << result.output;
  fs::remove(port_file);
}

TEST(ExporterCli, AFailingCarbonServiceKeepsMetricsServing) {
  // The service answers 500, and slowly: the reading thread waits about 2 s on its two attempts.
  std::atomic<int> requests{0};
  std::atomic<int> in_flight{0};
  zeus::testing::LocalHttpServer service;
  service.server().Get(".*", [&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    ++in_flight;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    res.status = 500;
    res.set_content("{\"error\": \"down\"}", "application/json");
    --in_flight;
  });
  service.start();
  const int service_port = service.port();
  ASSERT_GT(service_port, 0);

  const fs::path port_file = temp_path("failing-port");
  fs::remove(port_file);
  auto run = std::async(std::launch::async, [&] {
    return run_command("ELECTRICITYMAPS_URL=http://127.0.0.1:" + std::to_string(service_port) +
                       " " + kEnv + kZeus +
                       " exporter --port 0 --interval 100ms --duration 7s "
                       "--carbon-intensity electricitymaps:DE --port-file " +
                       port_file.string() + " 2>&1");
  });
  const int port = wait_for_port(port_file);
  ASSERT_GT(port, 0) << "no port file";
  // While the reading thread waits on the service, scrapes are answered at once.
  std::string first;
  bool scraped_while_waiting = false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto started = std::chrono::steady_clock::now();
    const std::string body = scrape(port, 5);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(900));
    ASSERT_FALSE(body.empty());
    scraped_while_waiting = scraped_while_waiting || in_flight.load() > 0;
    if (first.empty()) {
      first = body;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(scraped_while_waiting) << "no scrape fell while the service was being waited for";
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::string later = scrape(port, 5);
  const auto failures = sample(later, "zeus_carbon_intensity_failures_total");
  ASSERT_TRUE(failures) << later;
  EXPECT_GE(*failures, 1.0) << later;
  EXPECT_EQ(sample(later, "zeus_gpu_carbon_emission_grams_total{index=\"0\"}"), 0.0) << later;
  EXPECT_FALSE(sample(later, "zeus_carbon_intensity_gco2eq_per_kwh")) << "never known";
  // The device reads went on.
  EXPECT_GT(*sample(later, "zeus_gpu_energy_joules_total{index=\"0\"}"),
            *sample(first, "zeus_gpu_energy_joules_total{index=\"0\"}") + 50.0);
  const auto result = run.get();
  service.stop();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_GT(requests.load(), 0);
  // Logged once for the streak, not once per read.
  EXPECT_EQ(occurrences(result.output, "the carbon intensity provider failed"), 1u)
      << result.output;
  fs::remove(port_file);
}

// A carbon service that trickles or floods: the devices are read on time meanwhile, SIGTERM
// while the lookup is in flight stops the exporter within 5 s (the lookup is cancelled), and its
// memory stays under 150 MiB.
TEST(ExporterCli, SigtermStopsItWithinFiveSecondsWhileALookupHangs) {
  for (const auto hostility :
       {zeus::testing::Hostility::kTrickleBody, zeus::testing::Hostility::kEndlessChunked}) {
    SCOPED_TRACE(static_cast<int>(hostility));
    zeus::testing::HostileHttpPeer peer(hostility);
    const fs::path port_file = temp_path("hostile-port");
    fs::remove(port_file);
    zeus::testing::SpawnedProcess exporter(
        {kZeus, "exporter", "--port", "0", "--interval", "100ms", "--carbon-intensity",
         "electricitymaps:DE", "--port-file", port_file.string()},
        temp_path("hostile.log"),
        {{"ZEUS_SIMULATED_GPUS", "2:a100"},
         {"ZEUS_POWERCAP_ROOT", "/nonexistent"},
         {"ELECTRICITYMAPS_URL", peer.url() + "/v3"}});
    const int port = wait_for_port(port_file);
    ASSERT_GT(port, 0) << exporter.log();
    ASSERT_TRUE(zeus::testing::wait_until([&] { return peer.connections() > 0; },
                                          std::chrono::seconds(20)));
    // While the lookup hangs, the devices are still read: the energy counters go on.
    const std::string series = "zeus_gpu_energy_joules_total{index=\"0\"}";
    const auto before = sample(scrape(port, 5), series);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well into the lookup
    const auto after = sample(scrape(port, 5), series);
    ASSERT_TRUE(before && after);
    EXPECT_GT(*after, *before + 20.0) << "the energy counters froze while the lookup hung";
    double peak_kib = 0.0;
    {
      std::ifstream status("/proc/" + std::to_string(exporter.pid()) + "/status");
      std::string line;
      while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
          peak_kib = std::stod(line.substr(6));
        }
      }
    }
    EXPECT_GT(peak_kib, 0.0);
    if (!zeus::testing::kSanitized) {
      EXPECT_LT(peak_kib, 150.0 * 1024);
    }
    const auto signalled = std::chrono::steady_clock::now();
    exporter.signal(SIGTERM);
    const std::optional<int> status = exporter.wait_for(std::chrono::seconds(30));
    ASSERT_TRUE(status) << exporter.log();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(),
              5.0);
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exporter.log();
    fs::remove(port_file);
  }
}

TEST(ExporterCli, BadCarbonOrPriceSpecsStopItBeforeServing) {
  // A bad value is a usage error (2); a missing tariff file is the monitor's not-found (1).
  for (const auto& [flags, code] :
       {std::pair<std::string, int>("--carbon-intensity -5", 2),
        std::pair<std::string, int>("--carbon-intensity electricitymaps:", 2),
        std::pair<std::string, int>("--price -1", 2),
        std::pair<std::string, int>("--price /nonexistent/tariff.json", 1)}) {
    const auto bad = run_command(kEnv + kZeus + " exporter --duration 1s " + flags + " 2>&1");
    EXPECT_EQ(bad.exit_code, code) << flags << "\n" << bad.output;
    EXPECT_NE(bad.output.find(flags.substr(0, flags.find(' '))), std::string::npos)
        << flags << ": names the flag\n"
        << bad.output;
    EXPECT_EQ(bad.output.find("serving"), std::string::npos) << bad.output;
  }
}

}  // namespace
