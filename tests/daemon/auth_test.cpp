// zeusd auth: HMAC, HS256 tokens, the signing-key file, `zeusd token issue`, and the
// middleware decision matrix of the wire protocol §2.
#include "daemon/auth.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "auth_test_support.hpp"
#include "common/base64.hpp"
#include "support/expect_error.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using zeus::testing::expect_error;

// Alice's claims under {"typ":"JWT","alg":"none"} with an empty signature.
const std::string kAliceAlgNone =
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJub25lIn0."
    "eyJzdWIiOiJhbGljZSIsInNjb3BlcyI6WyJncHUtcmVhZCIsImNwdS1yZWFkIl0sImV4cCI6MjAwMDAwMDAwMH0.";
// Alice's claims under {"typ":"JWT","alg":"HS512"}, correctly HMAC-SHA512-signed with the key.
const std::string kAliceHs512 =
    "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzUxMiJ9."
    "eyJzdWIiOiJhbGljZSIsInNjb3BlcyI6WyJncHUtcmVhZCIsImNwdS1yZWFkIl0sImV4cCI6MjAwMDAwMDAwMH0."
    "-_g1B7wbJ2DQhg3pse7pb6klmB2Fms07EmNxlDEe38gue4C0UTI4qZoptteGc0-yErkTNKcvnJ8MxJLTBU7Q7Q";

