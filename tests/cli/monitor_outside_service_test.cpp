// `zeus monitor` against hostile carbon and price services (a byte a second, a hang after the
// head, a 4 GiB or endless body): the energy summary comes within the fetch deadline after the
// command ends (6 s, outside_services.hpp), SIGTERM or SIGINT during a lookup ends zeus within
// 5 s with the summary and the command's status, and zeus's memory stays under 150 MiB.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "monitor_test_support.hpp"
#include "support/hostile_http_peer.hpp"
#include "support/sanitizers.hpp"
#include "support/wait_until.hpp"

namespace {

using namespace zeus::testing::cli_monitor;
using zeus::testing::HostileHttpPeer;
using zeus::testing::Hostility;

constexpr double kFetchDeadlineS = 6.0;  // kCliFetchTimeoutS
constexpr double kMaxRssKib = 150.0 * 1024;

// The peak resident memory of a process (VmHWM, KiB), sampled until `stop` is set.
class PeakRss {
 public:
  explicit PeakRss(pid_t pid)
      : thread_([this, pid] {
          while (!stop_.load()) {
            std::ifstream status("/proc/" + std::to_string(pid) + "/status");
            std::string line;
            while (std::getline(status, line)) {
              if (line.rfind("VmHWM:", 0) == 0) {
                peak_kib_ = std::max(peak_kib_.load(), std::stod(line.substr(6)));
              }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~PeakRss() { finish(); }
  double finish() {
    stop_.store(true);
    if (thread_.joinable()) {
      thread_.join();
    }
    return peak_kib_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<double> peak_kib_{0.0};
  std::thread thread_;
};

struct Service {
  std::string name;
  std::vector<std::string> env;   // what points zeus at the hostile peer
  std::vector<std::string> flag;  // the monitor's flag and SPEC
};

Service carbon_service(const HostileHttpPeer& peer) {
  return {"carbon",
          {"ELECTRICITYMAPS_URL=" + peer.url() + "/v3"},
          {"--carbon-intensity", "electricitymaps:DE"}};
}

Service price_service(const HostileHttpPeer& peer) {
  return {"price",
          {"OPENEI_URL=" + peer.url(), "OPENEI_API_KEY=key"},
          {"--price", "openei:Some Rate@37.77,-122.42"}};
}

std::vector<std::string> monitor_args(const Service& service, const std::string& output,
                                      const std::vector<std::string>& command) {
  std::vector<std::string> args = {"monitor", "--json", "--output", output};
  args.insert(args.end(), service.flag.begin(), service.flag.end());
  args.emplace_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::vector<std::string> with_gpus(std::vector<std::string> env) {
  env.push_back(kTwoH200);
  return env;
}

// The summary has the energy and no footprint figure, with a note saying why.
void expect_energy_only(const fs::path& file, const std::string& note) {
  const json summary = json::parse(read_file(file));
  EXPECT_EQ(summary["gpu_energy_j"].size(), 2u) << summary.dump();
  EXPECT_TRUE(has_note(summary, note)) << summary["notes"].dump();
}

TEST_F(CliMonitor, AHostileServicePrintsTheSummaryWithinTheDeadlineInBoundedMemory) {
  // Each misbehaviour once, the two services taking turns (a trickle costs the whole 6 s).
  const std::vector<std::pair<Hostility, bool>> cases = {{Hostility::kTrickleHead, true},
                                                         {Hostility::kTrickleBody, false},
                                                         {Hostility::kHugeLength, true},
                                                         {Hostility::kEndlessChunked, false}};
  for (const auto& [hostility, carbon] : cases) {
    HostileHttpPeer peer(hostility);
    const Service service = carbon ? carbon_service(peer) : price_service(peer);
    SCOPED_TRACE(service.name + " " + std::to_string(static_cast<int>(hostility)));
    const fs::path output = path("s.json");
    ZeusProcess zeus(dir_, with_gpus(service.env),
                     monitor_args(service, output.string(), {"sleep", "1"}));
    PeakRss rss(zeus.pid());
    const Result result = zeus.wait(60.0);
    const double peak_kib = rss.finish();
    ASSERT_EQ(result.exit_code, 0) << result.err;
    // The command's second, then at most the deadline (and a loaded machine's margin).
    EXPECT_LT(result.wall_s, 1.0 + kFetchDeadlineS + 5.0);
    if (!zeus::testing::kSanitized) {
      EXPECT_LT(peak_kib, kMaxRssKib);
    }
    expect_energy_only(
        output, service.name == "carbon" ? "no carbon emissions: " : "no electricity cost: ");
  }
}

// A stop signal while the lookup trickles: zeus ends within 5 s, prints the summary (the energy,
// the footprint noted as missing) and exits with the command's status.
TEST_F(CliMonitor, AStopSignalDuringALookupEndsZeusWithinFiveSeconds) {
  HostileHttpPeer peer(Hostility::kTrickleBody);
  for (const int signal : {SIGTERM, SIGINT}) {
    for (const Service& service : {carbon_service(peer), price_service(peer)}) {
      SCOPED_TRACE(service.name + " " + std::to_string(signal));
      const int before = peer.connections();
      const fs::path output = path("t.json");
      ZeusProcess zeus(dir_, with_gpus(service.env),
                       monitor_args(service, output.string(), {"sh", "-c", "exit 3"}));
      ASSERT_TRUE(zeus.wait_until_catching_sigterm());
      zeus::testing::wait_until([&] { return peer.connections() > before; },
                                std::chrono::seconds(30));
      ASSERT_GT(peer.connections(), before) << "the lookup never started";
      const auto signalled = Clock::now();
      ::kill(zeus.pid(), signal);
      const Result result = zeus.wait(60.0);
      EXPECT_LT(seconds_since(signalled), 5.0);
      EXPECT_EQ(result.kill_signal, 0);
      EXPECT_EQ(result.exit_code, 3) << result.err;  // the command's
      expect_energy_only(
          output, service.name == "carbon" ? "no carbon emissions: " : "no electricity cost: ");
    }
  }
}

// SIGTERM while the command runs: forwarded to it, and the lookup after it cannot hold zeus
// past 5 s.
TEST_F(CliMonitor, SigtermWhileTheCommandRunsIsForwardedAndTheLookupCannotHoldZeus) {
  HostileHttpPeer peer(Hostility::kTrickleHead);
  const Service service = carbon_service(peer);
  const fs::path output = path("f.json");
  ZeusProcess zeus(dir_, with_gpus(service.env),
                   monitor_args(service, output.string(), {"sleep", "60"}));
  ASSERT_TRUE(zeus.wait_until_catching_sigterm());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // sleep has started
  const auto signalled = Clock::now();
  ::kill(zeus.pid(), SIGTERM);
  const Result result = zeus.wait(60.0);
  EXPECT_LT(seconds_since(signalled), 5.0);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;  // sleep's, killed by the signal
  expect_energy_only(output, "no carbon emissions: ");
}

}  // namespace
