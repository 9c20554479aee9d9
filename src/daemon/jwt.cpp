// HS256 JWTs for zeusd: HMAC-SHA256, and token issuing and verification in the reference's order
// (base64url and the constant-time compare are common's: common/base64.hpp, common/text.hpp).
// The policy that uses them (scopes, the middleware decision) is in auth_policy.cpp, the key in
// key_file.cpp.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/base64.hpp"
#include "common/text.hpp"
#include "daemon/auth.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using nlohmann::json;

// The fixed header the reference's `zeusd token issue` writes (serde field order of
// jsonwebtoken::Header with only typ and alg set).
constexpr std::string_view kTokenHeaderJson = R"({"typ":"JWT","alg":"HS256"})";

TokenCheck invalid(std::string error) {
  TokenCheck check;
  check.status = TokenStatus::kInvalid;
  check.error = std::move(error);
  return check;
}

// Splits "a.b.c" into exactly three parts; nullopt for any other count.
std::optional<std::array<std::string_view, 3>> split_token(std::string_view token) {
  std::array<std::string_view, 3> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    std::size_t dot = token.find('.', start);
    if (dot == std::string_view::npos) {
      return std::nullopt;
    }
    parts[i] = token.substr(start, dot - start);
    start = dot + 1;
  }
  parts[2] = token.substr(start);
  if (parts[2].find('.') != std::string_view::npos) {
    return std::nullopt;
  }
  return parts;
}

// Parses a base64url JSON object part of a token; on failure fills `error` the way
// jsonwebtoken words it.
std::optional<json> decode_json_part(std::string_view part, std::string_view what,
                                     std::string& error) {
  std::optional<std::string> raw = base64url_decode(part);
  if (!raw) {
    error = "Base64 error: the " + std::string(what) + " is not valid unpadded base64url";
    return std::nullopt;
  }
  json value = json::parse(*raw, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    error = "JSON error: the " + std::string(what) + " is not valid JSON";
    return std::nullopt;
  }
  if (!value.is_object()) {
    error = "JSON error: the " + std::string(what) + " is not a JSON object";
    return std::nullopt;
  }
  return value;
}

// Claims from the verified payload; on failure fills `error` ("JSON error: ...").
std::optional<TokenClaims> parse_claims(const json& payload, std::string& error) {
  TokenClaims claims;
  auto sub = payload.find("sub");
  if (sub == payload.end()) {
    error = "JSON error: missing field `sub`";
    return std::nullopt;
  }
  if (!sub->is_string()) {
    error = "JSON error: `sub` must be a string";
    return std::nullopt;
  }
  claims.sub = sub->get<std::string>();

  auto scopes = payload.find("scopes");
  if (scopes == payload.end()) {
    error = "JSON error: missing field `scopes`";
    return std::nullopt;
  }
  if (!scopes->is_array()) {
    error = "JSON error: `scopes` must be an array of strings";
    return std::nullopt;
  }
  for (const json& scope : *scopes) {
    if (!scope.is_string()) {
      error = "JSON error: `scopes` must be an array of strings";
      return std::nullopt;
    }
    std::optional<ApiGroup> group = parse_api_group(scope.get<std::string>());
    if (!group) {
      error = "JSON error: unknown scope '" + scope.get<std::string>() +
              "', expected one of: " + api_group_names();
      return std::nullopt;
    }
    claims.scopes.push_back(*group);
  }

  auto exp = payload.find("exp");
  if (exp != payload.end() && !exp->is_null()) {
    if (exp->is_number_unsigned()) {
      std::uint64_t value = exp->get<std::uint64_t>();
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        error = "JSON error: `exp` is out of range";
        return std::nullopt;
      }
      claims.exp_s = static_cast<std::int64_t>(value);
    } else {  // negative, fractional, or not a number
      error = "JSON error: `exp` must be a non-negative integer (unix seconds)";
      return std::nullopt;
    }
  }
  return claims;
}

}  // namespace

// ---- Crypto primitives ----

std::string hmac_sha256(std::string_view key, std::string_view message) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_len = 0;
  if (key.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorKind::kInvalidArgument, "HMAC key is too long");
  }
  unsigned char* result = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                               reinterpret_cast<const unsigned char*>(message.data()),
                               message.size(), digest.data(), &digest_len);
  if (result == nullptr) {
    throw Error(ErrorKind::kUnknown, "OpenSSL HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<const char*>(digest.data()), digest_len);
}

// ---- Tokens ----

bool TokenClaims::has_scope(ApiGroup group) const {
  for (ApiGroup scope : scopes) {
    if (scope == group) {
      return true;
    }
  }
  return false;
}

std::string claims_json(const TokenClaims& claims) {
  // Field order as the reference serialises them: sub, scopes, exp.
  json scopes = json::array();
  for (ApiGroup scope : claims.scopes) {
    scopes.push_back(std::string(api_group_name(scope)));
  }
  nlohmann::ordered_json object;
  object["sub"] = claims.sub;
  object["scopes"] = scopes;
  if (claims.exp_s) {
    object["exp"] = *claims.exp_s;
  }
  return object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string issue_token(const SigningKey& key, const std::string& sub,
                        const std::vector<ApiGroup>& scopes, std::optional<std::int64_t> exp_s) {
  if (sub.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "the token's subject (--sub) must not be empty");
  }
  if (exp_s && *exp_s < 0) {
    throw Error(ErrorKind::kInvalidArgument, "the token's expiry must be a unix time >= 0");
  }
  TokenClaims claims{sub, scopes, exp_s};
  std::string signing_input =
      base64url_encode(kTokenHeaderJson) + "." + base64url_encode(claims_json(claims));
  std::string signature = hmac_sha256(key.bytes(), signing_input);
  return signing_input + "." + base64url_encode(signature);
}

TokenCheck verify_token(const SigningKey& key, std::string_view token, std::int64_t now_s,
                        std::int64_t expiry_leeway_s) {
  std::optional<std::array<std::string_view, 3>> parts = split_token(token);
  if (!parts) {
    return invalid("InvalidToken");
  }
  const auto& [header_part, payload_part, signature_part] = *parts;

  std::string error;
  std::optional<json> header = decode_json_part(header_part, "header", error);
  if (!header) {
    return invalid(error);
  }
  auto alg = header->find("alg");
  if (alg == header->end()) {
    return invalid("JSON error: missing field `alg`");
  }
  if (!alg->is_string() || alg->get<std::string>() != "HS256") {
    return invalid("InvalidAlgorithm");
  }

  std::optional<std::string> signature = base64url_decode(signature_part);
  if (!signature) {
    return invalid("Base64 error: the signature is not valid unpadded base64url");
  }
  std::string signing_input = std::string(header_part) + "." + std::string(payload_part);
  if (!text::constant_time_equal(*signature, hmac_sha256(key.bytes(), signing_input))) {
    return invalid("InvalidSignature");
  }

  std::optional<json> payload = decode_json_part(payload_part, "payload", error);
  if (!payload) {
    return invalid(error);
  }
  std::optional<TokenClaims> claims = parse_claims(*payload, error);
  if (!claims) {
    return invalid(error);
  }

  TokenCheck check;
  if (claims->exp_s && *claims->exp_s < now_s - expiry_leeway_s) {
    check.status = TokenStatus::kExpired;
    check.error = "ExpiredSignature";
    return check;
  }
  check.status = TokenStatus::kValid;
  check.claims = std::move(*claims);
  return check;
}

}  // namespace zeus::daemon::auth
