// Privileged GPU calls through the zeusd daemon (docs/zeusd.md, "Using zeusd from jobs").
//
// When ZEUSD_SOCK_PATH (wins) or ZEUSD_HOST_PORT is set, discovery wraps every local GPU in a
// ZeusdGpu: reads (energy, power, limits, clocks lists, names) stay on the local vendor library;
// the setters (power limit, persistence mode, locked clocks) are sent to the daemon as
// `POST /gpu/set_*?gpu_ids=<daemon index>&...&block=true` (`block=false` from the overloads
// that take `block`), with `Authorization: Bearer
// $ZEUSD_TOKEN` when a token is set. The daemon's capabilities (GET /discover, and /auth/whoami
// when it requires auth) are checked on the first setter call: a daemon without `gpu-control`
// (or a token without that scope) makes only the setters fail, with the reason; reads keep
// working (the reference instead loses every GPU).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/env.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/forwarding_gpu.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device {

// Where the daemon is and how to authenticate.
struct ZeusdConfig {
  std::optional<std::string> socket_path;  // Unix socket; wins over host/port
  std::string host;                        // TCP when socket_path is unset
  int port = 0;
  std::optional<std::string> token;  // bearer token (ZEUSD_TOKEN)
  // Connect, read and write timeout of each request (the reference client's 5 s).
  double timeout_s = 5.0;

  // "unix socket /run/zeusd/zeusd.sock" or "127.0.0.1:4938", for messages.
  std::string describe() const;
};

// ZEUSD_SOCK_PATH (wins) or ZEUSD_HOST_PORT ("host:port"), and ZEUSD_TOKEN; empty values count
// as unset. std::nullopt when neither is set. Throws Error(kInvalidArgument) for a malformed
// ZEUSD_HOST_PORT.
std::optional<ZeusdConfig> zeusd_config_from_env(const EnvLookup& env);

// A CPU package as /discover lists it.
struct ZeusdCpuInfo {
  int id = 0;
  bool dram_available = false;
};

// One HTTP exchange as the daemon answered it, whatever its status.
struct ZeusdReply {
  int status = 0;
  std::string body;
};

// One connection to the daemon (a persistent keep-alive HTTP client guarded by a mutex), shared
// by the ZeusdGpus of one discovery, with the daemon's capabilities cached after the first
// successful check.
class ZeusdConnection {
 public:
  explicit ZeusdConnection(ZeusdConfig config);
  ~ZeusdConnection();
  ZeusdConnection(const ZeusdConnection&) = delete;
  ZeusdConnection& operator=(const ZeusdConnection&) = delete;

  const ZeusdConfig& config() const { return config_; }

  // Throws Error(kNoPermission) with the reason when the daemon does not grant gpu-control
  // (group disabled, no token while auth is required, token refused or lacking the scope), and
  // Error(kIo) when the daemon cannot be reached. A reachable daemon's answer is cached.
  void require_gpu_control();

  // The daemon's CPU packages. Throws Error(kNoPermission) with the reason when the daemon does
  // not grant cpu-read (group disabled, token missing, refused or lacking the scope), and
  // Error(kIo) when it cannot be reached.
  std::vector<ZeusdCpuInfo> readable_cpus();

  // The daemon index of the GPU whose PCI bus id is `pci_bus_id` (compared case-insensitively,
  // domain as a number), from /discover. Throws Error(kNotFound) for zero or several matches.
  int daemon_index_by_pci(const std::string& pci_bus_id);

  // POST `path_and_query`; throws zeus::Error for anything but HTTP 200 (see zeusd_gpu.cpp).
  void post(const std::string& operation, const std::string& path_and_query);
  // GET `path_and_query`; the body of an HTTP 200, else a zeus::Error as for post().
  std::string get(const std::string& operation, const std::string& path_and_query);
  // `method` ("GET" or "POST") `path_and_query`, for callers that judge the status themselves
  // (the Python ZeusdClient: success is exactly 200). Throws Error(kIo) only when the daemon
  // cannot be reached or does not answer within config().timeout_s; Error(kInvalidArgument)
  // for another method.
  ZeusdReply request(const std::string& method, const std::string& path_and_query);

