// The device layer routing setters to zeusd: a real in-process daemon on a Unix socket in a
// temporary directory, on its own simulated GPUs (distinct objects from the client's local
// simulated GPUs, so assertions on what the daemon did look at the daemon's GPUs).
#include "zeus/device/zeusd_gpu.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/daemon/daemon.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus {
namespace {

namespace fs = std::filesystem;
using daemon::ApiGroup;
using daemon::AuthResult;
using daemon::Daemon;
using daemon::DaemonConfig;

using TempDir = zeus::testing::TempDir;

// A daemon on <tmp>/zeusd.sock over two simulated H200s, served from a background thread.
class Running {
 public:
  explicit Running(DaemonConfig config, std::function<void(Daemon&)> setup = nullptr) {
    std::vector<std::shared_ptr<Gpu>> gpus;
    for (int i = 0; i < 2; ++i)
      gpus.push_back(
          std::make_shared<SimulatedGpu>(simulated_gpu_model("h200"), i, steady_clock()));
    gpus_ = Gpus(gpus, {0, 1});
    config.socket_path = dir_.path() / "zeusd.sock";
    daemon_ = std::make_unique<Daemon>(config, gpus_, std::vector<std::shared_ptr<Cpu>>{});
    if (setup)
      setup(*daemon_);
    daemon_->bind();
    thread_ = std::thread([this] { daemon_->serve(); });
    for (int i = 0; i < 500 && !daemon_->is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~Running() {
    daemon_->stop();
    thread_.join();
  }
  Gpu& gpu(int i) { return gpus_.at(i); }
  std::string socket() const { return daemon_->config().socket_path.string(); }

 private:
  TempDir dir_;
  Gpus gpus_;
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
};

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end())
      return std::nullopt;
    return it->second;
  };
}

GpuDiscovery discover(std::map<std::string, std::string> vars) {
  vars.emplace("ZEUS_SIMULATED_GPUS", "2:h200");
  DiscoveryOptions options;
  options.env = env_of(std::move(vars));
  return discover_gpus(options);
}

template <typename Fn>
Error error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no zeus::Error thrown";
  return Error(ErrorKind::kUnknown, "");
}

TEST(ZeusdConfigFromEnv, SocketWinsHostPortParsedTokenKept) {
  EXPECT_FALSE(zeusd_config_from_env(env_of({})));
  EXPECT_FALSE(zeusd_config_from_env(env_of({{"ZEUSD_SOCK_PATH", ""}})));
  auto both = zeusd_config_from_env(
      env_of({{"ZEUSD_SOCK_PATH", "/x.sock"}, {"ZEUSD_HOST_PORT", "h:1"}, {"ZEUSD_TOKEN", "t"}}));
  ASSERT_TRUE(both);
  EXPECT_EQ(both->socket_path.value_or(""), "/x.sock");
  EXPECT_EQ(both->token.value_or(""), "t");
  auto tcp = zeusd_config_from_env(env_of({{"ZEUSD_HOST_PORT", "127.0.0.1:4938"}}));
  ASSERT_TRUE(tcp);
  EXPECT_FALSE(tcp->socket_path);
  EXPECT_EQ(tcp->host, "127.0.0.1");
  EXPECT_EQ(tcp->port, 4938);
  EXPECT_FALSE(tcp->token);
  for (const char* bad : {"localhost", ":4938", "h:", "h:x1", "h:70000", "h:0"}) {
    EXPECT_EQ(error_of([&] {
                zeusd_config_from_env(env_of({{"ZEUSD_HOST_PORT", bad}}));
              }).kind(),
              ErrorKind::kInvalidArgument)
        << bad;
  }
}

TEST(ZeusdGpu, WithoutTheVariablesGpusAreLocal) {
  const GpuDiscovery found = discover({});
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(dynamic_cast<ZeusdGpu*>(&found.gpus.at(0)), nullptr);
}

