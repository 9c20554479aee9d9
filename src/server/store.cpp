#include "server/store.hpp"

namespace zeus::server {

std::unique_ptr<Store> open_store(const std::string& given_url, const StoreOptions& options) {
  // The reference's SQLAlchemy URLs name a driver ("sqlite+aiosqlite://",
  // "postgresql+asyncpg://"): the driver part means nothing here.
  std::string url = given_url;
  const auto scheme_end = url.find("://");
  if (const auto plus = url.find('+'); plus != std::string::npos && plus < scheme_end) {
    url.erase(plus, scheme_end - plus);
  }
  const std::string sqlite = "sqlite://";
  if (url.rfind(sqlite, 0) == 0) {
    std::string path = url.substr(sqlite.size());
    // SQLAlchemy's convention: sqlite:///relative.db and sqlite:////absolute.db; also accept
    // sqlite://:memory: and sqlite:///:memory:.
    if (path.rfind('/', 0) == 0) {
      path.erase(0, 1);
    }
    return open_sqlite_store(path, options);
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    return open_postgres_store(url, options);
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown database URL \"" + url +
                  "\"; use sqlite:///path.db (the default, embedded) or "
                  "postgresql://user:password@host:port/dbname");
}

}  // namespace zeus::server
