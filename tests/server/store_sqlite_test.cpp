// The Store on SQLite only (server_store_test): disk errors, corrupt and read-only files
// (store_test.cpp: the suite both backends pass).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "store_test_support.hpp"
#include "support/file_size_limit.hpp"
#include "support/temp_dir.hpp"

namespace {

using namespace zeus::testing::store_suite;

// ---- SQLite only --------------------------------------------------------------------------------

void insert_into(Store& store, const JobRecord& job) {
  store.transact([&](StoreTransaction& tx) { ASSERT_TRUE(tx.insert_job(job)); });
}

TEST(SqliteStore, ADiskErrorNamesTheFileAndHealthStaysDownUntilAWriteWorks) {
  const zeus::testing::TempDir dir("zeus-sqlite-full");
  const std::filesystem::path file = dir.path() / "bso.db";
  const std::unique_ptr<Store> store = zeus::server::open_sqlite_store(file.string(), {});
  insert_into(*store, full_job("store-test-0"));
  std::string message;
  {
    zeus::testing::FileSizeLimit full(
        zeus::testing::FileSizeLimit::largest({file, file.string() + "-wal"}) + 100);
    for (int i = 1; i <= 100 && message.empty(); ++i) {
      try {
        insert_into(*store, full_job("store-test-" + std::to_string(i)));
      } catch (const StoreError& error) {
        message = error.what();
        EXPECT_EQ(static_cast<int>(error.failure()), static_cast<int>(StoreFailure::kUnavailable))
            << message;
      }
    }
    ASSERT_FALSE(message.empty()) << "no write failed";
    EXPECT_NE(message.find("\"" + file.string() + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("disk"), std::string::npos) << message;
    for (int probe = 0; probe < 2; ++probe) {
      const StoreHealth health = store->health();
      EXPECT_FALSE(health.ok);
      EXPECT_NE(health.message.find(file.string()), std::string::npos) << health.message;
    }
    // Reads still work, and do not make the store healthy.
    store->transact([](StoreTransaction& tx) { EXPECT_TRUE(tx.get_job("store-test-0")); });
    EXPECT_FALSE(store->health().ok);
    full.lift();
  }
  const StoreHealth health = store->health();
  EXPECT_TRUE(health.ok) << health.message;
  insert_into(*store, full_job("store-test-after"));
  EXPECT_TRUE(store->health().ok);
}

// Overwrites the first page of `table` (a b-tree page) with garbage, as a failing disk might.
void corrupt_table(const std::filesystem::path& file, const std::string& table) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string sql =
      "SELECT rootpage, (SELECT page_size FROM pragma_page_size) FROM "
      "sqlite_master WHERE name = '" +
      table + "'";
  ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  const std::int64_t page = sqlite3_column_int64(stmt, 0);
  const std::int64_t page_size = sqlite3_column_int64(stmt, 1);
  sqlite3_finalize(stmt);
  sqlite3_close(db);  // the last connection: the WAL is checkpointed into the file
  ASSERT_GT(page, 1);
  std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp((page - 1) * page_size);
  const std::string garbage(static_cast<std::size_t>(page_size), '\xAB');
  out.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  ASSERT_TRUE(out.good());
}

TEST(SqliteStore, ACorruptFileIsRefusedAtOpenUnlessTheCheckIsSkipped) {
  const zeus::testing::TempDir dir("zeus-sqlite-corrupt");
  const std::filesystem::path file = dir.path() / "bso.db";
  insert_into(*zeus::server::open_sqlite_store(file.string(), {}), full_job("store-test-1"));
  corrupt_table(file, "bso_job");
  expect_store_error(
      [&] { zeus::server::open_sqlite_store(file.string(), {}); }, StoreFailure::kCorrupt,
      {"\"" + file.string() + "\" is corrupt", "quick_check", "restore it from a backup",
       "sqlite3 '" + file.string() + "' .recover", "--skip-integrity-check"});
  // Skipped: it opens, and what touches the damaged page fails naming the file.
  StoreOptions options;
  options.check_integrity = false;
  const std::unique_ptr<Store> store = zeus::server::open_sqlite_store(file.string(), options);
  EXPECT_TRUE(store->health().ok);
  expect_store_error(
      [&] { store->transact([](StoreTransaction& tx) { tx.get_job("store-test-1"); }); },
      StoreFailure::kCorrupt, {"\"" + file.string() + "\"", "malformed", ".recover"});
  const StoreHealth health = store->health();
  EXPECT_FALSE(health.ok);
  EXPECT_NE(health.message.find("malformed"), std::string::npos) << health.message;
  EXPECT_FALSE(store->health().ok);  // only a write that works clears a corruption
}

// Runs `body` in a child process as an unprivileged user (root may write any file), and fails
// with what it printed unless it exits 0.
template <typename Body>
void as_unprivileged_user(Body&& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      std::cerr << "SKIP: cannot drop to uid 65534\n";
      std::_Exit(77);
    }
    const bool ok = body();
    std::cerr.flush();
    std::_Exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 77) {
    GTEST_SKIP() << "cannot run as an unprivileged user here";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's messages above";
}

TEST(SqliteStore, AReadOnlyFileNamesTheFileAndIsUnhealthy) {
  const zeus::testing::TempDir dir("zeus-sqlite-ro");
  const std::filesystem::path file = dir.path() / "bso.db";  // rollback journal: opens read-only
  const std::filesystem::path wal = dir.path() / "wal.db";   // WAL: cannot be read read-only
  for (const auto& path : {file, wal}) {
    insert_into(*zeus::server::open_sqlite_store(path.string(), {}), minimal_job("store-test-1"));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  for (const auto& path : {file, wal}) {
    ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  as_unprivileged_user([&] {
    bool ok = true;
    const auto expect = [&](bool condition, const std::string& what) {
      if (!condition) {
        std::cerr << "FAILED: " << what << "\n";
        ok = false;
      }
    };
    try {
      const std::unique_ptr<Store> store =
          zeus::server::open_sqlite_store(file.string(), StoreOptions{});
      const StoreHealth health = store->health();
      expect(!health.ok, "a read-only store reports healthy");
      expect(health.message.find(file.string()) != std::string::npos &&
                 health.message.find("read-only") != std::string::npos,
             "health message: " + health.message);
      store->transact([&](StoreTransaction& tx) {
        expect(tx.get_job("store-test-1").has_value(), "the job cannot be read");
      });
      try {
        store->transact([](StoreTransaction& tx) { tx.insert_job(minimal_job("store-test-2")); });
        expect(false, "a write to a read-only file succeeded");
      } catch (const StoreError& error) {
        const std::string message = error.what();
        expect(error.failure() == StoreFailure::kReadOnly, "failure kind: " + message);
        expect(message.find("\"" + file.string() + "\"") != std::string::npos &&
                   message.find("readonly") != std::string::npos,
               "write error: " + message);
      }
    } catch (const std::exception& error) {
      expect(false, std::string("unexpected error: ") + error.what());
    }
    try {
      zeus::server::open_sqlite_store(wal.string(), StoreOptions{});
      expect(false, "a read-only WAL database opened");
    } catch (const StoreError& error) {
      const std::string message = error.what();
      expect(error.failure() == StoreFailure::kReadOnly, "failure kind: " + message);
      expect(message.find("\"" + wal.string() + "\"") != std::string::npos &&
                 message.find("may only read it") != std::string::npos,
             "open error: " + message);
    }
    return ok;
  });
  ::chmod(dir.path().c_str(), 0755);
}

}  // namespace
