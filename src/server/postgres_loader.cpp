// open_postgres_store for the `zeus` executable: the PostgreSQL store is in a module,
// zeus_postgres_store.so (postgres_module.hpp), opened here on the first postgresql:// URL, so
// that libpq and its twenty-odd libraries are loaded only by the commands that use them.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "common/dynamic_library.hpp"
#include "server/postgres_module.hpp"
#include "server/store.hpp"
#include "zeus/common/error.hpp"
#include "zeus/version.hpp"

#ifndef ZEUS_POSTGRES_MODULE_RELATIVE_DIR
#error "ZEUS_POSTGRES_MODULE_RELATIVE_DIR: the install tree's module folder, from its bin folder"
#endif

namespace zeus::server {
namespace {

namespace fs = std::filesystem;

// Where the module may be: $ZEUS_POSTGRES_MODULE alone when set; otherwise beside this executable
// (the build tree) and in the install tree's folder for zeus's modules.
std::vector<fs::path> candidates() {
  if (const char* path = std::getenv(postgres_module::kPathVariable);
      path != nullptr && path[0] != '\0') {
    return {path};
  }
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) {
    return {};
  }
  const fs::path dir = exe.parent_path();
  return {dir / postgres_module::kFileName,
          dir / ZEUS_POSTGRES_MODULE_RELATIVE_DIR / postgres_module::kFileName};
}

[[noreturn]] void unavailable(const std::string& why) {
  // The URL is not repeated: it may carry a password.
  throw Error(ErrorKind::kUnavailable,
              "cannot open a postgresql:// store: " + why +
                  ". It needs zeus's PostgreSQL module and libpq (Debian: libpq5); or use "
                  "sqlite:///path/to/file.db");
}

postgres_module::OpenFunction load() {
  std::string looked_in;
  for (const fs::path& path : candidates()) {
    std::error_code error;
    if (!fs::exists(path, error)) {
      looked_in += (looked_in.empty() ? "" : ", ") + path.string();
      continue;
    }
    std::shared_ptr<DynamicLibrary> library;
    try {
      library = DynamicLibrary::open(path.string());
    } catch (const Error& load_error) {
      unavailable(load_error.what());  // libpq missing: dlerror() names it
    }
    const auto abi = reinterpret_cast<postgres_module::AbiFunction>(
        library->symbol(postgres_module::kAbiSymbol));
    const auto open = reinterpret_cast<postgres_module::OpenFunction>(
        library->symbol(postgres_module::kOpenSymbol));
    if (abi == nullptr || open == nullptr) {
      unavailable(path.string() + " is not zeus's PostgreSQL module");
    }
    if (std::string(abi()) != ZEUS_VERSION_STRING) {
      unavailable(path.string() + " is the module of zeus " + abi() + ", this is zeus " +
                  ZEUS_VERSION_STRING);
    }
    // Never closed: a store's code lives in it.
    static std::shared_ptr<DynamicLibrary> kept;
    kept = library;
    return open;
  }
  unavailable(std::string(postgres_module::kFileName) + " is not installed (looked in " +
              (looked_in.empty() ? "no folder: /proc/self/exe unreadable" : looked_in) + ")");
}

}  // namespace

std::unique_ptr<Store> open_postgres_store(const std::string& url, const StoreOptions& options) {
  static std::mutex mutex;
  static postgres_module::OpenFunction open = nullptr;
  {
    std::lock_guard lock(mutex);
    if (open == nullptr) {
      open = load();
    }
  }
  return std::unique_ptr<Store>(open(url, options));
}

}  // namespace zeus::server
