#include "zeus/common/env.hpp"

#include <cstdlib>

namespace zeus {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      return std::nullopt;
    }
    return std::string(value);
  };
}

}  // namespace zeus
