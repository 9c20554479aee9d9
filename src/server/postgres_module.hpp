// The PostgreSQL store as a module loaded at run time (zeus_postgres_store.so): libpq, and what it
// brings (Kerberos, LDAP, GnuTLS, SASL: some twenty shared libraries), is loaded only by the
// commands that open a postgresql:// store, not by every `zeus` command. The module exports the
// two C functions below; the `zeus` executable's open_postgres_store (postgres_loader.cpp) opens
// it with dlopen. Builds and programs that link the store directly (the tests, the benchmarks)
// keep postgres_store.cpp's open_postgres_store.
#pragma once

#include <memory>
#include <string>

#include "server/store.hpp"

namespace zeus::server::postgres_module {

// The module's file name, looked for beside the executable and then in the install tree's
// library folder for zeus (postgres_loader.cpp).
inline constexpr const char* kFileName = "zeus_postgres_store.so";
// ZEUS_POSTGRES_MODULE=PATH loads that file instead (tests; a packager's own layout).
inline constexpr const char* kPathVariable = "ZEUS_POSTGRES_MODULE";

// The entry points' names and types. `abi` must be the loader's own ZEUS_VERSION_STRING (the
// module passes C++ objects, so only the same build's module is used). `open` returns a new
// store or throws like open_postgres_store.
inline constexpr const char* kAbiSymbol = "zeus_postgres_module_abi";
inline constexpr const char* kOpenSymbol = "zeus_postgres_module_open";
using AbiFunction = const char* (*)();
using OpenFunction = Store* (*)(const std::string& url, const StoreOptions& options);

}  // namespace zeus::server::postgres_module
