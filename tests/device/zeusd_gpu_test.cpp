// The device layer routing setters to zeusd: a real in-process daemon on a Unix socket in a
// temporary directory, on its own simulated GPUs (distinct objects from the client's local
// simulated GPUs, so assertions on what the daemon did look at the daemon's GPUs).
#include "zeus/device/zeusd_gpu.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "daemon/daemon.hpp"
#include "device/zeusd_cpu.hpp"
#include "support/expect_error.hpp"
#include "support/running_daemon.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus {
namespace {

using zeus::testing::error_of;

namespace fs = std::filesystem;
using daemon::ApiGroup;
using daemon::AuthResult;
using daemon::DaemonConfig;
using daemon::Running;

using TempDir = zeus::testing::TempDir;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

device::GpuDiscovery discover(std::map<std::string, std::string> vars) {
  vars.emplace("ZEUS_SIMULATED_GPUS", "2:h200");
  device::DiscoveryOptions options;
  options.env = env_of(std::move(vars));
  return device::discover_gpus(options);
}

TEST(ZeusdConfigFromEnv, SocketWinsHostPortParsedTokenKept) {
  EXPECT_FALSE(device::zeusd_config_from_env(env_of({})));
  EXPECT_FALSE(device::zeusd_config_from_env(env_of({{"ZEUSD_SOCK_PATH", ""}})));
  auto both = device::zeusd_config_from_env(
      env_of({{"ZEUSD_SOCK_PATH", "/x.sock"}, {"ZEUSD_HOST_PORT", "h:1"}, {"ZEUSD_TOKEN", "t"}}));
  ASSERT_TRUE(both);
  EXPECT_EQ(both->socket_path.value_or(""), "/x.sock");
  EXPECT_EQ(both->token.value_or(""), "t");
  auto tcp = device::zeusd_config_from_env(env_of({{"ZEUSD_HOST_PORT", "127.0.0.1:4938"}}));
  ASSERT_TRUE(tcp);
  EXPECT_FALSE(tcp->socket_path);
  EXPECT_EQ(tcp->host, "127.0.0.1");
  EXPECT_EQ(tcp->port, 4938);
  EXPECT_FALSE(tcp->token);
  auto ipv6 = device::zeusd_config_from_env(env_of({{"ZEUSD_HOST_PORT", "[::1]:4938"}}));
  ASSERT_TRUE(ipv6);
  EXPECT_EQ(ipv6->host, "::1");
  // "[]:4938" used to give an empty host (found by fuzz/simulated_gpus.cpp).
  for (const char* bad : {"localhost", ":4938", "h:", "h:x1", "h:70000", "h:0", "[]:4938"}) {
    EXPECT_EQ(error_of([&] {
                device::zeusd_config_from_env(env_of({{"ZEUSD_HOST_PORT", bad}}));
              }).kind(),
              ErrorKind::kInvalidArgument)
        << bad;
  }
}

TEST(ZeusdGpu, WithoutTheVariablesGpusAreLocal) {
  const device::GpuDiscovery found = discover({});
  ASSERT_EQ(found.gpus.size(), 2u);
  EXPECT_EQ(dynamic_cast<device::ZeusdGpu*>(&found.gpus.at(0)), nullptr);
}

TEST(ZeusdGpu, SettersGoThroughTheDaemonReadsStayLocal) {
  Running daemon_run(DaemonConfig{});
  const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  ASSERT_EQ(found.gpus.size(), 2u);
  auto* routed = dynamic_cast<device::ZeusdGpu*>(&found.gpus.at(1));
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

TEST(ZeusdGpu, LockedClocksAreRangesAsInNvml) {
  Running daemon_run(DaemonConfig{});
  const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  device::Gpu& routed = found.gpus.at(0);
  auto& daemon_gpu = dynamic_cast<device::SimulatedGpu&>(daemon_run.gpu(0));
  // 1000 MHz is not a listed H200 clock: the range goes to the daemon, whose driver snaps it.
  routed.set_gpu_locked_clocks_mhz(1000, 1500);
  EXPECT_EQ(daemon_gpu.locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{1005}, std::uint32_t{1500}));
  routed.set_memory_locked_clocks_mhz(3000, 3500);
  EXPECT_EQ(daemon_gpu.locked_memory_clocks_mhz(),
            std::make_pair(std::uint32_t{3201}, std::uint32_t{3201}));

  // Wholly outside the supported span, or inverted: refused here, before any request.
  for (const auto& [min_mhz, max_mhz] : {std::pair<std::uint32_t, std::uint32_t>{100, 200},
                                         std::pair<std::uint32_t, std::uint32_t>{1500, 1000}}) {
    const Error error = error_of([&] { routed.set_gpu_locked_clocks_mhz(min_mhz, max_mhz); });
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(std::string(error.what()).find("HTTP"), std::string::npos) << error.what();
  }
  const Error outside = error_of([&] { routed.set_memory_locked_clocks_mhz(1, 2); });
  EXPECT_NE(std::string(outside.what()).find("outside the supported range 3201-3201 MHz"),
            std::string::npos)
      << outside.what();
  EXPECT_EQ(daemon_gpu.locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{1005}, std::uint32_t{1500}));
  routed.reset_locked_clocks();
  EXPECT_FALSE(daemon_gpu.locked_graphics_clocks_mhz().has_value());
  EXPECT_FALSE(daemon_gpu.locked_memory_clocks_mhz().has_value());
}

