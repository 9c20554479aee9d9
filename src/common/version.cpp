#include "zeus/version.hpp"

namespace zeus {

const char* version() noexcept {
  // The string compiled into the library, which is what a program linked with it runs.
  return ZEUS_VERSION_STRING;
}

}  // namespace zeus