// A token over arbitrary header and payload JSON, correctly signed: for claims of wrong types.
std::string sign_raw(const std::string& header_json, const std::string& payload_json,
                     const SigningKey& key = test_key()) {
  std::string input = base64url_encode(header_json) + "." + base64url_encode(payload_json);
  return input + "." + base64url_encode(hmac_sha256(key.bytes(), input));
}
std::string sign_payload(const std::string& payload_json) {
  return sign_raw(R"({"typ":"JWT","alg":"HS256"})", payload_json);
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

// ---- primitives ----

TEST(Hmac, Rfc4231TestCase2) {
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ApiGroups, NamesAndLists) {
  EXPECT_EQ(api_group_name(ApiGroup::kGpuControl), "gpu-control");
  EXPECT_EQ(parse_api_group("cpu-read"), ApiGroup::kCpuRead);
  EXPECT_FALSE(parse_api_group("GPU-READ").has_value());
  EXPECT_EQ(parse_api_group_list("gpu-read,gpu-control,gpu-read"),
            (std::vector<ApiGroup>{ApiGroup::kGpuRead, ApiGroup::kGpuControl}));
  expect_error([] { parse_api_group_list("gpu-read,gpu-write"); }, ErrorKind::kInvalidArgument,
               {"gpu-write", "gpu-control, gpu-read, cpu-read"});
  expect_error([] { parse_api_group_list("gpu-read,,cpu-read"); }, ErrorKind::kInvalidArgument,
               {"empty item"});
  expect_error([] { parse_api_group_list(""); }, ErrorKind::kInvalidArgument, {"empty"});
}

TEST(ApiGroups, PathsMapLikeTheReference) {
  EXPECT_EQ(required_group("/gpu/set_power_limit"), ApiGroup::kGpuControl);
  EXPECT_EQ(required_group("/gpu/set_persistence_mode"), ApiGroup::kGpuControl);
  EXPECT_EQ(required_group("/gpu/reset_locked_clocks"), ApiGroup::kGpuControl);
  EXPECT_EQ(required_group("/gpu/get_power_limit"), ApiGroup::kGpuRead);
  EXPECT_EQ(required_group("/gpu/stream_power"), ApiGroup::kGpuRead);
  EXPECT_EQ(required_group("/cpu/get_cumulative_energy"), ApiGroup::kCpuRead);
  EXPECT_EQ(required_group("/cpu/stream_power"), ApiGroup::kCpuRead);
  EXPECT_FALSE(required_group("/discover").has_value());
  EXPECT_FALSE(required_group("/time").has_value());
  EXPECT_FALSE(required_group("/auth/whoami").has_value());
  EXPECT_FALSE(required_group("/gpu").has_value());
}

// ---- tokens ----

TEST(Token, IssueMatchesAnIndependentlyComputedToken) {
  EXPECT_EQ(
      issue_token(test_key(), "alice", {ApiGroup::kGpuRead, ApiGroup::kCpuRead}, 2'000'000'000),
      kAliceToken);
  EXPECT_EQ(issue_token(test_key(), "bob", {ApiGroup::kGpuControl}), kBobToken);
}

TEST(Token, RoundTrip) {
  std::string token = issue_token(test_key(), "carol \"c\" ü",
                                  {ApiGroup::kGpuControl, ApiGroup::kGpuRead}, kNowS + 3600);
  TokenCheck check = verify_token(test_key(), token, kNowS);
  ASSERT_EQ(check.status, TokenStatus::kValid) << check.error;
  EXPECT_EQ(check.claims.sub, "carol \"c\" ü");
  EXPECT_EQ(check.claims.scopes,
            (std::vector<ApiGroup>{ApiGroup::kGpuControl, ApiGroup::kGpuRead}));
  EXPECT_EQ(check.claims.exp_s, kNowS + 3600);

  TokenCheck alice = verify_token(test_key(), kAliceToken, kNowS);
  ASSERT_EQ(alice.status, TokenStatus::kValid) << alice.error;
  EXPECT_EQ(alice.claims.sub, "alice");
  TokenCheck bob = verify_token(test_key(), kBobToken, kNowS);
  ASSERT_EQ(bob.status, TokenStatus::kValid) << bob.error;
  EXPECT_FALSE(bob.claims.exp_s.has_value());
}

TEST(Token, IssueRefusesEmptySubAndNegativeExpiry) {
  expect_error([] { issue_token(test_key(), "", {ApiGroup::kGpuRead}); },
               ErrorKind::kInvalidArgument, {"--sub"});
  expect_error([] { issue_token(test_key(), "a", {ApiGroup::kGpuRead}, -1); },
               ErrorKind::kInvalidArgument, {"expiry"});
}

TEST(Token, TamperedPayloadOrSignatureIsInvalidSignature) {
  // Swap the payload for one granting gpu-control, keep the signature.
  std::string forged_payload =
      base64url_encode(R"({"sub":"alice","scopes":["gpu-control"],"exp":2000000000})");
  std::size_t first = kAliceToken.find('.');
  std::size_t second = kAliceToken.find('.', first + 1);
  std::string forged =
      kAliceToken.substr(0, first + 1) + forged_payload + kAliceToken.substr(second);
  TokenCheck check = verify_token(test_key(), forged, kNowS);
  EXPECT_EQ(check.status, TokenStatus::kInvalid);
  EXPECT_EQ(check.error, "InvalidSignature");

  std::string bad_signature = kAliceToken;
  bad_signature[bad_signature.size() - 2] =
      bad_signature[bad_signature.size() - 2] == 'A' ? 'B' : 'A';
  EXPECT_EQ(verify_token(test_key(), bad_signature, kNowS).error, "InvalidSignature");

  // Truncated signature: a valid encoding, wrong length.
  std::string truncated = kAliceToken.substr(0, kAliceToken.size() - 4);
  EXPECT_EQ(verify_token(test_key(), truncated, kNowS).status, TokenStatus::kInvalid);

  // Another key of the right length.
  SigningKey other(std::string(40, 'k'));
  EXPECT_EQ(verify_token(other, kAliceToken, kNowS).error, "InvalidSignature");
}

TEST(Token, OtherAlgorithmsAreRefused) {
  EXPECT_EQ(verify_token(test_key(), kAliceAlgNone, kNowS).error, "InvalidAlgorithm");
  EXPECT_EQ(verify_token(test_key(), kAliceHs512, kNowS).error, "InvalidAlgorithm");
  // alg none with a "signature" that is the HS256 MAC of the real header: still refused.
  EXPECT_EQ(verify_token(test_key(), kAliceAlgNone + kAliceToken.substr(kAliceToken.rfind('.') + 1),
                         kNowS)
                .error,
            "InvalidAlgorithm");
  EXPECT_EQ(
      verify_token(test_key(), sign_raw(R"({"typ":"JWT"})", R"({"sub":"a","scopes":[]})"), kNowS)
          .error,
      "JSON error: missing field `alg`");
  EXPECT_EQ(verify_token(test_key(), sign_raw(R"({"alg":["HS256"]})", R"({"sub":"a","scopes":[]})"),
                         kNowS)
                .error,
            "InvalidAlgorithm");
}

TEST(Token, MalformedTokens) {
  for (const std::string& token : {std::string(""), std::string("abc"), std::string("a.b"),
                                   std::string("a.b.c.d"), kAliceToken + "."}) {
    EXPECT_EQ(verify_token(test_key(), token, kNowS).error, "InvalidToken") << token;
  }
  // Bad base64 in each part.
  std::string header_padded =
      "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9=" + kAliceToken.substr(kAliceToken.find('.'));
  EXPECT_EQ(verify_token(test_key(), header_padded, kNowS).error.rfind("Base64 error:", 0), 0u);
  std::string signature_bad = kAliceToken.substr(0, kAliceToken.rfind('.') + 1) + "***";
  EXPECT_EQ(verify_token(test_key(), signature_bad, kNowS).error.rfind("Base64 error:", 0), 0u);
  // Header that is not JSON, or not an object.
  EXPECT_EQ(
      verify_token(test_key(), sign_raw("not json", "{}"), kNowS).error.rfind("JSON error:", 0),
      0u);
  EXPECT_EQ(verify_token(test_key(), sign_raw("[1]", "{}"), kNowS).error.rfind("JSON error:", 0),
            0u);
}

TEST(Token, BadClaimsAreJsonErrors) {
  struct Case {
    std::string payload;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"not json", "JSON error: the payload is not valid JSON"},
      {R"("alice")", "JSON error: the payload is not a JSON object"},
      {R"({"scopes":["gpu-read"]})", "JSON error: missing field `sub`"},
      {R"({"sub":"a"})", "JSON error: missing field `scopes`"},
      {R"({"sub":7,"scopes":[]})", "JSON error: `sub` must be a string"},
      {R"({"sub":"a","scopes":"gpu-read"})", "JSON error: `scopes` must be an array of strings"},
      {R"({"sub":"a","scopes":[1]})", "JSON error: `scopes` must be an array of strings"},
      {R"({"sub":"a","scopes":["gpu-write"]})",
       "JSON error: unknown scope 'gpu-write', expected one of: gpu-control, gpu-read, cpu-read"},
      {R"({"sub":"a","scopes":[],"exp":-5})",
       "JSON error: `exp` must be a non-negative integer (unix seconds)"},
      {R"({"sub":"a","scopes":[],"exp":1.5})",
       "JSON error: `exp` must be a non-negative integer (unix seconds)"},
      {R"({"sub":"a","scopes":[],"exp":"2000000000"})",
       "JSON error: `exp` must be a non-negative integer (unix seconds)"},
      {R"({"sub":"a","scopes":[],"exp":18446744073709551615})",
       "JSON error: `exp` is out of range"},
  };
  for (const Case& c : cases) {
    TokenCheck check = verify_token(test_key(), sign_payload(c.payload), kNowS);
    EXPECT_EQ(check.status, TokenStatus::kInvalid) << c.payload;
    EXPECT_EQ(check.error, c.error) << c.payload;
  }
  // Unknown extra claims and a null exp are accepted.
  TokenCheck extra = verify_token(
      test_key(), sign_payload(R"({"sub":"a","scopes":["cpu-read"],"iat":1,"exp":null})"), kNowS);
  ASSERT_EQ(extra.status, TokenStatus::kValid) << extra.error;
  EXPECT_FALSE(extra.claims.exp_s.has_value());
}

TEST(Token, ExpiryUsesTheInjectedClockAndTheReferenceLeeway) {
  std::string token = issue_token(test_key(), "a", {ApiGroup::kGpuRead}, kNowS);
  EXPECT_EQ(verify_token(test_key(), token, kNowS).status, TokenStatus::kValid);
  EXPECT_EQ(verify_token(test_key(), token, kNowS + kDefaultExpiryLeewayS).status,
            TokenStatus::kValid);
  EXPECT_EQ(verify_token(test_key(), token, kNowS + kDefaultExpiryLeewayS + 1).status,
            TokenStatus::kExpired);
  EXPECT_EQ(verify_token(test_key(), token, kNowS + 1, /*expiry_leeway_s=*/0).status,
            TokenStatus::kExpired);
  EXPECT_EQ(verify_token(test_key(), kAliceToken, 2'000'000'000 + 61).status,
            TokenStatus::kExpired);
}

TEST(Token, ClaimsJsonIsWhoamiShape) {
  EXPECT_EQ(claims_json({"alice", {ApiGroup::kGpuRead}, 5}),
            R"({"sub":"alice","scopes":["gpu-read"],"exp":5})");
  EXPECT_EQ(claims_json({"bob", {}, std::nullopt}), R"({"sub":"bob","scopes":[]})");
}

// ---- the middleware decision ----

AuthConfig config_with_auth(std::vector<ApiGroup> groups = {
                                ApiGroup::kGpuControl, ApiGroup::kGpuRead, ApiGroup::kCpuRead}) {
  AuthConfig config;
  config.enabled_groups = std::move(groups);
  config.signing_key = test_key();
  return config;
}
AuthConfig config_without_auth(std::vector<ApiGroup> groups = {
                                   ApiGroup::kGpuControl, ApiGroup::kGpuRead, ApiGroup::kCpuRead}) {
  AuthConfig config;
  config.enabled_groups = std::move(groups);
  return config;
}
std::optional<std::string> bearer(const std::string& token) {
  return "Bearer " + token;
}

void expect_refused(const AuthResult& result, int status, const std::string& body,
                    bool www_authenticate) {
  EXPECT_FALSE(result.allowed);
  EXPECT_EQ(result.status, status);
  EXPECT_EQ(result.body, body);
  EXPECT_EQ(nlohmann::json::parse(result.body).at("error"), result.error_message);
  if (www_authenticate) {
    ASSERT_EQ(result.headers.size(), 1u);
    EXPECT_EQ(result.headers[0].first, "WWW-Authenticate");
    EXPECT_EQ(result.headers[0].second, "Bearer realm=\"zeusd\"");
  } else {
    EXPECT_TRUE(result.headers.empty());
  }
  EXPECT_FALSE(result.sub.has_value());
}

TEST(Authorize, DisabledGroupIs404BeforeAnyAuthCheck) {
  const std::string body = R"({"error":"API group 'gpu-control' is not enabled on this server."})";
  // With auth on and no token at all: still 404, not 401.
  expect_refused(authorize(config_with_auth({ApiGroup::kGpuRead}), "/gpu/set_power_limit",
                           std::nullopt, kNowS),
                 404, body, false);
  // With auth off.
  expect_refused(authorize(config_without_auth({ApiGroup::kGpuRead}), "/gpu/reset_locked_clocks",
                           std::nullopt, kNowS),
                 404, body, false);
  expect_refused(authorize(config_without_auth({ApiGroup::kGpuControl}), "/cpu/get_power",
                           std::nullopt, kNowS),
                 404, R"({"error":"API group 'cpu-read' is not enabled on this server."})", false);
  expect_refused(authorize(config_with_auth({ApiGroup::kCpuRead}), "/gpu/stream_power",
                           bearer(kAliceToken), kNowS),
                 404, R"({"error":"API group 'gpu-read' is not enabled on this server."})", false);
}

TEST(Authorize, AuthDisabledPassesAllButAuthRoutes) {
  AuthConfig config = config_without_auth();
  for (const char* path : {"/discover", "/time", "/gpu/set_power_limit", "/gpu/get_power",
                           "/cpu/stream_power", "/unknown"}) {
    AuthResult result = authorize(config, path, std::nullopt, kNowS);
    EXPECT_TRUE(result.allowed) << path;
    EXPECT_FALSE(result.sub.has_value());
  }
  // A token sent to a server without auth is ignored, even an invalid one.
  EXPECT_TRUE(authorize(config, "/gpu/set_power_limit", bearer("garbage"), kNowS).allowed);
  expect_refused(authorize(config, "/auth/whoami", bearer(kAliceToken), kNowS), 404,
                 R"({"error":"Authentication is not enabled on this server."})", false);
}

TEST(Authorize, DiscoverAndTimeAreOpenWithAuth) {
  AuthConfig config = config_with_auth();
  for (const char* path : {"/discover", "/time"}) {
    EXPECT_TRUE(authorize(config, path, std::nullopt, kNowS).allowed) << path;
    EXPECT_TRUE(authorize(config, path, bearer("garbage"), kNowS).allowed) << path;
  }
}

TEST(Authorize, MissingOrMisshapenHeaderIs401WithChallenge) {
  AuthConfig config = config_with_auth();
  const std::string body =
      R"({"error":"Authentication required. Provide an Authorization: Bearer <token> header."})";
  for (const std::optional<std::string>& header :
       {std::optional<std::string>(), std::optional<std::string>(""),
        std::optional<std::string>("Basic YWxpY2U6cHc="), std::optional<std::string>("Bearer"),
        std::optional<std::string>("bearer " + kAliceToken),
        std::optional<std::string>(kAliceToken)}) {
    expect_refused(authorize(config, "/gpu/get_power", header, kNowS), 401, body, true);
  }
  // Unknown paths and whoami still need a token.
  expect_refused(authorize(config, "/auth/whoami", std::nullopt, kNowS), 401, body, true);
  expect_refused(authorize(config, "/nope", std::nullopt, kNowS), 401, body, true);
}

TEST(Authorize, BadTokensAre401) {
  AuthConfig config = config_with_auth();
  expect_refused(authorize(config, "/gpu/get_power", bearer(""), kNowS), 401,
                 R"({"error":"Invalid token: InvalidToken"})", true);
  // "Bearer Bearer <token>": the second "Bearer " is part of the header segment.
  expect_refused(
      authorize(config, "/gpu/get_power", bearer("Bearer " + kAliceToken), kNowS), 401,
      R"({"error":"Invalid token: Base64 error: the header is not valid unpadded base64url"})",
      true);
  expect_refused(authorize(config, "/gpu/get_power", bearer(kAliceAlgNone), kNowS), 401,
                 R"({"error":"Invalid token: InvalidAlgorithm"})", true);
  std::string tampered = kAliceToken;
  tampered.back() = tampered.back() == 'I' ? 'J' : 'I';
  AuthResult result = authorize(config, "/gpu/get_power", bearer(tampered), kNowS);
  EXPECT_EQ(result.status, 401);
  EXPECT_EQ(result.body.rfind(R"({"error":"Invalid token: )", 0), 0u) << result.body;
  // Signed with another key.
  SigningKey other(std::string(32, 'x'));
  expect_refused(authorize(config, "/gpu/get_power",
                           bearer(issue_token(other, "mallory", {ApiGroup::kGpuRead})), kNowS),
                 401, R"({"error":"Invalid token: InvalidSignature"})", true);
}

TEST(Authorize, ExpiredTokenIs401) {
  AuthConfig config = config_with_auth();
  std::string token = issue_token(test_key(), "alice", {ApiGroup::kGpuRead}, kNowS - 3600);
  expect_refused(authorize(config, "/gpu/get_power", bearer(token), kNowS), 401,
                 R"({"error":"Token has expired."})", true);
}

TEST(Authorize, MissingScopeIs403ListingTheTokensScopes) {
  AuthConfig config = config_with_auth();
  expect_refused(
      authorize(config, "/gpu/set_power_limit", bearer(kAliceToken), kNowS), 403,
      R"({"error":"Token for user 'alice' lacks required scope 'gpu-control'. Token scopes: ['gpu-read', 'cpu-read']"})",
      false);
  expect_refused(
      authorize(config, "/cpu/get_power", bearer(kBobToken), kNowS), 403,
      R"({"error":"Token for user 'bob' lacks required scope 'cpu-read'. Token scopes: ['gpu-control']"})",
      false);
  // gpu-control does not imply gpu-read.
  EXPECT_EQ(authorize(config, "/gpu/get_power_limit", bearer(kBobToken), kNowS).status, 403);
  std::string none = issue_token(test_key(), "nobody", {});
  expect_refused(
      authorize(config, "/gpu/get_power", bearer(none), kNowS), 403,
      R"({"error":"Token for user 'nobody' lacks required scope 'gpu-read'. Token scopes: []"})",
      false);
  // A quote in sub is escaped in the JSON body.
  std::string quoted = issue_token(test_key(), "a\"b", {});
  EXPECT_EQ(
      authorize(config, "/gpu/get_power", bearer(quoted), kNowS).body,
      R"({"error":"Token for user 'a\"b' lacks required scope 'gpu-read'. Token scopes: []"})");
}

TEST(Authorize, ValidTokenWithScopePassesAndCarriesClaims) {
  AuthConfig config = config_with_auth();
  for (const char* path : {"/gpu/get_power", "/gpu/stream_power", "/cpu/get_cumulative_energy"}) {
    AuthResult result = authorize(config, path, bearer(kAliceToken), kNowS);
    EXPECT_TRUE(result.allowed) << path << " " << result.body;
    EXPECT_EQ(result.sub, "alice");
    EXPECT_TRUE(result.headers.empty());
  }
  AuthResult control = authorize(config, "/gpu/set_power_limit", bearer(kBobToken), kNowS);
  EXPECT_TRUE(control.allowed) << control.body;
  EXPECT_EQ(control.sub, "bob");

  // whoami needs only a valid token; its claims give the body.
  AuthResult whoami = authorize(config, "/auth/whoami", bearer(kAliceToken), kNowS);
  ASSERT_TRUE(whoami.allowed) << whoami.body;
  ASSERT_TRUE(whoami.claims.has_value());
  EXPECT_EQ(claims_json(*whoami.claims),
            R"({"sub":"alice","scopes":["gpu-read","cpu-read"],"exp":2000000000})");
}

}  // namespace
}  // namespace zeus::daemon::auth
