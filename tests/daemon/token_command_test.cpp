// `zeusd token issue`: the --expires grammar, our flags and the reference's spellings.
#include "daemon/token_command.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "auth_test_support.hpp"
#include "daemon/auth.hpp"
#include "support/expect_error.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using zeus::testing::expect_error;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parse_duration_s("3600"), 3600);
  EXPECT_EQ(parse_duration_s("90s"), 90);
  EXPECT_EQ(parse_duration_s("30m"), 1800);
  EXPECT_EQ(parse_duration_s("1h"), 3600);
  EXPECT_EQ(parse_duration_s("7d"), 604800);
  for (const char* bad : {"", "h", "0", "0h", "-1h", "1.5h", "1w", "1 h", "h1",
                          "99999999999999999999", "36500000d"}) {
    expect_error([&] { parse_duration_s(bad); }, ErrorKind::kInvalidArgument, {bad});
  }
}

int run_cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::vector<const char*> argv = {"zeusd token issue"};
  for (const std::string& arg : args) {
    argv.push_back(arg.c_str());
  }
  std::ostringstream out_stream;
  std::ostringstream err_stream;
  int code =
      run_token_issue(static_cast<int>(argv.size()), argv.data(), out_stream, err_stream, kNowS);
  out = out_stream.str();
  err = err_stream.str();
  return code;
}

TEST_F(KeyFile, TokenIssueCommandPrintsAVerifiableToken) {
  std::filesystem::path path = write(kKeyText + "\n", 0600);
  std::string out;
  std::string err;
  ASSERT_EQ(run_cli({"--signing-key-path", path.string(), "--sub", "alice", "--scopes",
                     "gpu-read,cpu-read", "--expires-in", "1h"},
                    out, err),
            0)
      << err;
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  TokenCheck check = verify_token(test_key(), out.substr(0, out.size() - 1), kNowS);
  ASSERT_EQ(check.status, TokenStatus::kValid) << check.error;
  EXPECT_EQ(check.claims.sub, "alice");
  EXPECT_EQ(check.claims.exp_s, kNowS + 3600);

  // Without --expires-in: the reference-identical known-answer token.
  ASSERT_EQ(
      run_cli({"--signing-key-path", path.string(), "--sub", "bob", "--scopes", "gpu-control"}, out,
              err),
      0)
      << err;
  EXPECT_EQ(out, kBobToken + "\n");
}

// The reference's spellings: --user, --scope, --expires 7d|never|0.
TEST_F(KeyFile, TokenIssueCommandTakesTheReferenceFlags) {
  std::filesystem::path path = write(kKeyText + "\n", 0600);
  std::string out;
  std::string err;
  ASSERT_EQ(run_cli({"--signing-key-path", path.string(), "--user", "alice", "--scope",
                     "gpu-read,cpu-read", "--expires", "7d"},
                    out, err),
            0)
      << err;
  TokenCheck check = verify_token(test_key(), out.substr(0, out.size() - 1), kNowS);
  ASSERT_EQ(check.status, TokenStatus::kValid) << check.error;
  EXPECT_EQ(check.claims.sub, "alice");
  EXPECT_EQ(check.claims.exp_s, kNowS + 7 * 86400);
  EXPECT_EQ(check.claims.scopes, (std::vector<ApiGroup>{ApiGroup::kGpuRead, ApiGroup::kCpuRead}));
  for (const char* never : {"never", "0"}) {
    ASSERT_EQ(run_cli({"--signing-key-path", path.string(), "--user", "bob", "--scope",
                       "gpu-control", "--expires", never},
                      out, err),
              0)
        << err;
    EXPECT_EQ(out, kBobToken + "\n") << never;
  }
}

TEST_F(KeyFile, TokenIssueCommandErrors) {
  std::filesystem::path path = write(kKeyText, 0600);
  std::string out;
  std::string err;
  EXPECT_NE(run_cli({"--signing-key-path", path.string(), "--sub", "a", "--scopes", "gpu-write"},
                    out, err),
            0);
  EXPECT_NE(err.find("unknown API group 'gpu-write'"), std::string::npos) << err;
  EXPECT_TRUE(out.empty());

  EXPECT_NE(run_cli({"--signing-key-path", path.string(), "--sub", "a"}, out, err), 0);
  EXPECT_NE(err.find("--scope"), std::string::npos) << err;  // --scope, alias --scopes

  EXPECT_NE(
      run_cli({"--signing-key-path", path.string(), "--sub", "", "--scopes", "gpu-read"}, out, err),
      0);
  EXPECT_NE(err.find("--sub"), std::string::npos) << err;

  EXPECT_NE(run_cli({"--signing-key-path", path.string(), "--sub", "a", "--scopes", "gpu-read",
                     "--expires-in", "soon"},
                    out, err),
            0);
  EXPECT_NE(err.find("invalid duration 'soon'"), std::string::npos) << err;

  std::filesystem::path open_key = write(kKeyText, 0644);
  EXPECT_NE(run_cli({"--signing-key-path", open_key.string(), "--sub", "a", "--scopes", "gpu-read"},
                    out, err),
            0);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace zeus::daemon::auth