// block=false, as the reference's client sends it when asked: the daemon answers once the write
// is queued (a slow write shows the difference), but still validates the request first.
TEST(ZeusdGpu, NonBlockingSettersReturnBeforeTheWrite) {
  std::atomic<int> writes{0};
  daemon::DaemonHooks hooks;
  hooks.before_write = [&writes](const daemon::WriteEvent&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ++writes;
  };
  Running daemon_run(DaemonConfig{}, 2, std::move(hooks));
  const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  auto* routed = dynamic_cast<device::ZeusdGpu*>(&found.gpus.at(0));
  ASSERT_NE(routed, nullptr);
  EXPECT_TRUE(routed->supports_nonblocking_setters());
  const std::uint32_t target = routed->power_limit_constraints_mw().min_mw;

  auto started = std::chrono::steady_clock::now();
  routed->set_power_limit_mw(target, /*block=*/false);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(300));
  EXPECT_EQ(writes.load(), 0);  // queued, not written yet
  for (int i = 0; i < 300 && daemon_run.gpu(0).power_limit_mw() != target; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(daemon_run.gpu(0).power_limit_mw(), target);

  started = std::chrono::steady_clock::now();
  routed->set_persistence_mode(true, /*block=*/true);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(400));
  EXPECT_TRUE(daemon_run.gpu(0).persistence_mode());

  // Validated before queueing: a bad non-blocking request is still this call's error.
  const Error bad = error_of([&] { routed->set_power_limit_mw(1, /*block=*/false); });
  EXPECT_EQ(bad.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(bad.what()).find("HTTP 400"), std::string::npos) << bad.what();
  EXPECT_EQ(error_of([&] { routed->set_gpu_locked_clocks_mhz(100, 200, false); }).kind(),
            ErrorKind::kInvalidArgument);

  routed->set_gpu_locked_clocks_mhz(1000, 1500, false);
  routed->reset_locked_clocks(false);
  // The local limit (reads stay local) is already the default: nothing is sent.
  routed->reset_power_limit(false);
  for (int i = 0; i < 500 && writes.load() < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(writes.load(), 5);  // limit, persistence, lock, the two clock resets
  EXPECT_FALSE(dynamic_cast<device::SimulatedGpu&>(daemon_run.gpu(0))
                   .locked_graphics_clocks_mhz()
                   .has_value());
}

TEST(ZeusdGpu, VisibleDevicesMapToThePhysicalIndex) {
  Running daemon_run(DaemonConfig{});
  const device::GpuDiscovery found =
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
  const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
  ASSERT_EQ(found.gpus.size(), 2u);  // the GPUs are still there
  device::Gpu& gpu = found.gpus.at(0);
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
  const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", socket}});
  ASSERT_EQ(found.gpus.size(), 2u);
  device::Gpu& gpu = found.gpus.at(0);
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
  Authenticated() : run_(config(), 2, hooks()) {}
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
  daemon::DaemonHooks hooks() {
    daemon::DaemonHooks d;
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
      if (header == "Bearer good") {
        result.scopes.push_back("gpu-control");
      }
      if ((path.rfind("/gpu/set_", 0) == 0 || path.rfind("/gpu/reset_", 0) == 0) &&
          header != "Bearer good") {
        result.allowed = false;
        result.status = 403;
        result.error_message = "lacks required scope 'gpu-control'";
      }
      return result;
    };
    return d;
  }
  std::mutex mutex_;
  std::vector<std::string> headers_;
  Running run_;
};

TEST(ZeusdGpu, TokenIsSentAndItsScopeDecides) {
  Authenticated auth;
  Running& daemon_run = auth.run();
  {
    const device::GpuDiscovery found =
        discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"ZEUSD_TOKEN", "good"}});
    const std::uint32_t target = found.gpus.at(0).power_limit_constraints_mw().min_mw;
    found.gpus.at(0).set_power_limit_mw(target);
    EXPECT_EQ(daemon_run.gpu(0).power_limit_mw(), target);
    const auto headers = auth.headers();
    ASSERT_FALSE(headers.empty());
    for (const auto& header : headers) {
      EXPECT_EQ(header, "Bearer good");
    }
  }
  const std::uint32_t after = daemon_run.gpu(1).power_limit_mw();
  {
    const device::GpuDiscovery found = discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}});
    const Error error = error_of([&] { found.gpus.at(1).set_persistence_mode(true); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("ZEUSD_TOKEN"), std::string::npos) << error.what();
  }
  {
    const device::GpuDiscovery found =
        discover({{"ZEUSD_SOCK_PATH", daemon_run.socket()}, {"ZEUSD_TOKEN", "wrong"}});
    const Error error = error_of([&] { found.gpus.at(1).set_persistence_mode(true); });
    EXPECT_EQ(error.kind(), ErrorKind::kNoPermission);
    EXPECT_NE(std::string(error.what()).find("rejected"), std::string::npos) << error.what();
  }
  {
    const device::GpuDiscovery found =
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

// -- RAPL through the daemon ------------------------------------------------------------------

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  const fs::path temporary = path.string() + ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text << '\n';
  }
  fs::rename(temporary, path);
}

