// The entry points of zeus_postgres_store.so (postgres_module.hpp): everything else in the module
// is hidden, so its copies of zeus's static libraries never meet the executable's.
#include "server/postgres_module.hpp"

#include "zeus/version.hpp"

extern "C" {

__attribute__((visibility("default"))) const char* zeus_postgres_module_abi() {
  return ZEUS_VERSION_STRING;
}

__attribute__((visibility("default"))) zeus::server::Store* zeus_postgres_module_open(
    const std::string& url, const zeus::server::StoreOptions& options) {
  return zeus::server::open_postgres_store(url, options).release();
}

}  // extern "C"

// The entry points' types must match what the loader calls.
static_assert(std::is_same_v<decltype(&zeus_postgres_module_abi),
                             zeus::server::postgres_module::AbiFunction>);
static_assert(std::is_same_v<decltype(&zeus_postgres_module_open),
                             zeus::server::postgres_module::OpenFunction>);
