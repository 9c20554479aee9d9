// `zeusd serve`'s flags (docs/zeusd.md, the flag table): the reference's, with its spellings and
// defaults except where ours are safer (socket mode 0660, restore on exit), plus ours.
#include "daemon/cli.hpp"

#include <fmt/format.h>
#include <grp.h>
#include <CLI/CLI.hpp>

#include "zeus/common/error.hpp"

namespace zeus::daemon {
namespace {

// Octal text ("660", "0660") -> mode bits.
mode_t parse_permissions(const std::string& text) {
  std::size_t end = 0;
  unsigned long value = 0;
  try {
    value = std::stoul(text, &end, 8);
  } catch (const std::exception&) {
    end = 0;
  }
  if (text.empty() || end != text.size() || value > 0777) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "--socket-permissions must be octal permission bits such as 660, got '" + text + "'");
  }
  return static_cast<mode_t>(value);
}

// A gid ("1001") or a group name ("zeusd").
gid_t parse_group(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(text));
  }
  const struct group* found = ::getgrnam(text.c_str());
  if (found == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "--socket-gid: no group named '" + text +
                                                 "' (create it with `groupadd --system " + text +
                                                 "`, or give a gid)");
  }
  return found->gr_gid;
}

}  // namespace

std::optional<int> parse_serve_args(int argc, const char* const* argv, ServeArgs& args,
                                    std::ostream& out, std::ostream& err) {
  CLI::App app{
      "Serve the zeusd HTTP API (the reference zeusd's flags, plus --read-only and "
      "--no-restore)",
      "zeusd serve"};
  DaemonConfig& config = args.config;
  std::string mode = "uds";
  std::string socket_path = config.socket_path.string();
  std::string permissions = "660";
  std::optional<uid_t> socket_uid;
  std::string socket_gid_text;
  std::string enable = "gpu-control,gpu-read,cpu-read";
  std::string backend = "auto";

  app.add_option("--mode", mode, "Transport: uds (Unix socket) or tcp")
      ->check(CLI::IsMember({"uds", "tcp"}))
      ->capture_default_str();
  app.add_option("--socket-path", socket_path, "Unix socket path")->capture_default_str();
  CLI::Option* permissions_option =
      app.add_option("--socket-permissions", permissions,
                     "Octal mode of the socket (the reference's default is 666; ours is 660)")
          ->capture_default_str();
  app.add_option("--socket-uid", socket_uid, "Owner uid of the socket");
  app.add_option("--socket-gid", socket_gid_text,
                 "Group of the socket, a gid or a group name (its members may use the daemon "
                 "with mode 660)");
  app.add_option("--tcp-bind-address", config.tcp_bind_address, "host:port in tcp mode")
      ->capture_default_str();
  app.add_option("--num-workers", config.worker_threads,
                 "Requests handled at once (idle and streaming connections hold none)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--gpu-backend", backend,
                 "auto (the first that reports GPUs: simulated, NVML, AMD SMI), nvml or amdsmi "
                 "(fails at start when that backend has no GPU)")
      ->check(CLI::IsMember({"auto", "nvml", "amdsmi"}))
      ->capture_default_str();
  app.add_option("--enable", enable, "Comma-separated API groups: gpu-control, gpu-read, cpu-read")
      ->capture_default_str();
  app.add_option("--gpu-command-overrides", args.gpu_command_overrides_path,
                 "TOML file mapping GPU control operations to commands run instead of the "
                 "library call (docs/zeusd.md, \"Command overrides\")");
  app.add_option("--signing-key-path", args.signing_key_path,
                 "HS256 key file (mode 600, at least 32 bytes): require JWT bearer tokens (issue "
                 "them with `zeusd token issue`)");
  app.add_flag("--allow-weak-signing-key", args.allow_weak_signing_key,
               "Take --signing-key-path as the reference does (any non-empty file, any mode "
               "and owner), logging what is weak about it");
  app.add_flag("--no-restore", args.no_restore,
               "Keep settings after the client that changed them exits (the reference's "
               "behaviour); by default they are restored, and all of them on SIGTERM");
  app.add_flag("--read-only", config.read_only,
               "Serve no control route at all (gpu-control is neither served nor advertised)");
  app.add_option("--gpu-power-poll-hz", config.gpu_power_poll_hz, "GPU power stream poll rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--cpu-power-poll-hz", config.cpu_power_poll_hz,
                 "CPU power poll rate (and the /cpu/get_power sampling gap)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the help or the problem; a bad flag exits 2, as docs/zeusd.md says.
    return app.exit(e, out, err) == 0 ? 0 : 2;
  }

  config.mode = mode == "tcp" ? TransportMode::kTcp : TransportMode::kUds;
  config.socket_path = socket_path;
  config.socket_permissions = parse_permissions(permissions);
  args.socket_permissions_given = permissions_option->count() > 0;
  config.socket_uid = socket_uid;
  if (!socket_gid_text.empty()) {
    config.socket_gid = parse_group(socket_gid_text);
  }
  config.enabled_groups = parse_api_group_list(enable);
  args.gpu_backend = backend == "nvml"     ? GpuBackendChoice::kNvml
                     : backend == "amdsmi" ? GpuBackendChoice::kAmdSmi
                                           : GpuBackendChoice::kAuto;
  return std::nullopt;
}

std::vector<std::string> reference_differences(const ServeArgs& args) {
  std::vector<std::string> lines;
  const DaemonConfig& config = args.config;
  if (config.mode == TransportMode::kUds && !args.socket_permissions_given) {
    lines.push_back(fmt::format(
        "the socket is mode {:o} (its group may connect), where the reference's default is 666 "
        "(every local user); `--socket-permissions 666` gives the reference's mode",
        config.socket_permissions));
  }
  if (!args.signing_key_path.empty() && !args.allow_weak_signing_key) {
    lines.emplace_back(
        "the signing key must be mode 600, owned by root or this user, and at least 32 bytes, "
        "where the reference takes any non-empty file; `--allow-weak-signing-key` gives the "
        "reference's rules (better: `chmod 600` the key, or make a new one with `head -c 32 "
        "/dev/urandom`)");
  }
  if (!args.no_restore) {
    lines.emplace_back(
        "settings a client changed are put back when that client exits (and all of them on "
        "SIGTERM), where the reference keeps them; `--no-restore` gives the reference's "
        "behaviour");
  }
  return lines;
}

}  // namespace zeus::daemon
