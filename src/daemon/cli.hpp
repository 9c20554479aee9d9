// `zeusd serve`'s command line: the reference zeusd 0.5's flags (so its unit file and
// /etc/default/zeusd start ours unchanged) plus ours (--read-only, --no-restore), parsed into a
// DaemonConfig and the options that main.cpp acts on.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "daemon/config.hpp"

namespace zeus::daemon {

// --gpu-backend: auto takes the first backend that reports GPUs (simulated GPUs when
// ZEUS_SIMULATED_GPUS is set, else NVML, then AMD SMI); an explicit one fails fast when it has
// no GPU.
enum class GpuBackendChoice { kAuto, kNvml, kAmdSmi };

struct ServeArgs {
  DaemonConfig config;
  std::string signing_key_path;
  bool allow_weak_signing_key = false;  // the reference's key rules, with warnings
  bool no_restore = false;
  GpuBackendChoice gpu_backend = GpuBackendChoice::kAuto;
  std::string gpu_command_overrides_path;  // empty: none
  // The flags as given, for the startup message about our defaults.
  bool socket_permissions_given = false;
};

// Parses `serve [flags]` (argv[0] is "serve"). Returns an exit code when the process should end
// now (--help: 0, a usage error: 2, with CLI11's text on `out`/`err`), else nullopt with `args`
// filled. Throws Error(kInvalidArgument) for values CLI11 accepts but we cannot use (a bad octal
// mode, an unknown group).
std::optional<int> parse_serve_args(int argc, const char* const* argv, ServeArgs& args,
                                    std::ostream& out, std::ostream& err);

// The lines that say where our defaults differ from the reference's, and which flag gives the
// reference's behaviour (logged at startup). Empty when every one is already the reference's.
std::vector<std::string> reference_differences(const ServeArgs& args);

}  // namespace zeus::daemon
