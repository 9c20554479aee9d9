// The Daemon: wires the configuration, the GPU writers and the route table to one http::Host.
#include "daemon/daemon.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <mutex>

#include "daemon/gpu_writer.hpp"
#include "daemon/reply.hpp"
#include "daemon/routes.hpp"
#include "http/host.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {
namespace {

http::HostOptions host_options(const DaemonConfig& config) {
  http::HostOptions options;
  options.name = "zeusd";
  options.worker_threads = config.worker_threads;
  options.listen_backlog = SOMAXCONN;
  // zeusd's requests carry everything in the query string.
  options.limits.max_body_bytes = 64 * 1024;
  options.error_body = [](int status, const std::string& message, http::Response& res) {
    reply_error(res, json_error(status, message));
  };
  return options;
}

DaemonConfig effective(DaemonConfig config) {
  if (config.read_only) {
    std::erase(config.enabled_groups, ApiGroup::kGpuControl);
  }
  return config;
}

}  // namespace

struct Daemon::Impl {
  // Members are destroyed bottom-up: the host (no more requests) first, then the routes, then
  // the writers, which finish their queued writes while the GPUs still exist.
  const DaemonConfig config;
  device::Gpus gpus;
  const std::vector<std::shared_ptr<device::Cpu>> cpus;
  // Clients difference cumulative CPU energy over any span: the counters are tracked for the
  // daemon's whole life, so that no wraparound goes unseen (docs/rapl.md).
  const std::shared_ptr<void> cpu_tracking;
  const bool authenticated;
  GpuWriters writers;
  Routes routes;
  http::Host host;
  bool bound = false;
  bool created_socket = false;
  int port = 0;
  std::mutex stop_mutex;

  Impl(DaemonConfig cfg, device::Gpus g, std::vector<std::shared_ptr<device::Cpu>> c,
       DaemonHooks hooks, std::shared_ptr<const Clock> clock)
      : config(effective(std::move(cfg))),
        gpus(std::move(g)),
        cpus(std::move(c)),
        cpu_tracking(device::track_wraparound(cpus)),
        authenticated(static_cast<bool>(hooks.authorize)),
        writers(gpus, std::move(hooks.before_write), std::move(hooks.on_write)),
        routes(config, gpus, cpus, writers, std::move(hooks.authorize), std::move(clock)),
        host(host_options(config),
             [this](const http::Request& req, http::Response& res) { routes.handle(req, res); }) {}
};

Daemon::Daemon(DaemonConfig config, device::Gpus gpus,
               std::vector<std::shared_ptr<device::Cpu>> cpus, DaemonHooks hooks,
               std::shared_ptr<const Clock> clock)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(gpus), std::move(cpus),
                                   std::move(hooks), std::move(clock))) {}

Daemon::~Daemon() {
  stop();
}

const DaemonConfig& Daemon::config() const {
  return impl_->config;
}

void Daemon::bind() {
  Impl& d = *impl_;
  if (d.bound) {
    throw Error(ErrorKind::kInvalidArgument, "zeusd: bind() called twice");
  }
  if (d.config.mode == TransportMode::kUds) {
    bind_unix_socket(d.host, d.config, d.created_socket);
  } else {
    d.port = bind_tcp_socket(d.host, d.config, d.authenticated);
  }
  d.bound = true;
}

void Daemon::run_serialized(int gpu_index, const std::function<void()>& action) {
  impl_->writers.run_serialized(gpu_index, action);
}

int Daemon::tcp_port() const {
  return impl_->port;
}

void Daemon::serve() {
  if (!impl_->bound) {
    bind();
  }
  impl_->host.serve();
}

void Daemon::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  impl_->host.stop();
  if (impl_->created_socket) {
    ::unlink(impl_->config.socket_path.c_str());
    impl_->created_socket = false;
  }
}

bool Daemon::is_running() const {
  return impl_->host.running();
}

}  // namespace zeus::daemon
