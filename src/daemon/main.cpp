// zeusd: the privileged daemon (`zeusd serve`). Exceptions become exit codes here, and only here.
#include <fmt/format.h>
#include <grp.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "daemon/auth.hpp"
#include "daemon/daemon.hpp"
#include "daemon/ledger.hpp"
#include "device/privileges.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/version.hpp"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoPermission = 3;

int exit_code_for(zeus::ErrorKind kind) {
  switch (kind) {
    case zeus::ErrorKind::kInvalidArgument:
      return kExitUsage;
    case zeus::ErrorKind::kNoPermission:
      return kExitNoPermission;
    default:
      return kExitError;
  }
}

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
    throw zeus::Error(
        zeus::ErrorKind::kInvalidArgument,
        "--socket-permissions must be octal permission bits such as 660, got '" + text + "'");
  }
  return static_cast<mode_t>(value);
}

namespace auth = zeus::daemon::auth;

struct ServeExtras {
  std::string signing_key_path;
  bool no_restore = false;
};

// The JWT middleware (auth.hpp) behind the daemon's authorize hook.
zeus::daemon::AuthorizeHook make_authorize(const zeus::daemon::DaemonConfig& config,
                                           const std::string& signing_key_path) {
  auto auth_config = std::make_shared<auth::AuthConfig>();
  auth_config->enabled_groups = config.enabled_groups;
  auth_config->signing_key = auth::load_signing_key(signing_key_path);
  return [auth_config](const std::string& path, const std::string& header) {
    const auth::AuthResult decision = auth::authorize(
        *auth_config, path, header.empty() ? std::nullopt : std::optional<std::string>(header),
        static_cast<std::int64_t>(zeus::system_clock()->now_s()));
    zeus::daemon::AuthResult result;
    result.allowed = decision.allowed;
    result.status = decision.allowed ? 200 : decision.status;
    result.error_message = decision.error_message;
    result.www_authenticate = decision.status == 401;
    if (decision.claims) {
      result.subject = decision.claims->sub;
      for (const auth::ApiGroup scope : decision.claims->scopes) {
        result.scopes.emplace_back(auth::api_group_name(scope));
      }
      result.expires_unix_s = decision.claims->exp_s;
    }
    return result;
  };
}

// Where the ledger's hooks find it. The ledger restores through the daemon's GPU workers, so it
// is made after the daemon (and the hooks given to it): the slot is filled before serving, and
// no write can arrive earlier.
struct LedgerSlot {
  zeus::daemon::SettingsLedger* ledger = nullptr;
};

// Records every change with its owner before the write, and forgets settings a client reset.
void attach_ledger(zeus::daemon::DaemonHooks& hooks, const LedgerSlot& slot) {
  hooks.before_write = [&slot](const zeus::daemon::WriteEvent& event) {
    if (slot.ledger == nullptr || event.is_reset()) {
      return;
    }
    if (event.peer.pid <= 0) {
      // TCP: no peer process to watch.
      zeus::log().warn(
          "zeusd: {} on GPU {} from a peer without a pid (TCP): it will not be "
          "restored when the client exits",
          zeus::daemon::setting_field(event.setting), event.gpu_index);
      return;
    }
    if (!event.old_value) {
      throw zeus::Error(zeus::ErrorKind::kIo,
                        fmt::format("cannot read the current {} of GPU {}, so it could not be "
                                    "restored; refusing the change",
                                    zeus::daemon::setting_field(event.setting), event.gpu_index));
    }
    slot.ledger->record_change(event.gpu_index, event.setting, *event.old_value, event.peer.pid);
  };
  hooks.on_write = [&slot](const zeus::daemon::WriteEvent& event) {
    if (slot.ledger == nullptr || !event.is_reset()) {
      return;
    }
    slot.ledger->record_reset(event.gpu_index, event.setting, event.peer.pid);
  };
}

// A gid ("1001") or a group name ("zeusd").
gid_t parse_group(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(text));
  }
  const struct group* found = ::getgrnam(text.c_str());
  if (found == nullptr) {
    throw zeus::Error(zeus::ErrorKind::kInvalidArgument,
                      "--socket-gid: no group named '" + text +
                          "' (create it with `groupadd --system " + text + "`, or give a gid)");
  }
  return found->gr_gid;
}