TEST(ZeusdGpu, SettersGoThroughTheDaemonReadsStayLocal) {
  Running daemon_run(DaemonConfig{});
  const GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  ASSERT_EQ(found.gpus.size(), 2u);
  auto* routed = dynamic_cast<ZeusdGpu*>(&found.gpus.at(1));
  ASSERT_NE(routed, nullptr);

  const std::uint32_t local_before = routed->power_limit_mw();
  const auto constraints = routed->power_limit_constraints_mw();
  const std::uint32_t target = constraints.min_mw;
  ASSERT_NE(target, local_before);
  routed->set_power_limit_mw(target);
  EXPECT_EQ(daemon_run.gpu(1).power_limit_mw(), target);  // the daemon's GPU 1 changed
  EXPECT_NE(daemon_run.gpu(0).power_limit_mw(), target);
  EXPECT_EQ(routed->power_limit_mw(), local_before);  // reads: the local GPU, untouched
  EXPECT_EQ(routed->inner().power_limit_mw(), local_before);

  routed->set_persistence_mode(true);
  EXPECT_TRUE(daemon_run.gpu(1).persistence_mode());
  const auto mem = daemon_run.gpu(1).supported_memory_clocks_mhz();
  const auto sm = daemon_run.gpu(1).supported_graphics_clocks_mhz(std::nullopt);
  ASSERT_FALSE(mem.empty());
  ASSERT_FALSE(sm.empty());
  routed->set_gpu_locked_clocks_mhz(*std::min_element(sm.begin(), sm.end()),
                                    *std::max_element(sm.begin(), sm.end()));
  routed->set_memory_locked_clocks_mhz(mem.front(), mem.front());
  routed->reset_locked_clocks();

  // The daemon's own validation comes back as a zeus::Error with its text.
  const Error bad = error_of([&] { routed->set_power_limit_mw(1); });
  EXPECT_EQ(bad.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(bad.what()).find("HTTP 400"), std::string::npos) << bad.what();
  EXPECT_NE(std::string(bad.what()).find("GPU 1"), std::string::npos) << bad.what();
  EXPECT_EQ(daemon_run.gpu(1).power_limit_mw(), target);
}

TEST(ZeusdGpu, VisibleDevicesMapToThePhysicalIndex) {
  Running daemon_run(DaemonConfig{});
  const GpuDiscovery found =
      discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"CUDA_VISIBLE_DEVICES", "1"}});
  ASSERT_EQ(found.gpus.size(), 1u);
  const std::uint32_t target = found.gpus.at(0).power_limit_constraints_mw().min_mw;
  found.gpus.at(0).set_power_limit_mw(target);
  EXPECT_EQ(daemon_run.gpu(1).power_limit_mw(), target);
  EXPECT_NE(daemon_run.gpu(0).power_limit_mw(), target);
}

TEST(ZeusdGpu, DaemonWithoutGpuControlFailsOnlyTheSetters) {
  DaemonConfig config;
  config.enabled_groups = {ApiGroup::kGpuRead};
  Running daemon_run(config);
  const GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  ASSERT_EQ(found.gpus.size(), 2u);  // the GPUs are still there
  Gpu& gpu = found.gpus.at(0);
  EXPECT_GT(gpu.power_limit_mw(), 0u);
  EXPECT_NO_THROW(gpu.total_energy_mj());
  EXPECT_FALSE(gpu.name().empty());
  const std::uint32_t before = daemon_run.gpu(0).power_limit_mw();
  const Error error =
      error_of([&] { gpu.set_power_limit_mw(gpu.power_limit_constraints_mw().min_mw); });
  EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
  EXPECT_NE(std::string(error.what()).find("gpu-control"), std::string::npos) << error.what();
  EXPECT_EQ(error_of([&] { gpu.set_persistence_mode(true); }).kind(), ErrorKind::kNoPermission);
  EXPECT_EQ(daemon_run.gpu(0).power_limit_mw(), before);
}

