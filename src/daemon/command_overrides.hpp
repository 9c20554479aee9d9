// `zeusd serve --gpu-command-overrides FILE`: GPU control operations done by external commands
// instead of the vendor library (the reference zeusd's way to delegate control, e.g. through
// sudo rules, so that the daemon itself needs no root for gpu-control).
//
// The file is TOML, one table per operation:
//
//   [set_power_limit]
//   commands = ["sudo /usr/bin/nvidia-smi -i {gpu_id} -pl {power_limit_w}"]
//   timeout_s = 30            # optional, default 60, > 0
//   error_pattern = "ERROR"   # optional regex over the output; a match fails even on exit 0
//
// Each command is a string split on blanks (no shell, no quoting; a TOML array of strings gives
// the argv exactly), with {placeholders} substituted inside each argument, so a value never
// becomes a new argument. The commands of an operation run in order; the first failure stops them.
// Trust rules: a regular file owned by root or the daemon's user, writable by neither group nor
// others. Every problem is an Error naming the file (and line) at load time.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/gpu.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

enum class GpuOperation {
  kSetPersistenceMode,
  kSetPowerLimit,
  kSetGpuLockedClocks,
  kResetGpuLockedClocks,
  kSetMemLockedClocks,
  kResetMemLockedClocks,
  kResetLockedClocks,
};

// The table name: "set_power_limit", ...
std::string_view operation_name(GpuOperation operation);

// One operation's override.
struct OperationOverride {
  std::vector<std::vector<std::string>> commands;  // argv templates
  double timeout_s = 60.0;                         // per command
  std::optional<std::string> error_pattern;
  std::optional<std::regex> error_regex;
};

// The values a command's placeholders take: {gpu_id} always, the operation's own ones
// ({enabled} as 1/0, {power_limit_mw}, {power_limit_w}, {min_clock_mhz}, {max_clock_mhz}).
using PlaceholderValues = std::map<std::string, std::string>;

class CommandOverrides {
 public:
  // Reads `path` after the trust checks (Error kNoPermission naming the fix) and parses it.
  static std::shared_ptr<const CommandOverrides> load(const std::filesystem::path& path);
  // Parses TOML text; `source` names it in messages. Throws Error(kInvalidArgument) with
  // "source:line:column" for bad TOML, an unknown operation or key, an empty `commands`, a
  // timeout <= 0, a bad regex, or a placeholder the operation does not have.
  static std::shared_ptr<const CommandOverrides> parse(std::string_view toml_text,
                                                       const std::string& source);

  bool empty() const { return operations_.empty(); }
  bool covers(GpuOperation operation) const { return operations_.count(operation) != 0; }
  // "set_power_limit, reset_locked_clocks" (for the startup log).
  std::string covered_names() const;
  const std::string& source() const { return source_; }

  // Runs `operation`'s commands for GPU `values["gpu_id"]`, each with its timeout (then killed
  // with its process group), output captured and logged. Throws Error(kUnknown -> 500) naming
  // the command and giving the end of its output when one fails to start, exits non-zero, is
  // killed, times out or prints error_pattern.
  void run(GpuOperation operation, const PlaceholderValues& values) const;

 private:
  std::string source_;
  std::map<GpuOperation, OperationOverride> operations_;
};

// `gpu` (the daemon's GPU `gpu_id`) with the covered setters done by `overrides`; reads and the
// other setters go to `gpu`. The restore ledger writes through the same object, so restoring a
// setting uses the override too.
std::shared_ptr<device::Gpu> with_command_overrides(
    std::shared_ptr<device::Gpu> gpu, int gpu_id,
    std::shared_ptr<const CommandOverrides> overrides);

// All of `gpus` wrapped (positions kept).
device::Gpus with_command_overrides(const device::Gpus& gpus,
                                    const std::shared_ptr<const CommandOverrides>& overrides);

}  // namespace zeus::daemon
