// --gpu-command-overrides: loading (trust rules, TOML through toml++) and running the commands
// (through the one child-process helper, common/process.hpp). The Gpu wrapper is in
// overridden_gpu.cpp.
#include "daemon/command_overrides.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "common/log.hpp"
#include "common/process.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {
namespace {

namespace fs = std::filesystem;

constexpr std::array<GpuOperation, 7> kOperations = {
    GpuOperation::kSetPersistenceMode, GpuOperation::kSetPowerLimit,
    GpuOperation::kSetGpuLockedClocks, GpuOperation::kResetGpuLockedClocks,
    GpuOperation::kSetMemLockedClocks, GpuOperation::kResetMemLockedClocks,
    GpuOperation::kResetLockedClocks,
};

// The placeholders each operation's commands may use.
std::set<std::string> placeholders_of(GpuOperation operation) {
  switch (operation) {
    case GpuOperation::kSetPersistenceMode:
      return {"gpu_id", "enabled"};
    case GpuOperation::kSetPowerLimit:
      return {"gpu_id", "power_limit_mw", "power_limit_w"};
    case GpuOperation::kSetGpuLockedClocks:
    case GpuOperation::kSetMemLockedClocks:
      return {"gpu_id", "min_clock_mhz", "max_clock_mhz"};
    default:
      return {"gpu_id"};
  }
}

// The output kept in messages and logs: its last `max_bytes`, trimmed.
std::string tail_of(const std::string& output, std::size_t max_bytes = 2000) {
  std::string_view kept = text::trim(output);
  if (kept.size() > max_bytes) {
    kept.remove_prefix(kept.size() - max_bytes);
    return "..." + std::string(kept);
  }
  return std::string(kept);
}

std::string where(const std::string& source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

Error bad_file(const std::string& location, const std::string& message) {
  return Error(ErrorKind::kInvalidArgument,
               fmt::format("--gpu-command-overrides {}: {}", location, message));
}

// Every {name} in `argument`: each must be one of `allowed`.
void check_placeholders(const std::string& argument, const std::set<std::string>& allowed,
                        GpuOperation operation, const std::string& location) {
  std::size_t at = 0;
  while ((at = argument.find('{', at)) != std::string::npos) {
    const std::size_t end = argument.find('}', at);
    if (end == std::string::npos) {
      throw bad_file(location, fmt::format("'{}' has a '{{' without a closing '}}'", argument));
    }
    const std::string name = argument.substr(at + 1, end - at - 1);
    if (allowed.count(name) == 0) {
      throw bad_file(location,
                     fmt::format("unknown placeholder {{{}}} in '{}': {} takes {}", name, argument,
                                 operation_name(operation), fmt::join(allowed, ", ")));
    }
    at = end + 1;
  }
}

std::string substitute(const std::string& argument, const PlaceholderValues& values) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = argument.find('{', at);
    if (open == std::string::npos) {
      out += argument.substr(at);
      return out;
    }
    const std::size_t close = argument.find('}', open);
    out += argument.substr(at, open - at);
    const auto value = values.find(argument.substr(open + 1, close - open - 1));
    out += value != values.end() ? value->second : argument.substr(open, close - open + 1);
    at = close + 1;
  }
}

