// open_postgres_store in a build without PostgreSQL (ZEUS_WITH_POSTGRES=OFF, no libpq): the
// store URL is refused with what to do instead, rather than failing to link or naming a scheme
// the parser does know as unknown.
#include "server/store.hpp"
#include "zeus/common/error.hpp"

namespace zeus::server {

std::unique_ptr<Store> open_postgres_store(const std::string& /*url*/,
                                           const StoreOptions& /*options*/) {
  // The URL is not repeated: it may carry a password.
  throw Error(ErrorKind::kUnavailable,
              "this zeus was built without PostgreSQL support (ZEUS_WITH_POSTGRES=OFF), so a "
              "postgresql:// store cannot be opened; use sqlite:///path/to/file.db, or rebuild "
              "with libpq installed (Debian: libpq-dev) and -DZEUS_WITH_POSTGRES=ON");
}

}  // namespace zeus::server
