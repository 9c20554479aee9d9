// The library's log (spdlog): one logger per module, named as the Python package's modules
// (zeus_cpp.device, zeus_cpp.monitor, zeus_cpp.optimizer.power_limit, ...), chosen from the source
// file of the call, so that `log().warn(...)` needs no name. Level from ZEUS_LOG_LEVEL (trace,
// debug, info, warn, error, off); default warn so that the library is quiet inside other programs.
// Lines go to stderr as `[zeus W] ...` unless a forward is set (the Python package routes them
// through Python's logging: src/python/log_bridge.cpp, docs/python.md "Logging").
#pragma once

#include <spdlog/spdlog.h>

#include <functional>
#include <span>
#include <string_view>

namespace zeus {

// The logger of the module that `caller_file` (the caller's source file) belongs to.
// __builtin_FILE() rather than std::source_location: clang 14 (the fuzz build) with libstdc++ 12
// has no std::source_location.
spdlog::logger& log(const char* caller_file = __builtin_FILE());

// The logger of a module by its name (one of log_module_names(); anything else: `zeus_cpp`).
spdlog::logger& module_log(std::string_view name);

// The module logger's name for a source file (`.../src/<layer>/<file>`), as log() chooses it.
std::string_view log_module_of(std::string_view source_file);

// Every module logger's name, `zeus_cpp` first.
std::span<const std::string_view> log_module_names();

// Sets the level of every module logger (the CLI's --verbose, zeusd's default).
void set_log_level(spdlog::level::level_enum level);

// Receives each line that a logger's level lets through (module name, level, message without
// the `[zeus W]` prefix), in the thread that logged it, instead of stderr. It must not throw and
// must not block on anything a logging thread may hold. An empty function restores stderr.
using LogForward = std::function<void(std::string_view module, spdlog::level::level_enum level,
                                      std::string_view text)>;
void set_log_forward(LogForward forward);

}  // namespace zeus