OperationOverride parse_operation(GpuOperation operation, const toml::table& table,
                                  const std::string& source) {
  OperationOverride parsed;
  const std::set<std::string> allowed = placeholders_of(operation);
  for (const auto& [key, node] : table) {
    const std::string location = where(source, node.source());
    const std::string name(key.str());
    if (name == "commands") {
      const toml::array* commands = node.as_array();
      if (commands == nullptr || commands->empty()) {
        throw bad_file(location, fmt::format("{}.commands must be a non-empty array of commands",
                                             operation_name(operation)));
      }
      for (const toml::node& command : *commands) {
        const std::string command_location = where(source, command.source());
        std::vector<std::string> argv;
        if (const auto text = command.value<std::string>()) {
          argv = text::split_to_strings(*text, ' ', /*drop_empty=*/true);
        } else if (const toml::array* words = command.as_array()) {
          for (const toml::node& word : *words) {
            const auto value = word.value<std::string>();
            if (!value) {
              throw bad_file(where(source, word.source()), "an argv array holds only strings");
            }
            argv.push_back(*value);
          }
        } else {
          throw bad_file(command_location,
                         "a command is a string (split on blanks) or an array of strings");
        }
        if (argv.empty() || argv.front().empty()) {
          throw bad_file(command_location, "a command must name a program");
        }
        for (const std::string& argument : argv) {
          check_placeholders(argument, allowed, operation, command_location);
        }
        parsed.commands.push_back(std::move(argv));
      }
    } else if (name == "timeout_s") {
      const std::optional<double> timeout_s = node.value<double>();
      if (!timeout_s || !(*timeout_s > 0) || *timeout_s > 86400) {
        throw bad_file(location, "timeout_s must be a number of seconds above 0 (at most 86400)");
      }
      parsed.timeout_s = *timeout_s;
    } else if (name == "error_pattern") {
      const auto pattern = node.value<std::string>();
      if (!pattern) {
        throw bad_file(location, "error_pattern must be a string (a regular expression)");
      }
      try {
        parsed.error_regex.emplace(*pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        throw bad_file(location, fmt::format("error_pattern '{}' is not a valid regular "
                                             "expression: {}",
                                             *pattern, e.what()));
      }
      parsed.error_pattern = *pattern;
    } else {
      throw bad_file(location, fmt::format("unknown key '{}' in [{}] (known: commands, "
                                           "timeout_s, error_pattern)",
                                           name, operation_name(operation)));
    }
  }
  if (parsed.commands.empty()) {
    throw bad_file(where(source, table.source()),
                   fmt::format("[{}] has no commands", operation_name(operation)));
  }
  return parsed;
}

// The file's bytes, after the trust checks on the open descriptor (so the checked file is the
// one read).
std::string read_trusted(const fs::path& path) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    throw Error(
        error == ENOENT   ? ErrorKind::kNotFound
        : error == EACCES ? ErrorKind::kNoPermission
                          : ErrorKind::kIo,
        fmt::format("--gpu-command-overrides: cannot open {}: {}", name, std::strerror(error)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--gpu-command-overrides: {} is not a regular file", name));
  }
  if (info.st_uid != 0 && info.st_uid != ::geteuid()) {
    throw Error(ErrorKind::kNoPermission,
                fmt::format("--gpu-command-overrides: {} is owned by uid {}, neither root nor this "
                            "daemon's user (uid {}), so someone else could choose the commands "
                            "zeusd runs; `chown root {}`",
                            name, info.st_uid, ::geteuid(), name));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error(ErrorKind::kNoPermission,
                fmt::format("--gpu-command-overrides: {} has mode {:o}, writable by group or "
                            "others, so they could choose the commands zeusd runs; `chmod go-w {}`",
                            name, info.st_mode & 07777, name));
  }
  std::string contents;
  std::array<char, 4096> buffer{};
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      throw Error(ErrorKind::kIo, fmt::format("--gpu-command-overrides: cannot read {}: {}", name,
                                              std::strerror(errno)));
    }
    if (n == 0) {
      return contents;
    }
    contents.append(buffer.data(), static_cast<std::size_t>(n));
  }
}

// A file for one command's stdout and stderr, removed when this goes out of scope.
class OutputCapture {
 public:
  OutputCapture() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp")) +
        "/zeusd-override-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) {
      throw Error(ErrorKind::kIo, fmt::format("cannot create a file for a command's output ({})",
                                              std::strerror(errno)));
    }
    ::close(fd);
    path_ = pattern;
  }
  ~OutputCapture() { ::unlink(path_.c_str()); }
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;
  const fs::path& path() const { return path_; }
  std::string read() const {
    try {
      return text::read_file(path_);
    } catch (const Error&) {
      return {};
    }
  }

 private:
  fs::path path_;
};

}  // namespace

std::string_view operation_name(GpuOperation operation) {
  switch (operation) {
    case GpuOperation::kSetPersistenceMode:
      return "set_persistence_mode";
    case GpuOperation::kSetPowerLimit:
      return "set_power_limit";
    case GpuOperation::kSetGpuLockedClocks:
      return "set_gpu_locked_clocks";
    case GpuOperation::kResetGpuLockedClocks:
      return "reset_gpu_locked_clocks";
    case GpuOperation::kSetMemLockedClocks:
      return "set_mem_locked_clocks";
    case GpuOperation::kResetMemLockedClocks:
      return "reset_mem_locked_clocks";
    case GpuOperation::kResetLockedClocks:
      return "reset_locked_clocks";
  }
  return "unknown";
}

