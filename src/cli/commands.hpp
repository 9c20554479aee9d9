// The `zeus` command's subcommands: each file registers one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

namespace zeus::optimizer {
class OptimumSelector;
}

namespace zeus::cli {

// Documented exit codes (docs/cli.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,         // a device, library or I/O failure at run time
  kExitUsage = 2,         // bad flags, arguments or environment variables
  kExitNoPermission = 3,  // the operation needs a right this process lacks
  kExitNotSupported = 4,  // the hardware or driver cannot do it, or no device is available
  // `zeus monitor -- CMD` exits with CMD's exit code (128+N when signal N killed it), except:
  kExitCommandNotStarted = 127,  // CMD could not be started (not found, not executable)
};

// A subcommand's action, run after parsing; returns an exit code. Exceptions are translated
// into exit codes by main.
using Action = std::function<int()>;

void add_show_env(CLI::App& app, Action& action);
void add_monitor(CLI::App& app, Action& action);
void add_power(CLI::App& app, Action& action);
void add_sim(CLI::App& app, Action& action);
void add_plo(CLI::App& app, Action& action);
void add_bso(CLI::App& app, Action& action);
void add_demo(CLI::App& app, Action& action);
void add_report(CLI::App& app, Action& action);
void add_exporter(CLI::App& app, Action& action);
void add_profile(CLI::App& app, Action& action);
void add_sensor_probe(CLI::App& app, Action& action);

// A --selector value of `zeus plo show` and `zeus report`: zeus-cost[:ETA], energy, time or
// max-slowdown[:FACTOR] (plo_command.cpp). Throws kInvalidArgument naming the syntax.
std::shared_ptr<const optimizer::OptimumSelector> parse_selector(const std::string& text,
                                                                 int world_size);

// --port-file of the serving commands: writes `port` and a newline to `path` atomically (a
// temporary file, then rename), so that a reader never sees a partial file (bso_command.cpp).
// Throws kInvalidArgument naming the file when it cannot be written.
void write_port_file(const std::string& path, int port);

}  // namespace zeus::cli
