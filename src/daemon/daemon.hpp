// zeusd: the privileged daemon. Serves the reference zeusd HTTP API (docs: the zeusd wire
// protocol) on a Unix socket or TCP, over the device layer (real or simulated GPUs, RAPL CPUs).
//
// Secure by default: the Unix socket is created with mode 0660 (never world-accessible, even
// between bind and chmod), the peer's credentials (SO_PEERCRED) are logged with every write, and
// a read-only mode mounts no control route at all. Auth and the restore-on-death ledger plug in
// through the DaemonHooks given at construction.
//
// The parts, one job each: config.hpp (what is served, the hooks' types), socket.hpp (socket and
// permission rules), routes.hpp (the surface: middleware and handlers), gpu_writer.hpp (per-GPU
// write serialisation), power_stream.hpp (SSE streams and power from energy), query.hpp and
// reply.hpp (the wire's requests and replies). Daemon below only wires them to an http::Host.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "daemon/config.hpp"
#include "daemon/socket.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

class Daemon {
 public:
  // `gpus` are numbered by their position (the NVML index over all GPUs); CPUs by
  // Cpu::index() (the RAPL package number). `clock` times the CPU power samples.
  Daemon(DaemonConfig config, device::Gpus gpus, std::vector<std::shared_ptr<device::Cpu>> cpus,
         DaemonHooks hooks = {}, std::shared_ptr<const Clock> clock = steady_clock());
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs `action` on GPU `gpu_index`'s worker, serialised with the daemon's writes to that GPU,
  // and waits for it (rethrowing what it throws); usable before, during and after serve() (e.g.
  // restoring settings on SIGTERM). Never call it from a hook, which already runs on a worker.
  void run_serialized(int gpu_index, const std::function<void()>& action);

  // Binds the socket (UDS: see bind_unix_socket; TCP: bind_tcp_socket). Throws Error with the
  // reason.
  void bind();
  // The TCP port after bind() (TCP mode).
  int tcp_port() const;
  // Serves until stop(); bind() first. Queued non-blocking writes finish before it returns.
  void serve();
  // Thread-safe; makes serve() return. Removes the socket file it created.
  void stop();
  // True once serve() accepts connections.
  bool is_running() const;

  const DaemonConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::daemon