std::shared_ptr<const CommandOverrides> CommandOverrides::load(const fs::path& path) {
  return parse(read_trusted(path), path.string());
}

std::shared_ptr<const CommandOverrides> CommandOverrides::parse(std::string_view toml_text,
                                                                const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw bad_file(where(source, e.source()), std::string(e.description()));
  }
  auto overrides = std::make_shared<CommandOverrides>();
  overrides->source_ = source;
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    std::optional<GpuOperation> operation;
    for (const GpuOperation candidate : kOperations) {
      if (operation_name(candidate) == name) {
        operation = candidate;
      }
    }
    if (!operation) {
      std::vector<std::string_view> known;
      for (const GpuOperation candidate : kOperations) {
        known.push_back(operation_name(candidate));
      }
      throw bad_file(where(source, node.source()), fmt::format("unknown operation '{}' (known: {})",
                                                               name, fmt::join(known, ", ")));
    }
    const toml::table* table = node.as_table();
    if (table == nullptr) {
      throw bad_file(where(source, node.source()),
                     fmt::format("'{}' must be a table: [{}] with commands = [...]", name, name));
    }
    overrides->operations_.emplace(*operation, parse_operation(*operation, *table, source));
  }
  return overrides;
}

std::string CommandOverrides::covered_names() const {
  std::vector<std::string_view> names;
  for (const auto& [operation, unused] : operations_) {
    names.push_back(operation_name(operation));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

void CommandOverrides::run(GpuOperation operation, const PlaceholderValues& values) const {
  const OperationOverride& override_ = operations_.at(operation);
  const std::string gpu = values.count("gpu_id") != 0 ? values.at("gpu_id") : "?";
  for (const std::vector<std::string>& templ : override_.commands) {
    std::vector<std::string> argv;
    for (const std::string& argument : templ) {
      argv.push_back(substitute(argument, values));
    }
    const std::string shown = shell_join(argv);
    const auto fail = [&](const std::string& what, const std::string& output) {
      const std::string tail = tail_of(output);
      return Error(ErrorKind::kUnknown, fmt::format("command override for {} on GPU {}: `{}` {}{}",
                                                    operation_name(operation), gpu, shown, what,
                                                    tail.empty() ? "" : "; output: " + tail));
    };
    OutputCapture capture;
    ChildProcessOptions options;
    options.output_file = capture.path();
    options.own_process_group = true;  // a timeout kills what the command started too
    auto started = ChildProcess::start(argv, options);
    if (auto* failure = std::get_if<ChildProcess::StartFailure>(&started)) {
      throw fail("could not be started: " + failure->message, "");
    }
    ChildProcess& child = std::get<ChildProcess>(started);
    std::optional<ChildExit> exit = child.wait_for(override_.timeout_s);
    if (!exit) {
      ::kill(-child.pid(), SIGKILL);
      child.wait();
      const std::string output = capture.read();
      log().error("zeusd: override {} GPU {}: `{}` killed after its {} s timeout; output: {}",
                  operation_name(operation), gpu, shown, override_.timeout_s, tail_of(output));
      throw fail(fmt::format("did not finish within its timeout of {} s and was killed",
                             override_.timeout_s),
                 output);
    }
    const std::string output = capture.read();
    log().info("zeusd: override {} GPU {}: `{}` exited {}; output: {}", operation_name(operation),
               gpu, shown, exit->exit_code, tail_of(output, 500));
    if (exit->signal) {
      throw fail("was killed by " + signal_name(*exit->signal), output);
    }
    if (exit->exit_code != 0) {
      throw fail(fmt::format("exited with status {}", exit->exit_code), output);
    }
    if (override_.error_regex && std::regex_search(output, *override_.error_regex)) {
      throw fail(fmt::format("printed the error_pattern '{}'", *override_.error_pattern), output);
    }
  }
}

}  // namespace zeus::daemon
