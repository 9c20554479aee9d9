// The signing-key file's rules (`zeusd token issue` is token_command_test.cpp's).
#include "daemon/key_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "auth_test_support.hpp"
#include "support/expect_error.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using zeus::testing::expect_error;

TEST_F(KeyFile, LoadsAndStripsTrailingNewlines) {
  EXPECT_EQ(load_signing_key(write(kKeyText + "\n", 0600)).bytes(), kKeyText);
  EXPECT_EQ(load_signing_key(write(kKeyText + "\r\n", 0400)).bytes(), kKeyText);
  EXPECT_EQ(load_signing_key(write(kKeyText, 0600)).bytes(), kKeyText);
  // A key loaded from a file verifies the known-answer token.
  SigningKey key = load_signing_key(write(kKeyText + "\n", 0600));
  EXPECT_EQ(verify_token(key, kAliceToken, kNowS).status, TokenStatus::kValid);
}

TEST_F(KeyFile, RefusesGroupOrOtherAccess) {
  std::filesystem::path path = write(kKeyText, 0644);
  expect_error([&] { load_signing_key(path); }, ErrorKind::kNoPermission,
               {path.string(), "mode 0644", "chmod 600 " + path.string()});
  expect_error([&] { load_signing_key(write(kKeyText, 0640)); }, ErrorKind::kNoPermission,
               {"mode 0640", "chmod 600"});
  expect_error([&] { load_signing_key(write(kKeyText, 0604)); }, ErrorKind::kNoPermission,
               {"mode 0604", "chmod 600"});
  expect_error([&] { load_signing_key(write(kKeyText, 0620)); }, ErrorKind::kNoPermission,
               {"mode 0620", "chmod 600"});
}

TEST_F(KeyFile, RefusesEmptyAndShortKeys) {
  expect_error([&] { load_signing_key(write("", 0600)); }, ErrorKind::kInvalidArgument,
               {"is empty", "openssl rand"});
  expect_error([&] { load_signing_key(write("\n\n", 0600)); }, ErrorKind::kInvalidArgument,
               {"is empty"});
  expect_error([&] { load_signing_key(write(std::string(31, 'k') + "\n", 0600)); },
               ErrorKind::kInvalidArgument, {"31 bytes", "at least 32", "openssl rand"});
  EXPECT_EQ(load_signing_key(write(std::string(32, 'k'), 0600)).bytes().size(), 32u);
  expect_error([] { SigningKey(std::string(8, 'k')); }, ErrorKind::kInvalidArgument,
               {"8 bytes", "at least 32"});
}

TEST_F(KeyFile, RefusesMissingFileAndDirectories) {
  expect_error([&] { load_signing_key(dir_ / "missing"); }, ErrorKind::kNotFound,
               {"missing", "--signing-key-path"});
  expect_error([&] { load_signing_key(dir_); }, ErrorKind::kInvalidArgument,
               {"not a regular file"});
  // A FIFO without a writer used to block zeusd's start (and `zeusd token issue`) forever.
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  expect_error([&] { load_signing_key(dir_ / "fifo"); }, ErrorKind::kInvalidArgument,
               {"not a regular file"});
}

}  // namespace
}  // namespace zeus::daemon::auth