TEST(ZeusdGpu, UnreachableDaemonFailsOnlyTheSetters) {
  TempDir dir;
  const std::string socket = (dir.path() / "nobody.sock").string();
  const GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", socket}});
  ASSERT_EQ(found.gpus.size(), 2u);
  Gpu& gpu = found.gpus.at(0);
  EXPECT_GT(gpu.power_limit_mw(), 0u);
  const Error error =
      error_of([&] { gpu.set_power_limit_mw(gpu.power_limit_constraints_mw().min_mw); });
  EXPECT_EQ(error.kind(), ErrorKind::kIo);
  EXPECT_NE(std::string(error.what()).find("unreachable"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find(socket), std::string::npos) << error.what();
}

// A daemon requiring tokens: "Bearer good" has gpu-control, "Bearer reader" only gpu-read.
class Authenticated {
 public:
  Authenticated()
      : run_(config(), [this](Daemon& d) {
          d.authorize = [this](const std::string& path, const std::string& header) {
            {
              const std::lock_guard lock(mutex_);
              headers_.push_back(header);
            }
            AuthResult result;
            if (header != "Bearer good" && header != "Bearer reader") {
              result.allowed = false;
              result.status = 401;
              result.www_authenticate = true;
              result.error_message = "Invalid token: bad";
              return result;
            }
            result.subject = "alice";
            result.scopes = {"gpu-read"};
            if (header == "Bearer good")
              result.scopes.push_back("gpu-control");
            if ((path.rfind("/gpu/set_", 0) == 0 || path.rfind("/gpu/reset_", 0) == 0) &&
                header != "Bearer good") {
              result.allowed = false;
              result.status = 403;
              result.error_message = "lacks required scope 'gpu-control'";
            }
            return result;
          };
        }) {}
  Running& run() { return run_; }
  std::vector<std::string> headers() {
    const std::lock_guard lock(mutex_);
    return headers_;
  }

 private:
  static DaemonConfig config() {
    DaemonConfig c;
    c.auth_required = true;
    return c;
  }
  std::mutex mutex_;
  std::vector<std::string> headers_;
  Running run_;
};

TEST(ZeusdGpu, TokenIsSentAndItsScopeDecides) {
  Authenticated auth;
  Running& daemon_run = auth.run();
  {
    const GpuDiscovery found =
        discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"ZEUSD_TOKEN", "good"}});
    const std::uint32_t target = found.gpus.at(0).power_limit_constraints_mw().min_mw;
    found.gpus.at(0).set_power_limit_mw(target);
    EXPECT_EQ(daemon_run.gpu(0).power_limit_mw(), target);
    const auto headers = auth.headers();
    ASSERT_FALSE(headers.empty());
    for (const auto& header : headers)
      EXPECT_EQ(header, "Bearer good");
  }
  const std::uint32_t after = daemon_run.gpu(1).power_limit_mw();
  {
    const GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
    const Error error = error_of([&] { found.gpus.at(1).set_persistence_mode(true); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("ZEUSD_TOKEN"), std::string::npos) << error.what();
  }
  {
    const GpuDiscovery found =
        discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"ZEUSD_TOKEN", "wrong"}});
    const Error error = error_of([&] { found.gpus.at(1).set_persistence_mode(true); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("rejected"), std::string::npos) << error.what();
  }
  {
    const GpuDiscovery found =
        discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"ZEUSD_TOKEN", "reader"}});
    const Error error = error_of([&] { found.gpus.at(1).set_persistence_mode(true); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("gpu-control scope"), std::string::npos)
        << error.what();
    EXPECT_GT(found.gpus.at(1).power_limit_mw(), 0u);  // reads still work
  }
  EXPECT_FALSE(daemon_run.gpu(1).persistence_mode());
  EXPECT_EQ(daemon_run.gpu(1).power_limit_mw(), after);
}

}  // namespace
}  // namespace zeus
