// zeusd's configuration and the types its hooks see: what the daemon serves, who is on the other
// end of a request, and the typed record of every GPU write (the ledger's Setting/SettingValue).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/auth.hpp"
#include "daemon/ledger.hpp"

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
  // Requests handled at once (--num-workers); idle, slow and streaming connections hold none.
  // Ours block while a request runs (actix's do not), so the default is not the CPU count.
  int worker_threads = 16;
  double gpu_power_poll_hz = 20.0;
  double cpu_power_poll_hz = 10.0;  // also the sampling gap of /cpu/get_power
  // GPU writes are done by --gpu-command-overrides commands, so gpu-control needs no root.
  bool gpu_commands_overridden = false;
  // Reported as `auth_required` in /discover; set it when `authorize` enforces tokens.
  bool auth_required = false;

  bool enabled(ApiGroup group) const;
};

// The process at the other end of a Unix-socket connection (SO_PEERCRED). `known` is false on
// TCP and when the kernel did not say.
struct PeerCredentials {
  bool known = false;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// One GPU setting changed through the daemon. A request that changes two settings at once
// (/gpu/reset_locked_clocks) gives one event per setting.
struct WriteEvent {
  int gpu_index = 0;
  Setting setting = Setting::kPowerLimit;
  // The value in force before the write, which is what restoring it writes back. The device
  // layer cannot read locked clocks back, so theirs is always "not locked" (restoring means a
  // reset). nullopt: the current value could not be read.
  std::optional<SettingValue> old_value;
  // The value written; nullopt for an explicit reset to the driver default.
  std::optional<SettingValue> new_value;
  PeerCredentials peer;

  bool is_reset() const { return !new_value.has_value(); }
};

// The query field the wire protocol names a setting by: "power_limit_mw", "persistence_mode",
// "gpu_locked_clocks_mhz", "mem_locked_clocks_mhz" (also what the logs say).
std::string_view setting_field(Setting setting);
// A value as the logs show it: "300000", "true", "1000-1500"; "unknown" for clocks not known to
// be locked (the device layer cannot read them back).
std::string value_text(Setting setting, const SettingValue& value);

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

// What the daemon calls out to, fixed at construction (auth, and the restore ledger in zeusd).
struct DaemonHooks {
  AuthorizeHook authorize = nullptr;  // null: auth off (/auth/* answers 404)
  // Called on the GPU's worker thread just before each write, with the value in force now (the
  // restore ledger records the original here). Throwing refuses the write: the client gets the
  // error like a device failure (zeus::Error kinds map to 400/403/500) and nothing is changed.
  WriteHook before_write = nullptr;
  WriteHook on_write = nullptr;  // called on the GPU's worker thread after each successful write
};

}  // namespace zeus::daemon
