// The library's logger (spdlog). Level from ZEUS_LOG_LEVEL (trace, debug, info, warn, error,
// off); default warn so that the library is quiet inside other programs.
#pragma once

#include <spdlog/spdlog.h>

namespace zeus {

spdlog::logger& log();

}  // namespace zeus
