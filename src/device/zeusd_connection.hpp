// The one connection to zeusd that the ZeusdGpus and ZeusdCpus of one discovery share: requests
// through the one HTTP client (http::Client, at zeusd_endpoint.hpp's address), the daemon's
// refusals as zeus::Errors, and its capabilities (GET /discover, GET /auth/whoami) checked once.
// Internal: zeus's device layer, the Python ZeusdClient's transport (src/python/zeusd.cpp) and
// tests use it; users program against ZeusdGpu (zeus/device/zeusd_gpu.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/zeusd_config.hpp"

namespace zeus::device {

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

  // POST `path_and_query`; throws zeus::Error for anything but HTTP 200 (see
  // zeusd_connection.cpp).
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

// The text of a daemon's error body: {"error": m} -> m; {"errors": {"0": m}} -> "GPU 0: m"; any
// other body as it is, "(empty body)" for none.
std::string zeusd_error_text(const std::string& body);

}  // namespace zeus::device
