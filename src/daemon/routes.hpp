// zeusd's surface: the routes (an http::Router) of the groups the config enables, and the
// middleware before them (API group, then auth). Handlers validate everything before a GPU is
// touched; writes go through GpuWriters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "daemon/config.hpp"
#include "daemon/gpu_writer.hpp"
#include "daemon/power_stream.hpp"
#include "daemon/query.hpp"
#include "http/host.hpp"
#include "http/router.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

// A validated-before-written change, as a write route parses it from its query.
struct PlannedWrite {
  GpuWrite write;
  // A reason to refuse the write on this GPU ("Invalid request: ..."), or nullopt.
  std::function<std::optional<std::string>(device::Gpu&)> validate;
};

class Routes {
 public:
  // Everything referenced must outlive this.
  Routes(const DaemonConfig& config, device::Gpus& gpus,
         const std::vector<std::shared_ptr<device::Cpu>>& cpus, GpuWriters& writers,
         AuthorizeHook authorize, std::shared_ptr<const Clock> clock);

  // Answers one request (the http::Host's handler).
  void handle(const http::Request& req, http::Response& res) const;

 private:
  void add(const std::string& method, const std::string& path, RouteHandler handler);
  // True when the request was answered here (refused, or /auth/whoami).
  bool pre_route(const http::Request& req, http::Response& res) const;

  void install_server_routes();
  void install_gpu_reads();
  void install_gpu_writes();
  void install_cpu_reads();

  void discover(const http::Request& req, http::Response& res) const;
  void gpu_read(const std::string& path, std::function<Json(device::Gpu&)> read);
  void gpu_write(const std::string& path, std::vector<std::string_view> fields,
                 std::function<PlannedWrite(const Query&)> parse);
  std::vector<int> read_gpu_ids(const Query& query) const;
  std::vector<int> write_gpu_ids(const Query& query) const;
  std::vector<std::shared_ptr<device::Cpu>> read_cpus(const Query& query) const;
  Json read_each(const std::vector<int>& ids, const std::function<Json(device::Gpu&)>& read) const;
  void run_writes(const http::Request& req, http::Response& res, const std::vector<int>& ids,
                  bool block, const PlannedWrite& planned);

  const DaemonConfig& config_;
  device::Gpus& gpus_;
  const std::vector<std::shared_ptr<device::Cpu>>& cpus_;
  GpuWriters& writers_;
  AuthorizeHook authorize_;
  std::shared_ptr<const Clock> clock_;
  GpuPowerFeeds gpu_power_feeds_;  // /gpu/stream_power: one sampler per set of GPUs
  http::Router router_;
};

}  // namespace zeus::daemon
