// Shared by the daemon_auth_test files: the test key, a token computed independently of our
// code, and a fixture writing key files with a given mode.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/auth.hpp"

namespace zeus::daemon::auth {

// 39 bytes.
const std::string kKeyText = "zeusd-test-signing-key-0123456789abcdef";
constexpr std::int64_t kNowS = 1'700'000'000;

// Computed independently of this code, with python3's hmac/hashlib/base64:
//   key = b"zeusd-test-signing-key-0123456789abcdef"
//   h = b'{"typ":"JWT","alg":"HS256"}'
//   p = b'{"sub":"alice","scopes":["gpu-read","cpu-read"],"exp":2000000000}'
//   b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
//   si = b64(h) + "." + b64(p)
//   si + "." + b64(hmac.new(key, si.encode(), hashlib.sha256).digest())
// (the same MAC as `printf %s "$si" | openssl dgst -sha256 -hmac "$key" -binary | basenc
// --base64url | tr -d =`).
const std::string kAliceToken =
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9."
    "eyJzdWIiOiJhbGljZSIsInNjb3BlcyI6WyJncHUtcmVhZCIsImNwdS1yZWFkIl0sImV4cCI6MjAwMDAwMDAwMH0."
    "Ac8vYrq-mvJii49HAM4xLCOLPjvN5KkI-l6zwAzBUIs";
// Same key, p = b'{"sub":"bob","scopes":["gpu-control"]}' (no expiry).
const std::string kBobToken =
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9."
    "eyJzdWIiOiJib2IiLCJzY29wZXMiOlsiZ3B1LWNvbnRyb2wiXX0."
    "IYAq7AMZJUekD1_IpFI-gWxDQeWvUwiCq5Nms3IrvVE";

inline SigningKey test_key() {
  return SigningKey(kKeyText);
}

class KeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("zeusd_auth_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& contents, mode_t mode) {
    std::filesystem::path path = dir_ / "key";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << contents;
    }
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace zeus::daemon::auth
