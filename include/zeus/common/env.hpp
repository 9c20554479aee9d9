// Environment access, injectable for tests.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace zeus {

// Looks up an environment variable; std::nullopt when unset (set-but-empty is "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads the real process environment.
EnvLookup process_env();

}  // namespace zeus
