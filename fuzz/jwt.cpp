// zeusd's authentication (daemon/auth.hpp) on hostile input, with a fixed test key. The
// first byte picks what the rest is:
//   0: a token as sent                         -> verify_token
//   1: header JSON '\n' claims JSON, signed here -> verify_token past the signature check, so
//      that the claim and scope parsing is reached
//   2: path '\n' claims JSON, signed here      -> authorize() under three configurations
//   3: text                                    -> base64url, API group lists, durations, paths
// Random bytes never carry a valid HMAC, so modes 1 and 2 sign what the fuzzer wrote.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.hpp"
#include "common/text.hpp"
#include "daemon/auth.hpp"
#include "daemon/token_command.hpp"
#include "fuzz_check.hpp"
#include "zeus/common/error.hpp"

namespace {

namespace auth = zeus::daemon::auth;
using nlohmann::json;
using zeus::base64url_decode;
using zeus::base64url_encode;

constexpr std::int64_t kNow = 1'700'000'000;
constexpr std::string_view kHeader = R"({"typ":"JWT","alg":"HS256"})";

const auth::SigningKey& key() {
  static const auth::SigningKey key("zeus-fuzz-signing-key-0123456789abcdef");
  return key;
}

std::string sign(std::string_view header, std::string_view claims) {
  const std::string input = base64url_encode(header) + "." + base64url_encode(claims);
  return input + "." + base64url_encode(auth::hmac_sha256(key().bytes(), input));
}

// Splits at the first '\n'; without one, `first` is empty.
std::pair<std::string_view, std::string_view> split(std::string_view text) {
  const std::size_t newline = text.find('\n');
  if (newline == std::string_view::npos) {
    return {std::string_view(), text};
  }
  return {text.substr(0, newline), text.substr(newline + 1)};
}

bool same_claims(const auth::TokenClaims& a, const auth::TokenClaims& b) {
  return a.sub == b.sub && a.scopes == b.scopes && a.exp_s == b.exp_s;
}

// What holds for every verification of `token`.
void check_verified(std::string_view token, const auth::TokenCheck& check) {
  if (check.status == auth::TokenStatus::kInvalid) {
    ZEUS_FUZZ_CHECK(!check.error.empty());
    return;
  }
  if (check.status == auth::TokenStatus::kExpired) {
    ZEUS_FUZZ_CHECK(check.error == "ExpiredSignature");
    return;
  }
  // Valid: the signature is the HMAC of the first two parts, under our key.
  const std::size_t last_dot = token.rfind('.');
  ZEUS_FUZZ_CHECK(last_dot != std::string_view::npos);
  const auto signature = base64url_decode(token.substr(last_dot + 1));
  ZEUS_FUZZ_CHECK(signature.has_value() &&
                  *signature == auth::hmac_sha256(key().bytes(), token.substr(0, last_dot)));
  const auth::TokenClaims& claims = check.claims;
  ZEUS_FUZZ_CHECK(!claims.exp_s || *claims.exp_s >= kNow - auth::kDefaultExpiryLeewayS);
  // The claims read back from their own JSON, and from a token issued for them.
  const json reread = json::parse(auth::claims_json(claims));
  ZEUS_FUZZ_CHECK(reread.at("sub") == claims.sub);
  ZEUS_FUZZ_CHECK(reread.at("scopes").size() == claims.scopes.size());
  if (!claims.sub.empty()) {
    const std::string issued = auth::issue_token(key(), claims.sub, claims.scopes, claims.exp_s);
    const auth::TokenCheck again = auth::verify_token(key(), issued, kNow);
    ZEUS_FUZZ_CHECK(again.status == auth::TokenStatus::kValid);
    ZEUS_FUZZ_CHECK(same_claims(again.claims, claims));
  }
  // Any change to the signature makes it invalid.
  std::string tampered(token);
  tampered.back() = tampered.back() == 'A' ? 'B' : 'A';
  ZEUS_FUZZ_CHECK(auth::verify_token(key(), tampered, kNow).status == auth::TokenStatus::kInvalid);
}

void fuzz_token(std::string_view token) {
  check_verified(token, auth::verify_token(key(), token, kNow));
}

void fuzz_signed(std::string_view text) {
  auto [header, claims] = split(text);
  if (header.empty()) {
    header = kHeader;
  }
  const std::string token = sign(header, claims);
  const auth::TokenCheck check = auth::verify_token(key(), token, kNow);
  check_verified(token, check);
  const json parsed = json::parse(header, nullptr, false);
  if (parsed.is_object() && parsed.contains("alg") && parsed["alg"] == "HS256") {
    ZEUS_FUZZ_CHECK(check.error != "InvalidSignature");
    ZEUS_FUZZ_CHECK(check.error != "InvalidAlgorithm");
  }
}

void check_decision(const auth::AuthResult& result) {
  if (result.allowed) {
    ZEUS_FUZZ_CHECK(result.status == 200);
    return;
  }
  ZEUS_FUZZ_CHECK(result.status == 401 || result.status == 403 || result.status == 404);
  ZEUS_FUZZ_CHECK(!result.error_message.empty());
  const json body = json::parse(result.body);  // always JSON text
  ZEUS_FUZZ_CHECK(body.at("error") == result.error_message);
  bool challenge = false;
  for (const auto& [name, value] : result.headers) {
    challenge = challenge || (name == "WWW-Authenticate" && value == auth::kWwwAuthenticateValue);
  }
  ZEUS_FUZZ_CHECK(challenge == (result.status == 401));
}

void fuzz_authorize(std::string_view text) {
  const auto [path, claims] = split(text);
  const std::string path_text(path);
  const std::optional<std::string> bearer = "Bearer " + sign(kHeader, claims);
  const std::optional<std::string> raw = std::string(claims);

  auth::AuthConfig all;
  all.enabled_groups = {auth::ApiGroup::kGpuControl, auth::ApiGroup::kGpuRead,
                        auth::ApiGroup::kCpuRead};
  all.signing_key = key();
  auth::AuthConfig read_only;
  read_only.enabled_groups = {auth::ApiGroup::kGpuRead};
  read_only.signing_key = key();
  auth::AuthConfig open;  // auth disabled
  open.enabled_groups = all.enabled_groups;

  const auto group = auth::required_group(path_text);
  for (const auth::AuthConfig* config : {&all, &read_only, &open}) {
    for (const auto& header : {bearer, raw, std::optional<std::string>()}) {
      const auth::AuthResult result = auth::authorize(*config, path_text, header, kNow);
      check_decision(result);
      if (group && !config->group_enabled(*group)) {
        ZEUS_FUZZ_CHECK(result.status == 404);
      }
      if (result.allowed && config->auth_required() && path_text != "/discover" &&
          path_text != "/time") {
        ZEUS_FUZZ_CHECK(result.claims.has_value());
        ZEUS_FUZZ_CHECK(!group || result.claims->has_scope(*group));
      }
    }
  }
}

void fuzz_text(std::string_view text) {
  // Exactly one encoding per byte string.
  const std::string encoded = base64url_encode(text);
  ZEUS_FUZZ_CHECK(base64url_decode(encoded) == std::string(text));
  if (const auto decoded = base64url_decode(text)) {
    ZEUS_FUZZ_CHECK(base64url_encode(*decoded) == text);
  }
  const auto [a, b] = split(text);
  ZEUS_FUZZ_CHECK(zeus::text::constant_time_equal(a, b) == (a == b));

  try {
    const std::vector<auth::ApiGroup> groups = auth::parse_api_group_list(text);
    ZEUS_FUZZ_CHECK(!groups.empty() && groups.size() <= 3);
    for (const auth::ApiGroup group : groups) {
      ZEUS_FUZZ_CHECK(auth::parse_api_group(auth::api_group_name(group)) == group);
    }
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
  }
  try {
    const std::int64_t seconds = auth::parse_duration_s(text);
    ZEUS_FUZZ_CHECK(seconds > 0 && seconds <= std::int64_t{100} * 365 * 86400);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
  }
  if (auth::required_group(text)) {
    ZEUS_FUZZ_CHECK(text.starts_with("/gpu/") || text.starts_with("/cpu/"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      fuzz_token(rest);
      break;
    case 1:
      fuzz_signed(rest);
      break;
    case 2:
      fuzz_authorize(rest);
      break;
    default:
      fuzz_text(rest);
      break;
  }
  return 0;
}