int serve(zeus::daemon::DaemonConfig config, const ServeExtras& extras) {
  // Block the termination signals in every thread; a waiter thread turns them into stop().
  zeus::block_stop_signals();

  // The daemon numbers GPUs by vendor index over all GPUs (clients send NVML indices), so the
  // *_VISIBLE_DEVICES masks of its own environment do not apply.
  zeus::device::DiscoveryOptions options;
  options.env = [base =
                     zeus::process_env()](const std::string& name) -> std::optional<std::string> {
    if (name == "CUDA_VISIBLE_DEVICES" || name == "HIP_VISIBLE_DEVICES") {
      return std::nullopt;
    }
    return base(name);
  };
  const zeus::device::GpuDiscovery discovery = zeus::device::discover_gpus(options);
  zeus::daemon::check_startup_privileges(config, discovery.backend, zeus::device::has_sys_admin());
  std::vector<std::shared_ptr<zeus::device::Cpu>> cpus;
  if (std::find(config.enabled_groups.begin(), config.enabled_groups.end(),
                zeus::daemon::ApiGroup::kCpuRead) != config.enabled_groups.end()) {
    // Never through another daemon: only this machine's RAPL (ZEUS_POWERCAP_ROOT for tests).
    const char* root = std::getenv("ZEUS_POWERCAP_ROOT");
    const zeus::device::CpuDiscovery cpu_discovery = zeus::device::discover_rapl_cpus(
        root != nullptr && *root != '\0' ? std::filesystem::path(root)
                                         : zeus::device::default_powercap_root());
    if (!cpu_discovery.available) {
      zeus::log().warn("zeusd: cpu-read enabled but no RAPL CPU is usable: {}",
                       cpu_discovery.message);
    }
    cpus = cpu_discovery.cpus;
  }
  if (discovery.gpus.empty()) {
    zeus::log().warn("zeusd: no GPU found: {}", discovery.message);
  }

  zeus::daemon::DaemonHooks hooks;
  if (!extras.signing_key_path.empty()) {
    hooks.authorize = make_authorize(config, extras.signing_key_path);
    config.auth_required = true;
  }
  LedgerSlot ledger_slot;
  if (!extras.no_restore) {
    attach_ledger(hooks, ledger_slot);
  }
  std::vector<std::shared_ptr<zeus::device::Gpu>> gpu_list;
  for (std::size_t i = 0; i < discovery.gpus.size(); ++i) {
    gpu_list.push_back(discovery.gpus.shared(static_cast<int>(i)));
  }
  zeus::daemon::Daemon daemon(config, discovery.gpus, cpus, std::move(hooks));
  zeus::daemon::LedgerOptions ledger_options;
  ledger_options.enabled = !extras.no_restore;
  ledger_options.gpu_serializer = [&daemon](int gpu, const std::function<void()>& action) {
    daemon.run_serialized(gpu, action);
  };
  zeus::daemon::SettingsLedger ledger(gpu_list, ledger_options);
  if (ledger.enabled()) {
    ledger_slot.ledger = &ledger;
  }
  daemon.bind();
  // serve() can also return without a signal (listen failure): the waiter is released then.
  zeus::serve_until_signal(
      [&daemon] { daemon.serve(); }, [&daemon] { daemon.stop(); },
      zeus::ServeUntilSignalOptions{
          .on_signal = [](int signal) { zeus::log().info("zeusd: signal {}, stopping", signal); },
          .repeat_stop_every_s = std::nullopt});
  if (ledger.enabled()) {
    const std::size_t restored = ledger.restore_all();
    zeus::log().info("zeusd: restored {} changed setting(s) on shutdown", restored);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "token" && std::string(argv[2]) == "issue") {
    // `zeusd token issue --signing-key-path F --sub NAME --scopes ...`
    return auth::run_token_issue(argc - 2, argv + 2);
  }
  CLI::App app{"zeusd: the Zeus privileged daemon (GPU control and RAPL reads)", "zeusd"};
  app.set_version_flag("--version", std::string("zeusd ") + ZEUS_VERSION_STRING);
  app.require_subcommand(1);

  zeus::daemon::DaemonConfig config;
  std::string mode = "uds";
  std::string socket_path = config.socket_path.string();
  std::string permissions = "660";
  std::optional<uid_t> socket_uid;
  std::string socket_gid_text;
  std::string enable = "gpu-control,gpu-read,cpu-read";

  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve the zeusd HTTP API");
  serve_cmd->add_option("--mode", mode, "Transport: uds (Unix socket) or tcp")
      ->check(CLI::IsMember({"uds", "tcp"}))
      ->capture_default_str();
  serve_cmd->add_option("--socket-path", socket_path, "Unix socket path")->capture_default_str();
  serve_cmd
      ->add_option("--socket-permissions", permissions,
                   "Octal mode of the socket (the reference's default is 666; ours is 660)")
      ->capture_default_str();
  serve_cmd->add_option("--socket-uid", socket_uid, "Owner uid of the socket");
  serve_cmd->add_option("--socket-gid", socket_gid_text,
                        "Group of the socket, a gid or a group name (its members may use the "
                        "daemon with mode 660)");
  serve_cmd->add_option("--tcp-bind-address", config.tcp_bind_address, "host:port in tcp mode")
      ->capture_default_str();
  serve_cmd
      ->add_option("--enable", enable,
                   "Comma-separated API groups: gpu-control, gpu-read, cpu-read")
      ->capture_default_str();
  ServeExtras extras;
  serve_cmd->add_option("--signing-key-path", extras.signing_key_path,
                        "HS256 key file (mode 600, at least 32 bytes): require JWT bearer tokens "
                        "(issue them with `zeusd token issue`)");
  serve_cmd->add_flag("--no-restore", extras.no_restore,
                      "Keep settings after the client that changed them exits (the reference's "
                      "behaviour); by default they are restored, and all of them on SIGTERM");
  serve_cmd->add_flag("--read-only", config.read_only,
                      "Serve no control route at all (gpu-control is neither served nor "
                      "advertised)");
  serve_cmd
      ->add_option("--gpu-power-poll-hz", config.gpu_power_poll_hz, "GPU power stream poll rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve_cmd
      ->add_option("--cpu-power-poll-hz", config.cpu_power_poll_hz,
                   "CPU power poll rate (and the /cpu/get_power sampling gap)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (std::getenv("ZEUS_LOG_LEVEL") == nullptr) {
    zeus::log().set_level(spdlog::level::info);
  }
  try {
    config.mode =
        mode == "tcp" ? zeus::daemon::TransportMode::kTcp : zeus::daemon::TransportMode::kUds;
    config.socket_path = socket_path;
    config.socket_permissions = parse_permissions(permissions);
    config.socket_uid = socket_uid;
    if (!socket_gid_text.empty()) {
      config.socket_gid = parse_group(socket_gid_text);
    }
    config.enabled_groups = zeus::daemon::parse_api_group_list(enable);
    return serve(config, extras);
  } catch (const zeus::Error& e) {
    std::cerr << "zeusd: " << e.what() << "\n";
    return exit_code_for(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "zeusd: " << e.what() << "\n";
    return kExitError;
  }
}
