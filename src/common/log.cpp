#include "common/log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

namespace zeus {
namespace {

constexpr std::array<std::string_view, 12> kModules = {
    "zeus_cpp",
    "zeus_cpp.device",
    "zeus_cpp.monitor",
    "zeus_cpp.optimizer.power_limit",
    "zeus_cpp.optimizer.batch_size",
    "zeus_cpp.optimizer",
    "zeus_cpp.metric",
    "zeus_cpp.zeusd",
    "zeus_cpp.server",
    "zeus_cpp.http",
    "zeus_cpp.cli",
    "zeus_cpp.mpi",
};

// Index into kModules of a source file (`.../src/<layer>/<file>`).
std::size_t module_index(std::string_view file) {
  const std::size_t at = file.rfind("src/");
  if (at == std::string_view::npos) {
    return 0;
  }
  file.remove_prefix(at + 4);
  const std::string_view layer = file.substr(0, file.find('/'));
  const std::string_view name = file.substr(std::min(file.size(), layer.size() + 1));
  if (layer == "device") {
    return 1;
  }
  if (layer == "monitor") {
    return 2;
  }
  if (layer == "runtime") {
    return name.starts_with("batch_size") ? 4 : 3;
  }
  if (layer == "bso") {
    return 4;
  }
  if (layer == "optimizer") {
    return 5;
  }
  const std::array<std::pair<std::string_view, std::size_t>, 6> others = {
      {{"metrics", 6}, {"daemon", 7}, {"server", 8}, {"http", 9}, {"cli", 10}, {"mpi", 11}}};
  for (const auto& [other, index] : others) {
    if (layer == other) {
      return index;
    }
  }
  return 0;
}

// Every module logger's one sink: the forward when one is set, else stderr (shared, so that lines
// of different modules never interleave). No lock of its own: a forward may run for a long time.
class RouteSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  RouteSink() : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {
    stderr_->set_pattern("[zeus %L] %v");
  }

  void set_forward(LogForward forward) {
    std::shared_ptr<const LogForward> next;
    if (forward) {
      next = std::make_shared<const LogForward>(std::move(forward));
    }
    forward_.store(std::move(next));
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (const std::shared_ptr<const LogForward> forward = forward_.load()) {
      try {
        (*forward)(std::string_view(msg.logger_name.data(), msg.logger_name.size()), msg.level,
                   std::string_view(msg.payload.data(), msg.payload.size()));
        return;
      } catch (...) {  // a forward must not throw; if it does, the line still goes somewhere
      }
    }
    stderr_->log(msg);
  }
  void flush_() override { stderr_->flush(); }
  void set_pattern_(const std::string&) override {}
  void set_formatter_(std::unique_ptr<spdlog::formatter>) override {}

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> stderr_;
  std::atomic<std::shared_ptr<const LogForward>> forward_;
};

struct Loggers {
  std::shared_ptr<RouteSink> sink = std::make_shared<RouteSink>();
  std::array<std::shared_ptr<spdlog::logger>, kModules.size()> modules;

  Loggers() {
    spdlog::level::level_enum level = spdlog::level::warn;
    const char* env = std::getenv("ZEUS_LOG_LEVEL");
    bool unknown = false;
    if (env != nullptr && env[0] != '\0') {
      level = spdlog::level::from_str(env);
      // from_str maps unknown names to `off`; only accept it when asked for explicitly.
      if (level == spdlog::level::off && std::string(env) != "off") {
        level = spdlog::level::warn;
        unknown = true;
      }
    }
    for (std::size_t i = 0; i < kModules.size(); ++i) {
      modules[i] = std::make_shared<spdlog::logger>(std::string(kModules[i]), sink);
      modules[i]->set_level(level);
    }
    if (unknown) {
      modules[0]->warn(
          "ZEUS_LOG_LEVEL=\"{}\" is not a level (trace, debug, info, warn, error, critical, off); "
          "using warn",
          env);
    }
  }
};

// Never destroyed: a native thread (a sampler, a detached one) may log while the process exits.
Loggers& loggers() {
  static Loggers* const instance = new Loggers();
  return *instance;
}

}  // namespace

spdlog::logger& log(const char* caller_file) {
  return *loggers().modules[module_index(caller_file)];
}

spdlog::logger& module_log(std::string_view name) {
  for (std::size_t i = 0; i < kModules.size(); ++i) {
    if (kModules[i] == name) {
      return *loggers().modules[i];
    }
  }
  return *loggers().modules[0];
}

std::string_view log_module_of(std::string_view source_file) {
  return kModules[module_index(source_file)];
}

std::span<const std::string_view> log_module_names() {
  return kModules;
}

void set_log_level(spdlog::level::level_enum level) {
  for (const auto& logger : loggers().modules) {
    logger->set_level(level);
  }
}

void set_log_forward(LogForward forward) {
  loggers().sink->set_forward(std::move(forward));
}

}  // namespace zeus
