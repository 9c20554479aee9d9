#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace zeus {

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto created = std::make_shared<spdlog::logger>(
        "zeus", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    created->set_pattern("[zeus %L] %v");
    spdlog::level::level_enum level = spdlog::level::warn;
    if (const char* env = std::getenv("ZEUS_LOG_LEVEL"); env != nullptr && env[0] != '\0') {
      level = spdlog::level::from_str(env);
      // from_str maps unknown names to `off`; only accept it when asked for explicitly.
      if (level == spdlog::level::off && std::string(env) != "off") {
        level = spdlog::level::warn;
        created->warn(
            "ZEUS_LOG_LEVEL=\"{}\" is not a level (trace, debug, info, warn, error, "
            "critical, off); using warn",
            env);
      }
    }
    created->set_level(level);
    return created;
  }();
  return *logger;
}

}  // namespace zeus