 private:
  struct Impl;
  // With mutex_ held: GET /discover once and keep it.
  void fetch_discover_locked();
  // With mutex_ held: why `group` ("gpu-control", "cpu-read", ...) is not usable, or nullopt.
  std::optional<std::string> group_error_locked(const std::string& group);
  ZeusdConfig config_;
  std::mutex mutex_;
  std::unique_ptr<Impl> impl_;
};

// RAPL through the daemon, for a process that may not read /sys/class/powercap itself: every
// reading is one GET /cpu/get_cumulative_energy (docs/zeusd.md, "Using zeusd from jobs").
class ZeusdCpu final : public Cpu {
 public:
  ZeusdCpu(ZeusdCpuInfo info, std::shared_ptr<ZeusdConnection> daemon);

  int index() const override { return info_.id; }
  std::string name() const override { return "package-" + std::to_string(info_.id); }
  std::uint64_t package_energy_uj() override;
  bool has_dram() const override { return info_.dram_available; }
  std::uint64_t dram_energy_uj() override;

 private:
  // read_energy_uj with every error marked as about a CPU.
  std::uint64_t read(bool dram);
  std::uint64_t read_energy_uj(bool dram);

  ZeusdCpuInfo info_;
  std::shared_ptr<ZeusdConnection> daemon_;
};

// A Gpu whose setters go to zeusd; everything else goes to `inner`.
class ZeusdGpu final : public ForwardingGpu {
 public:
  // `daemon_index`: the GPU's index as the daemon numbers it (the vendor library's index over
  // all GPUs, i.e. the physical index). With `match_by_pci` (AMD, as the reference does) the
  // index is instead looked up in /discover by PCI bus id on first use.
  ZeusdGpu(std::shared_ptr<Gpu> inner, int daemon_index, std::shared_ptr<ZeusdConnection> daemon,
           bool match_by_pci = false);

  // Through the daemon, with `block=true`: the daemon answers once the GPU is changed.
  // set_power_limit_mw sends nothing when the local reading already equals the value (as the
  // reference does); reset_power_limit sets the local default limit.
  void set_power_limit_mw(std::uint32_t power_limit_mw) override;
  void reset_power_limit() override;
  void set_persistence_mode(bool enabled) override;
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_gpu_locked_clocks() override;
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_memory_locked_clocks() override;
  // AMD: the daemon's single reset_locked_clocks; otherwise GPU then memory clocks.
  void reset_locked_clocks() override;

  // Non-blocking setters, as the reference's zeusd GPUs have them: the same requests with
  // `block=false` when `block` is false. The daemon validates the request first (a bad value
  // is still an error here) and answers as soon as the write is queued, so the GPU may not be
  // changed yet when these return, and a failure of the write itself is only in the daemon's
  // log.
  bool supports_nonblocking_setters() const { return true; }
  void set_power_limit_mw(std::uint32_t power_limit_mw, bool block);
  void reset_power_limit(bool block);
  void set_persistence_mode(bool enabled, bool block);
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block);
  void reset_gpu_locked_clocks(bool block);
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block);
  void reset_memory_locked_clocks(bool block);
  void reset_locked_clocks(bool block);

 private:
  // Checks the capability and sends `route?gpu_ids=<index><extra>&block=<block>`.
  void send(const std::string& operation, const std::string& route, const std::string& extra,
            bool block);
  int daemon_index();
  // The range rule of the daemon and NVML (device/clock_range.hpp) on the local clock lists, so
  // that a range that cannot be locked fails before a request is sent.
  void check_clock_range(bool memory, std::uint32_t min_mhz, std::uint32_t max_mhz);

  std::shared_ptr<ZeusdConnection> daemon_;
  std::mutex index_mutex_;
  std::optional<int> daemon_index_;
  bool match_by_pci_;
};

}  // namespace zeus::device
