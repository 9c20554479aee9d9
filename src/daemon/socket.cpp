#include "daemon/socket.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include "common/log.hpp"
#include "http/host.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {

void prepare_socket_path(const std::filesystem::path& socket_path) {
  struct stat info {};
  if (::lstat(socket_path.c_str(), &info) != 0) {
    if (errno != ENOENT) {
      throw Error(ErrorKind::kIo, fmt::format("cannot inspect socket path {}: {}",
                                              socket_path.string(), std::strerror(errno)));
    }
    std::error_code ec;
    if (socket_path.has_parent_path()) {
      std::filesystem::create_directories(socket_path.parent_path(), ec);
      if (ec) {
        throw Error(ErrorKind::kIo, fmt::format("cannot create the socket's directory {}: {}",
                                                socket_path.parent_path().string(), ec.message()));
      }
    }
    return;
  }
  if (!S_ISSOCK(info.st_mode)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} exists and is not a socket; refusing to remove it (remove it "
                            "yourself or choose another --socket-path)",
                            socket_path.string()));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket_path.string();
  if (path.size() >= sizeof(addr.sun_path)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("socket path {} is too long ({} bytes, at most {})", path, path.size(),
                            sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    throw Error(ErrorKind::kOperatingSystem,
                fmt::format("socket(AF_UNIX) failed: {}", std::strerror(errno)));
  }
  const int rc = ::connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int connect_errno = errno;
  ::close(sock);
  if (rc == 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("another daemon is already listening on {}; refusing to start", path));
  }
  if (connect_errno != ECONNREFUSED) {
    throw Error(ErrorKind::kIo,
                fmt::format("cannot tell whether the socket {} is in use (connect: {}); not "
                            "removing it",
                            path, std::strerror(connect_errno)));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw Error(ErrorKind::kIo,
                fmt::format("cannot remove the stale socket {}: {}", path, std::strerror(errno)));
  }
  log().warn("zeusd: removed stale socket {} (nothing was listening)", path);
}

void check_startup_privileges(const DaemonConfig& config,
                              std::optional<device::GpuBackend> gpu_backend, bool has_root) {
  const bool control = !config.read_only && config.enabled(ApiGroup::kGpuControl);
  if (!control || has_root || config.gpu_commands_overridden || !gpu_backend ||
      *gpu_backend == device::GpuBackend::kSimulated) {
    return;
  }
  throw Error(ErrorKind::kNoPermission,
              fmt::format("the gpu-control API group changes real GPUs ({}) and needs root or "
                          "CAP_SYS_ADMIN, which this process (uid {}) lacks. Run zeusd as root, or "
                          "start it without control: --read-only or --enable gpu-read,cpu-read (or "
                          "let commands do the "
                          "writes: --gpu-command-overrides)",
                          device::gpu_backend_name(*gpu_backend), ::geteuid()));
}

void bind_unix_socket(http::Host& host, const DaemonConfig& config, bool& created) {
  const std::string path = config.socket_path.string();
  prepare_socket_path(config.socket_path);
  // Never world-accessible, not even between bind() and chmod().
  const mode_t old_mask = ::umask(0177);
  try {
    host.bind_unix(path);
  } catch (const http::BindError& e) {
    ::umask(old_mask);
    throw Error(ErrorKind::kIo, e.what());
  }
  ::umask(old_mask);
  created = true;
  if (::chmod(path.c_str(), config.socket_permissions) != 0) {
    throw Error(ErrorKind::kIo, fmt::format("cannot chmod {:o} the socket {}: {}",
                                            config.socket_permissions, path, std::strerror(errno)));
  }
  if (config.socket_uid || config.socket_gid) {
    const uid_t uid = config.socket_uid.value_or(static_cast<uid_t>(-1));
    const gid_t gid = config.socket_gid.value_or(static_cast<gid_t>(-1));
    if (::chown(path.c_str(), uid, gid) != 0) {
      throw Error(ErrorKind::kNoPermission,
                  fmt::format("cannot chown the socket {} to uid {} gid {}: {}", path,
                              config.socket_uid ? std::to_string(uid) : "(unchanged)",
                              config.socket_gid ? std::to_string(gid) : "(unchanged)",
                              std::strerror(errno)));
    }
  }
  log().info("zeusd: listening on {} (mode {:o})", path, config.socket_permissions);
}

int bind_tcp_socket(http::Host& host, const DaemonConfig& config, bool authenticated) {
  const std::string& address = config.tcp_bind_address;
  const std::size_t colon = address.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const auto [end, ec] =
        std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
    if (ec != std::errc() || end != address.data() + address.size() || port < 0 || port > 65535) {
      port = -1;
    }
  }
  if (port < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--tcp-bind-address must be host:port, got '{}'", address));
  }
  std::string name = address.substr(0, colon);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  try {
    port = host.bind_tcp(name, port);
  } catch (const http::BindError& e) {
    throw Error(ErrorKind::kIo, fmt::format("cannot bind TCP {}: {}{}", address, e.what(),
                                            e.error_number() == EADDRINUSE ? " (in use?)" : ""));
  }
  log().info("zeusd: listening on tcp {}:{}", name, port);
  if (!authenticated) {
    log().warn(
        "zeusd: TCP mode without authentication: anyone who can reach {}:{} may use "
        "every enabled API group",
        name, port);
  }
  return port;
}

}  // namespace zeus::daemon