// A powercap tree: package 0 with a DRAM sub-zone, package 1 without.
fs::path make_powercap_tree(const fs::path& root) {
  const auto zone = [](const fs::path& dir, const std::string& name, std::uint64_t energy) {
    write_text(dir / "name", name);
    write_text(dir / "energy_uj", std::to_string(energy));
    write_text(dir / "max_energy_range_uj", "262143328850");
  };
  zone(root / "intel-rapl:0", "package-0", 1'000'000);
  zone(root / "intel-rapl:0" / "intel-rapl:0:0", "dram", 20'000);
  zone(root / "intel-rapl:1", "package-1", 3'000'000);
  return root;
}

EnvLookup cpu_env(std::map<std::string, std::string> vars, const fs::path& local_root) {
  vars.emplace("ZEUS_POWERCAP_ROOT", local_root.string());
  return env_of(std::move(vars));
}

TEST(ZeusdCpu, UnreadableLocalRaplIsReadThroughTheDaemon) {
  TempDir trees;
  const fs::path daemon_root = make_powercap_tree(trees.path() / "daemon");
  const device::CpuDiscovery daemon_cpus = device::discover_rapl_cpus(daemon_root);
  ASSERT_TRUE(daemon_cpus.available) << daemon_cpus.message;
  Running daemon_run(DaemonConfig{}, 2, {}, nullptr, daemon_cpus.cpus);

  const device::CpuDiscovery found = device::discover_cpus(
      cpu_env({{"ZEUSD_SOCK_PATH", daemon_run.socket()}}, trees.path() / "none"));
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_NE(found.message.find("through the zeusd daemon"), std::string::npos) << found.message;
  ASSERT_NE(dynamic_cast<device::ZeusdCpu*>(found.cpus[0].get()), nullptr);
  EXPECT_TRUE(found.through_zeusd);  // zeus_cpp's ZeusdRAPLCPU
  EXPECT_EQ(found.cpus[0]->index(), 0);
  EXPECT_EQ(found.cpus[0]->name(), "package-0");
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 1'000'000u);
  EXPECT_TRUE(found.cpus[0]->has_dram());
  EXPECT_EQ(found.cpus[0]->dram_energy_uj(), 20'000u);
  EXPECT_EQ(found.cpus[1]->package_energy_uj(), 3'000'000u);
  EXPECT_FALSE(found.cpus[1]->has_dram());
  EXPECT_EQ(error_of([&] { found.cpus[1]->dram_energy_uj(); }).kind(), ErrorKind::kNotSupported);

  // Every reading is a fresh request: the counter moves, the reading follows.
  write_text(daemon_root / "intel-rapl:0" / "energy_uj", "1500000");
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 1'500'000u);
}

TEST(ZeusdCpu, ReadableLocalRaplStaysLocal) {
  TempDir trees;
  const fs::path local_root = make_powercap_tree(trees.path() / "local");
  Running daemon_run(DaemonConfig{});
  const device::CpuDiscovery found =
      device::discover_cpus(cpu_env({{"ZEUSD_SOCK_PATH", daemon_run.socket()}}, local_root));
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(dynamic_cast<device::ZeusdCpu*>(found.cpus[0].get()), nullptr);
  EXPECT_FALSE(found.through_zeusd);
}

TEST(ZeusdCpu, DaemonWithoutCpuReadOrUnreachableSaysWhy) {
  TempDir trees;
  const device::CpuDiscovery daemon_cpus =
      device::discover_rapl_cpus(make_powercap_tree(trees.path() / "d"));
  DaemonConfig config;
  config.enabled_groups = {ApiGroup::kGpuRead, ApiGroup::kGpuControl};
  Running daemon_run(config, 2, {}, nullptr, daemon_cpus.cpus);
  const device::CpuDiscovery refused = device::discover_cpus(
      cpu_env({{"ZEUSD_SOCK_PATH", daemon_run.socket()}}, trees.path() / "none"));
  EXPECT_FALSE(refused.available);
  EXPECT_TRUE(refused.cpus.empty());
  EXPECT_NE(refused.message.find("cpu-read"), std::string::npos) << refused.message;

  const std::string missing = (trees.path() / "no.sock").string();
  const device::CpuDiscovery unreachable =
      device::discover_cpus(cpu_env({{"ZEUSD_SOCK_PATH", missing}}, trees.path() / "none"));
  EXPECT_FALSE(unreachable.available);
  EXPECT_NE(unreachable.message.find("unreachable"), std::string::npos) << unreachable.message;

  const device::CpuDiscovery no_daemon = device::discover_cpus(cpu_env({}, trees.path() / "none"));
  EXPECT_FALSE(no_daemon.available);
  EXPECT_EQ(no_daemon.message.find("zeusd"), std::string::npos) << no_daemon.message;
}

}  // namespace
}  // namespace zeus
