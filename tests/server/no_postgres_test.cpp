// A server built with ZEUS_WITH_POSTGRES=OFF: postgresql:// store URLs are refused with an error
// that names the build option and the way out, and SQLite still opens.
#include <gtest/gtest.h>

#include <string>

#include "server/store.hpp"
#include "zeus/common/error.hpp"

namespace {

static_assert(ZEUS_HAVE_POSTGRES == 0, "this suite is built only without PostgreSQL");

TEST(NoPostgres, PostgresUrlIsRefusedWithWhatToDo) {
  for (const std::string url :
       {"postgresql://zeus:secret@localhost:5432/zeus", "postgres://localhost/zeus"}) {
    try {
      zeus::server::open_store(url);
      FAIL() << "opened " << url;
    } catch (const zeus::Error& error) {
      const std::string message = error.what();
      EXPECT_EQ(error.kind(), zeus::ErrorKind::kUnavailable);
      EXPECT_NE(message.find("ZEUS_WITH_POSTGRES=OFF"), std::string::npos) << message;
      EXPECT_NE(message.find("sqlite:///"), std::string::npos) << message;
      EXPECT_EQ(message.find("secret"), std::string::npos) << "the password is not repeated";
    }
  }
}

TEST(NoPostgres, SqliteStillOpens) {
  EXPECT_NE(zeus::server::open_store("sqlite://:memory:"), nullptr);
}

}  // namespace
