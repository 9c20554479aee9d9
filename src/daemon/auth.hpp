// zeusd's authentication and authorisation: API groups, HS256 JWTs and the middleware decision
// that runs before routing.
//
// Wire contract: docs zeusd-wire-protocol.md §2 and zeus-reference.md §7.3.
// - A token is a compact HS256 JWT: base64url(header) "." base64url(claims) "." base64url(HMAC),
//   no padding. Header {"typ":"JWT","alg":"HS256"}; claims {"sub": str, "scopes": [group, ...],
//   "exp": unix seconds (optional)}. Any other "alg" (notably "none") is refused.
// - The middleware checks, in order: a disabled API group (404), auth disabled (only /auth/* is
//   404), then for every path but /discover and /time a bearer token (401), then the path's scope
//   (403). authorize() is that decision as a pure function; the HTTP layer only copies its status,
//   body and headers into the response.
//
// Its sources, one job each: auth_policy.cpp is the access policy (API groups, the path's group,
// the middleware decision); jwt.cpp is the HS256 JWT codec (HMAC, issuing and verifying tokens;
// base64url is common/base64.hpp's). The signing key and its file are key_file.hpp's, the
// `zeusd token issue` command token_command.hpp's. Everything here is in zeus::daemon::auth; the
// daemon (daemon/daemon.hpp) uses its ApiGroup, and has its own, HTTP-facing AuthResult.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/key_file.hpp"

namespace zeus::daemon::auth {

// ---- API groups (= JWT scopes) ----

enum class ApiGroup { kGpuControl, kGpuRead, kCpuRead };

// "gpu-control", "gpu-read", "cpu-read".
std::string_view api_group_name(ApiGroup group);
// The group named `name`, or nullopt when it is not one of the three names above (exact match).
std::optional<ApiGroup> parse_api_group(std::string_view name);
// Parses a comma-separated list such as "gpu-control,gpu-read" (for --enable and --scopes).
// Duplicates are dropped, the first occurrence's order is kept. Throws zeus::Error
// (kInvalidArgument) on an empty list, an empty item or an unknown name, naming the valid ones.
std::vector<ApiGroup> parse_api_group_list(std::string_view comma_separated);
// "gpu-control, gpu-read, cpu-read": the valid names, for error messages.
std::string api_group_names();

// The group a request path belongs to: /gpu/set_* and /gpu/reset_* -> gpu-control, any other
// /gpu/* -> gpu-read, /cpu/* -> cpu-read; nullopt for everything else (/discover, /time,
// /auth/*, unknown paths). `path` is the decoded path the router matches, without the query.
std::optional<ApiGroup> required_group(std::string_view path);

// ---- Crypto primitives (jwt.cpp, with the tokens) ----
// (Tokens are encoded with zeus::base64url_encode/decode, common/base64.hpp, unpadded, and
// signatures compared with zeus::text::constant_time_equal, common/text.hpp.)

// HMAC-SHA256 of `message` under `key`: 32 raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);

// ---- Tokens ----

struct TokenClaims {
  std::string sub;
  std::vector<ApiGroup> scopes;
  std::optional<std::int64_t> exp_s;  // unix seconds; absent: the token never expires

  bool has_scope(ApiGroup group) const;
};

// The JSON of the claims, {"sub":...,"scopes":[...],"exp":N} with "exp" left out when absent:
// the token's payload and GET /auth/whoami's body.
std::string claims_json(const TokenClaims& claims);

// Signs a token. Throws zeus::Error (kInvalidArgument) on an empty `sub` or a negative expiry.
std::string issue_token(const SigningKey& key, const std::string& sub,
                        const std::vector<ApiGroup>& scopes,
                        std::optional<std::int64_t> exp_s = std::nullopt);

enum class TokenStatus { kValid, kInvalid, kExpired };

struct TokenCheck {
  TokenStatus status = TokenStatus::kInvalid;
  // kInvalid: why, worded like the reference's jsonwebtoken errors ("InvalidSignature",
  // "InvalidToken", "InvalidAlgorithm", "Base64 error: ...", "JSON error: ...").
  std::string error;
  TokenClaims claims;  // filled when kValid
};

// The reference's validation leeway (jsonwebtoken's default): a token stays valid until
// exp + leeway.
inline constexpr std::int64_t kDefaultExpiryLeewayS = 60;

// Verifies `token` the way the reference does, in its order: shape (3 parts), header (base64,
// JSON, alg == "HS256"), signature (constant time), claims (base64, JSON, types, known scopes),
// then expiry against `now_s`. A tampered payload is therefore an InvalidSignature.
TokenCheck verify_token(const SigningKey& key, std::string_view token, std::int64_t now_s,
                        std::int64_t expiry_leeway_s = kDefaultExpiryLeewayS);

// ---- The middleware decision ----

struct AuthConfig {
  std::vector<ApiGroup> enabled_groups;   // --enable
  std::optional<SigningKey> signing_key;  // --signing-key-path; absent: auth disabled
  std::int64_t expiry_leeway_s = kDefaultExpiryLeewayS;

  bool group_enabled(ApiGroup group) const;
  bool auth_required() const { return signing_key.has_value(); }
};

struct AuthResult {
  bool allowed = false;
  int status = 200;           // when refused: 404, 401 or 403
  std::string body;           // when refused: the JSON {"error":"..."} the reference sends
  std::string error_message;  // when refused: the "error" text alone (body is its JSON)
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. WWW-Authenticate on 401
  // Set when a valid token came with the request (auth enabled and allowed): for logs (sub) and
  // for GET /auth/whoami (claims_json).
  std::optional<std::string> sub;
  std::optional<TokenClaims> claims;
};

inline constexpr std::string_view kWwwAuthenticateValue = "Bearer realm=\"zeusd\"";

// Decides whether a request may reach the router, exactly in the order of the wire protocol §2.
// `path` is the decoded path without the query string; `authorization_header` is the raw
// Authorization header value, if any.
AuthResult authorize(const AuthConfig& config, const std::string& path,
                     const std::optional<std::string>& authorization_header, std::int64_t now_s);

}  // namespace zeus::daemon::auth
