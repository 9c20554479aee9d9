// zeusd: the privileged daemon. Serves the reference zeusd HTTP API (docs: the zeusd wire
// protocol) on a Unix socket or TCP, over the device layer (real or simulated GPUs, RAPL CPUs).
//
// Secure by default: the Unix socket is created with mode 0660 (never world-accessible, even
// between bind and chmod), the peer's credentials (SO_PEERCRED) are logged with every write, and
// a read-only mode mounts no control route at all. Auth and the restore-on-death ledger plug in
// through the `authorize` and `on_write` hooks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/auth.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

// The API groups of the reference, which are also the JWT scopes (defined with the auth code:
// names, parsing of --enable lists, and which group a path belongs to).
using ApiGroup = auth::ApiGroup;
using auth::api_group_name;
using auth::parse_api_group_list;
using auth::required_group;

enum class TransportMode { kUds, kTcp };

struct DaemonConfig {
  TransportMode mode = TransportMode::kUds;
  std::filesystem::path socket_path = "/run/zeusd/zeusd.sock";
  // Our default is 0660; the reference's 0666 only when asked for.
  mode_t socket_permissions = 0660;
  std::optional<uid_t> socket_uid;
  std::optional<gid_t> socket_gid;
  std::string tcp_bind_address = "127.0.0.1:4938";  // host:port; port 0 picks a free one
  std::vector<ApiGroup> enabled_groups = {ApiGroup::kGpuControl, ApiGroup::kGpuRead,
                                          ApiGroup::kCpuRead};
  // No control route at all (gpu-control is neither served nor advertised).
  bool read_only = false;
  double gpu_power_poll_hz = 20.0;
  double cpu_power_poll_hz = 10.0;  // also the sampling gap of /cpu/get_power
  // Reported as `auth_required` in /discover; set it when `authorize` enforces tokens.
  bool auth_required = false;
};

// The process at the other end of a Unix-socket connection (SO_PEERCRED). `known` is false on
// TCP and when the kernel did not say.
struct PeerCredentials {
  bool known = false;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// One GPU setting changed through the daemon, reported after the device accepted it.
struct WriteEvent {
  int gpu_index = 0;
  // "power_limit_mw", "persistence_mode", "gpu_locked_clocks_mhz", "mem_locked_clocks_mhz".
  std::string setting;
  // Values as text: "300000", "true", "1000-1500"; "reset" for a clock reset. The old value of
  // locked clocks is "unknown" (the device layer cannot read it back; restoring means a reset).
  std::string old_value;
  std::string new_value;
  PeerCredentials peer;
};

// What `authorize` decides for one request (called after the API-group check, for every path
// except /discover and /time).
struct AuthResult {
  bool allowed = true;
  int status = 200;               // 401 or 403 when refused
  std::string error_message;      // the body is {"error": error_message}
  bool www_authenticate = false;  // adds `WWW-Authenticate: Bearer realm="zeusd"`
  // The token's claims, for /auth/whoami.
  std::string subject;
  std::vector<std::string> scopes;
  std::optional<std::int64_t> expires_unix_s;
};

using AuthorizeHook =
    std::function<AuthResult(const std::string& path, const std::string& authorization_header)>;
using WriteHook = std::function<void(const WriteEvent&)>;

// The rule for an existing socket path before binding: nothing there -> create the parent
// directories; a socket nobody listens on (connect() gives ECONNREFUSED) -> removed; a live
// socket or a non-socket file -> Error(kInvalidArgument) saying so. Nothing else is removed.
void prepare_socket_path(const std::filesystem::path& socket_path);

// Refuses (Error(kNoPermission), with the fix) a start that needs root without it: gpu-control
// enabled (and not read-only) on real GPUs (`gpu_backend` not simulated) when `has_root` is
// false. Simulated GPUs and read-only starts need nothing.
void check_startup_privileges(const DaemonConfig& config, std::optional<GpuBackend> gpu_backend,
                              bool has_root);

class Daemon {
 public:
  // `gpus` are numbered by their position (the NVML index over all GPUs); CPUs by
  // Cpu::index() (the RAPL package number).
  Daemon(DaemonConfig config, Gpus gpus, std::vector<std::shared_ptr<Cpu>> cpus);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Hooks; set them before serve().
  AuthorizeHook authorize;  // null: auth off (/auth/* answers 404)
  WriteHook on_write;       // called on the GPU's worker thread after each successful write
  // Called on the GPU's worker thread just before each write, with the value in force now (the
  // restore ledger records the original here). Throwing refuses the write: the client gets the
  // error like a device failure (zeus::Error kinds map to 400/403/500) and nothing is changed.
  WriteHook before_write;

  // Runs `action` on GPU `gpu_index`'s worker, serialised with the daemon's writes to that GPU,
  // and waits for it (rethrowing what it throws); usable before, during and after serve() (e.g.
  // restoring settings on SIGTERM). Never call it from a hook, which already runs on a worker.
  void run_serialized(int gpu_index, const std::function<void()>& action);

  // Binds the socket (UDS: prepare_socket_path, bind under umask 0177, then chmod/chown).
  // Throws Error with the reason.
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
