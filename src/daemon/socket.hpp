// zeusd's socket and permission rules: what may be removed before binding, the socket's mode and
// owner, the TCP address form, and which starts need root.
#pragma once

#include <filesystem>
#include <optional>

#include "daemon/config.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::http {
class Host;
}

namespace zeus::daemon {

// The rule for an existing socket path before binding: nothing there -> create the parent
// directories; a socket nobody listens on (connect() gives ECONNREFUSED) -> removed; a live
// socket or a non-socket file -> Error(kInvalidArgument) saying so. Nothing else is removed.
void prepare_socket_path(const std::filesystem::path& socket_path);

// Refuses (Error(kNoPermission), with the fix) a start that needs root without it: gpu-control
// enabled (and not read-only) on real GPUs (`gpu_backend` not simulated) when `has_root` is
// false. Simulated GPUs and read-only starts need nothing, and neither do GPU writes done by
// --gpu-command-overrides commands (`config.gpu_commands_overridden`: the commands hold the
// privilege, e.g. through sudo rules; operations they do not cover then fail with the library's
// permission error).
void check_startup_privileges(const DaemonConfig& config,
                              std::optional<device::GpuBackend> gpu_backend, bool has_root);

// Binds `host` to config.socket_path: prepare_socket_path, bind under umask 0177 (never
// world-accessible, not even between bind and chmod), then chmod/chown as configured. Once the
// socket file exists (even when chmod/chown then fail) `created` is set, so that the caller
// removes it. Throws Error with the reason.
void bind_unix_socket(http::Host& host, const DaemonConfig& config, bool& created);

// Binds `host` to config.tcp_bind_address ("host:port", "[v6]:port"; port 0 picks a free one)
// and returns the port. Warns when `authenticated` is false. Throws Error with the reason.
int bind_tcp_socket(http::Host& host, const DaemonConfig& config, bool authenticated);

}  // namespace zeus::daemon
