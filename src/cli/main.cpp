// The `zeus` command line. Exceptions become documented exit codes here, and only here.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "cli/commands.hpp"
#include "common/utf8.hpp"
#include "zeus/common/error.hpp"
#include "zeus/version.hpp"

namespace {

// A descriptor 0-2 that zeus was started without is opened on /dev/null, so that no file zeus
// opens later takes its number (a timeline opened as fd 0 would be a command's standard input).
void occupy_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
      continue;
    }
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
}

int exit_code_for(zeus::ErrorKind kind) {
  switch (kind) {
    case zeus::ErrorKind::kInvalidArgument:
      return zeus::cli::kExitUsage;
    case zeus::ErrorKind::kNoPermission:
      return zeus::cli::kExitNoPermission;
    case zeus::ErrorKind::kNotSupported:
    case zeus::ErrorKind::kLibraryNotFound:
    case zeus::ErrorKind::kFunctionNotFound:
      return zeus::cli::kExitNotSupported;
    default:
      return zeus::cli::kExitError;
  }
}

}  // namespace

int main(int argc, char** argv) {
  occupy_standard_descriptors();
  CLI::App app{"zeus: measure and optimize the GPU energy of deep learning training", "zeus"};
  app.set_version_flag("--version", std::string("zeus ") + ZEUS_VERSION_STRING);
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success, 1 run-time failure, 2 usage error, 3 permission denied, "
      "4 not supported or no device; `zeus monitor -- CMD` exits with CMD's code (127 when it "
      "cannot be started); `zeus profile -- CMD` exits 128+N when signal N stopped it.\nSet "
      "ZEUS_SIMULATED_GPUS=<count>[:<model>[:thermal]] to use simulated GPUs (models: v100, "
      "p100, a40, a100, h100, h200; thermal: with a temperature model, docs/devices.md).");

  zeus::cli::Action action;
  zeus::cli::add_show_env(app, action);
  zeus::cli::add_monitor(app, action);
  zeus::cli::add_power(app, action);
  zeus::cli::add_sim(app, action);
  zeus::cli::add_plo(app, action);
  zeus::cli::add_bso(app, action);
  zeus::cli::add_demo(app, action);
  zeus::cli::add_report(app, action);
  zeus::cli::add_exporter(app, action);
  zeus::cli::add_profile(app, action);
  zeus::cli::add_sensor_probe(app, action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? zeus::cli::kExitOk : zeus::cli::kExitUsage;
  }
  try {
    return action ? action() : zeus::cli::kExitUsage;
  } catch (const zeus::Error& error) {
    // Messages quote file contents and arguments: printed so that they cannot drive the terminal.
    std::cerr << "zeus: error: " << zeus::to_printable(error.what()) << "\n";
    return exit_code_for(error.kind());
  } catch (const std::exception& error) {
    std::cerr << "zeus: internal error: " << zeus::to_printable(error.what()) << "\n";
    return zeus::cli::kExitError;
  }
}
