// zeusd: the privileged daemon (`zeusd serve`). Exceptions become exit codes here, and only here.
#include <fmt/format.h>
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
#include "daemon/cli.hpp"
#include "daemon/command_overrides.hpp"
#include "daemon/daemon.hpp"
#include "daemon/key_file.hpp"
#include "daemon/ledger.hpp"
#include "daemon/token_command.hpp"
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

namespace auth = zeus::daemon::auth;

// The JWT middleware (auth.hpp) behind the daemon's authorize hook.
zeus::daemon::AuthorizeHook make_authorize(const zeus::daemon::DaemonConfig& config,
                                           const std::string& signing_key_path,
                                           bool reference_key_rules) {
  auto auth_config = std::make_shared<auth::AuthConfig>();
  auth_config->enabled_groups = config.enabled_groups;
  auth_config->signing_key = auth::load_signing_key(signing_key_path, reference_key_rules);
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

// Where discovery looks for an explicit --gpu-backend: only that vendor's library, never
// simulated GPUs, and no GPU is an error then (the reference fails fast the same way).
void select_backend(zeus::daemon::GpuBackendChoice choice,
                    zeus::device::DiscoveryOptions& options) {
  if (choice == zeus::daemon::GpuBackendChoice::kAuto) {
    return;
  }
  options.env = [base = options.env](const std::string& name) -> std::optional<std::string> {
    if (name == "ZEUS_SIMULATED_GPUS") {
      return std::nullopt;
    }
    return base(name);
  };
  // The other vendor's library is pointed at a path that cannot exist, so discovery's NVML-then-
  // AMD-SMI order cannot pick it.
  const std::string nowhere = "/nonexistent/zeusd --gpu-backend excludes this library";
  if (choice == zeus::daemon::GpuBackendChoice::kNvml) {
    options.amdsmi_library_path = nowhere;
  } else {
    options.nvml_library_path = nowhere;
  }
}

void check_backend(zeus::daemon::GpuBackendChoice choice,
                   const zeus::device::GpuDiscovery& discovery) {
  if (choice == zeus::daemon::GpuBackendChoice::kAuto) {
    return;
  }
  const zeus::device::GpuBackend wanted = choice == zeus::daemon::GpuBackendChoice::kNvml
                                              ? zeus::device::GpuBackend::kNvml
                                              : zeus::device::GpuBackend::kAmdSmi;
  if (discovery.backend == wanted && !discovery.gpus.empty()) {
    return;
  }
  std::string why;
  for (const zeus::device::BackendProbe& probe : discovery.probes) {
    if (probe.backend == zeus::device::gpu_backend_name(wanted)) {
      why = probe.message.empty() ? fmt::format("{} GPU(s)", probe.device_count) : probe.message;
    }
  }
  throw zeus::Error(
      zeus::ErrorKind::kUnavailable,
      fmt::format("--gpu-backend {}: no GPU from that backend ({}); use "
                  "--gpu-backend auto to take whichever backend has GPUs",
                  zeus::device::gpu_backend_name(wanted), why.empty() ? "it was not tried" : why));
}

int serve(const zeus::daemon::ServeArgs& args) {
  zeus::daemon::DaemonConfig config = args.config;
  for (const std::string& line : zeus::daemon::reference_differences(args)) {
    zeus::log().info("zeusd: unlike the reference zeusd, {}", line);
  }
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
  select_backend(args.gpu_backend, options);
  const zeus::device::GpuDiscovery discovery = zeus::device::discover_gpus(options);
  check_backend(args.gpu_backend, discovery);
  // The daemon's writes and the ledger's restores both go through these GPUs.
  zeus::device::Gpus daemon_gpus = discovery.gpus;
  if (!args.gpu_command_overrides_path.empty()) {
    if (config.read_only || !config.enabled(zeus::daemon::ApiGroup::kGpuControl)) {
      zeus::log().warn("zeusd: --gpu-command-overrides {} ignored: gpu-control is not served",
                       args.gpu_command_overrides_path);
    } else {
      const auto overrides = zeus::daemon::CommandOverrides::load(args.gpu_command_overrides_path);
      if (!overrides->empty()) {
        daemon_gpus = zeus::daemon::with_command_overrides(discovery.gpus, overrides);
        config.gpu_commands_overridden = true;
        zeus::log().info("zeusd: GPU control through the commands of {}: {}",
                         args.gpu_command_overrides_path, overrides->covered_names());
      }
    }
  }
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
  if (!args.signing_key_path.empty()) {
    hooks.authorize = make_authorize(config, args.signing_key_path, args.allow_weak_signing_key);
    config.auth_required = true;
  }
  LedgerSlot ledger_slot;
  if (!args.no_restore) {
    attach_ledger(hooks, ledger_slot);
  }
  std::vector<std::shared_ptr<zeus::device::Gpu>> gpu_list;
  for (std::size_t i = 0; i < daemon_gpus.size(); ++i) {
    gpu_list.push_back(daemon_gpus.shared(static_cast<int>(i)));
  }
  zeus::daemon::Daemon daemon(config, daemon_gpus, cpus, std::move(hooks));
  zeus::daemon::LedgerOptions ledger_options;
  ledger_options.enabled = !args.no_restore;
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
    // `zeusd token issue --signing-key-path F --user NAME --scope ... --expires 7d`
    return auth::run_token_issue(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::string(argv[1]) == "serve") {
    zeus::daemon::ServeArgs args;
    try {
      if (const std::optional<int> exit_now =
              zeus::daemon::parse_serve_args(argc - 1, argv + 1, args, std::cout, std::cerr)) {
        return *exit_now;
      }
      if (std::getenv("ZEUS_LOG_LEVEL") == nullptr) {
        zeus::set_log_level(spdlog::level::info);
      }
      return serve(args);
    } catch (const zeus::Error& e) {
      std::cerr << "zeusd: " << e.what() << "\n";
      return exit_code_for(e.kind());
    } catch (const std::exception& e) {
      std::cerr << "zeusd: " << e.what() << "\n";
      return kExitError;
    }
  }
  CLI::App app{"zeusd: the Zeus privileged daemon (GPU control and RAPL reads)", "zeusd"};
  app.set_version_flag("--version", std::string("zeusd ") + ZEUS_VERSION_STRING);
  app.require_subcommand(1);
  app.add_subcommand("serve", "Serve the zeusd HTTP API (`zeusd serve --help` lists its flags)");
  app.add_subcommand("token", "`zeusd token issue`: issue a JWT for --signing-key-path");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // `zeusd token` without `issue`.
  std::cerr << "zeusd: usage: zeusd token issue --signing-key-path F --user U --scope LIST "
               "--expires 7d|never\n";
  return kExitUsage;
}
