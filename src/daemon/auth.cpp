#include "daemon/auth.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using nlohmann::json;

constexpr std::array<ApiGroup, 3> kAllGroups = {ApiGroup::kGpuControl, ApiGroup::kGpuRead,
                                                ApiGroup::kCpuRead};

constexpr std::string_view kBase64UrlAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// The fixed header the reference's `zeusd token issue` writes (serde field order of
// jsonwebtoken::Header with only typ and alg set).
constexpr std::string_view kTokenHeaderJson = R"({"typ":"JWT","alg":"HS256"})";

std::string valid_group_names() {
  std::string names;
  for (ApiGroup group : kAllGroups) {
    if (!names.empty())
      names += ", ";
    names += api_group_name(group);
  }
  return names;
}

// Compact JSON like serde_json; invalid UTF-8 (impossible for parsed input) is replaced rather
// than thrown.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_body(const std::string& message) {
  return dump(json{{"error", message}});
}

AuthResult refuse(int status, const std::string& message, bool www_authenticate) {
  AuthResult result;
  result.allowed = false;
  result.status = status;
  result.body = error_body(message);
  result.error_message = message;
  if (www_authenticate) {
    result.headers.emplace_back("WWW-Authenticate", std::string(kWwwAuthenticateValue));
  }
  return result;
}

AuthResult allow() {
  AuthResult result;
  result.allowed = true;
  result.status = 200;
  return result;
}

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
    if (dot == std::string_view::npos)
      return std::nullopt;
    parts[i] = token.substr(start, dot - start);
    start = dot + 1;
  }
  parts[2] = token.substr(start);
  if (parts[2].find('.') != std::string_view::npos)
    return std::nullopt;
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
              "', expected one of: " + valid_group_names();
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

std::string scope_list_python_style(const std::vector<ApiGroup>& scopes) {
  std::string text = "[";
  for (std::size_t i = 0; i < scopes.size(); ++i) {
    if (i > 0)
      text += ", ";
    text += "'";
    text += api_group_name(scopes[i]);
    text += "'";
  }
  text += "]";
  return text;
}

std::string strip_trailing_line_endings(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  return text;
}

std::string mode_octal(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

std::int64_t system_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ---- API groups ----

std::string_view api_group_name(ApiGroup group) {
  switch (group) {
    case ApiGroup::kGpuControl:
      return "gpu-control";
    case ApiGroup::kGpuRead:
      return "gpu-read";
    case ApiGroup::kCpuRead:
      return "cpu-read";
  }
  return "unknown";
}

std::optional<ApiGroup> parse_api_group(std::string_view name) {
  for (ApiGroup group : kAllGroups) {
    if (api_group_name(group) == name)
      return group;
  }
  return std::nullopt;
}

std::vector<ApiGroup> parse_api_group_list(std::string_view comma_separated) {
  if (comma_separated.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the list of API groups is empty; give one or more of: " + valid_group_names());
  }
  std::vector<ApiGroup> groups;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = comma_separated.find(',', start);
    std::string_view item = comma_separated.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the list of API groups '" + std::string(comma_separated) +
                      "' has an empty item; separate names with single commas, no spaces");
    }
    std::optional<ApiGroup> group = parse_api_group(item);
    if (!group) {
      throw Error(ErrorKind::kInvalidArgument, "unknown API group '" + std::string(item) +
                                                   "'; valid groups are: " + valid_group_names());
    }
    bool seen = false;
    for (ApiGroup existing : groups)
      seen = seen || existing == *group;
    if (!seen)
      groups.push_back(*group);
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return groups;
}

std::optional<ApiGroup> required_group(std::string_view path) {
  if (path.starts_with("/gpu/set_") || path.starts_with("/gpu/reset_")) {
    return ApiGroup::kGpuControl;
  }
  if (path.starts_with("/gpu/"))
    return ApiGroup::kGpuRead;
  if (path.starts_with("/cpu/"))
    return ApiGroup::kCpuRead;
  return std::nullopt;
}

// ---- Encoding and crypto primitives ----

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kBase64UrlAlphabet[(v >> 18) & 63];
    out += kBase64UrlAlphabet[(v >> 12) & 63];
    out += kBase64UrlAlphabet[(v >> 6) & 63];
    out += kBase64UrlAlphabet[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = byte(i) << 16;
    out += kBase64UrlAlphabet[(v >> 18) & 63];
    out += kBase64UrlAlphabet[(v >> 12) & 63];
  } else if (rest == 2) {
    std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kBase64UrlAlphabet[(v >> 18) & 63];
    out += kBase64UrlAlphabet[(v >> 12) & 63];
    out += kBase64UrlAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1)
    return std::nullopt;
  auto value_of = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '-')
      return 62;
    if (c == '_')
      return 63;
    return -1;
  };
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t accumulator = 0;
  int bits = 0;
  for (char c : text) {
    int v = value_of(c);
    if (v < 0)
      return std::nullopt;
    accumulator = (accumulator << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((accumulator >> bits) & 0xFF);
    }
  }
  // Leftover bits (2 or 4) must be zero, or a second encoding of the same bytes would exist.
  if (bits > 0 && (accumulator & ((1u << bits) - 1)) != 0)
    return std::nullopt;
  return out;
}

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

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  if (a.empty())
    return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- The signing key ----

SigningKey::SigningKey(std::string bytes) : bytes_(std::move(bytes)) {
  if (bytes_.size() < kMinSigningKeyBytes) {
    std::size_t size = bytes_.size();
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key is " + std::to_string(size) + " bytes; HS256 needs at least " +
                    std::to_string(kMinSigningKeyBytes) +
                    " (make one with `(umask 077; openssl rand -base64 48 > KEYFILE)`)");
  }
}

SigningKey::~SigningKey() {
  if (!bytes_.empty())
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

SigningKey load_signing_key(const std::filesystem::path& path) {
  const std::string name = path.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int error = errno;
    ErrorKind kind = error == ENOENT   ? ErrorKind::kNotFound
                     : error == EACCES ? ErrorKind::kNoPermission
                                       : ErrorKind::kIo;
    throw Error(kind, "cannot open the signing key file " + name + ": " + std::strerror(error) +
                          " (check --signing-key-path)");
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  // Checked on the open descriptor, so the file cannot be swapped between check and read.
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    throw Error(ErrorKind::kIo,
                "cannot stat the signing key file " + name + ": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(ErrorKind::kInvalidArgument, "the signing key path " + name +
                                                 " is not a regular file; point " +
                                                 "--signing-key-path at the key file");
  }
  if ((info.st_mode & 077) != 0) {
    throw Error(ErrorKind::kNoPermission,
                "the signing key file " + name + " has mode " + mode_octal(info.st_mode) +
                    ", so group or others can access it; anyone who reads it can mint tokens. " +
                    "Run `chmod 600 " + name + "`");
  }
  if (info.st_uid != 0 && info.st_uid != ::geteuid()) {
    throw Error(ErrorKind::kNoPermission,
                "the signing key file " + name + " is owned by uid " + std::to_string(info.st_uid) +
                    ", neither root nor this user (uid " + std::to_string(::geteuid()) +
                    "); run `chown root " + name + "`");
  }

  std::string contents;
  std::array<char, 4096> buffer{};
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int error = errno;
      OPENSSL_cleanse(contents.data(), contents.size());
      throw Error(ErrorKind::kIo,
                  "cannot read the signing key file " + name + ": " + std::strerror(error));
    }
    if (n == 0)
      break;
    contents.append(buffer.data(), static_cast<std::size_t>(n));
    if (contents.size() > (1u << 20)) {
      OPENSSL_cleanse(contents.data(), contents.size());
      OPENSSL_cleanse(buffer.data(), buffer.size());
      throw Error(ErrorKind::kInvalidArgument,
                  "the signing key file " + name + " is larger than 1 MiB; is this the key?");
    }
  }
  OPENSSL_cleanse(buffer.data(), buffer.size());

  std::string key = strip_trailing_line_endings(std::move(contents));
  if (key.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key file " + name + " is empty; write a secret of at least " +
                    std::to_string(kMinSigningKeyBytes) +
                    " bytes, e.g. `(umask 077; openssl rand -base64 48 > " + name + ")`");
  }
  if (key.size() < kMinSigningKeyBytes) {
    std::size_t size = key.size();
    OPENSSL_cleanse(key.data(), key.size());
    throw Error(ErrorKind::kInvalidArgument,
                "the signing key in " + name + " is " + std::to_string(size) +
                    " bytes; HS256 needs at least " + std::to_string(kMinSigningKeyBytes) +
                    ". Make a new one with `(umask 077; openssl rand -base64 48 > " + name +
                    ")` and issue new tokens");
  }
  return SigningKey(std::move(key));
}

// ---- Tokens ----

bool TokenClaims::has_scope(ApiGroup group) const {
  for (ApiGroup scope : scopes) {
    if (scope == group)
      return true;
  }
  return false;
}

std::string claims_json(const TokenClaims& claims) {
  // Field order as the reference serialises them: sub, scopes, exp.
  json scopes = json::array();
  for (ApiGroup scope : claims.scopes)
    scopes.push_back(std::string(api_group_name(scope)));
  nlohmann::ordered_json object;
  object["sub"] = claims.sub;
  object["scopes"] = scopes;
  if (claims.exp_s)
    object["exp"] = *claims.exp_s;
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
  if (!parts)
    return invalid("InvalidToken");
  const auto& [header_part, payload_part, signature_part] = *parts;

  std::string error;
  std::optional<json> header = decode_json_part(header_part, "header", error);
  if (!header)
    return invalid(error);
  auto alg = header->find("alg");
  if (alg == header->end())
    return invalid("JSON error: missing field `alg`");
  if (!alg->is_string() || alg->get<std::string>() != "HS256")
    return invalid("InvalidAlgorithm");

  std::optional<std::string> signature = base64url_decode(signature_part);
  if (!signature)
    return invalid("Base64 error: the signature is not valid unpadded base64url");
  std::string signing_input = std::string(header_part) + "." + std::string(payload_part);
  if (!constant_time_equal(hmac_sha256(key.bytes(), signing_input), *signature)) {
    return invalid("InvalidSignature");
  }

  std::optional<json> payload = decode_json_part(payload_part, "payload", error);
  if (!payload)
    return invalid(error);
  std::optional<TokenClaims> claims = parse_claims(*payload, error);
  if (!claims)
    return invalid(error);

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

// ---- The middleware decision ----

bool AuthConfig::group_enabled(ApiGroup group) const {
  for (ApiGroup enabled : enabled_groups) {
    if (enabled == group)
      return true;
  }
  return false;
}

AuthResult authorize(const AuthConfig& config, const std::string& path,
                     const std::optional<std::string>& authorization_header, std::int64_t now_s) {
  const std::optional<ApiGroup> group = required_group(path);

  // 1. A disabled group is 404 whatever the auth state.
  if (group && !config.group_enabled(*group)) {
    return refuse(
        404,
        "API group '" + std::string(api_group_name(*group)) + "' is not enabled on this server.",
        false);
  }

  // 2. Auth disabled: /auth/* does not exist, everything else passes.
  if (!config.signing_key) {
    if (path.starts_with("/auth/")) {
      return refuse(404, "Authentication is not enabled on this server.", false);
    }
    return allow();
  }

  // 3. Auth enabled.
  if (path == "/discover" || path == "/time")
    return allow();

  constexpr std::string_view kBearerPrefix = "Bearer ";
  if (!authorization_header || !authorization_header->starts_with(kBearerPrefix)) {
    return refuse(401, "Authentication required. Provide an Authorization: Bearer <token> header.",
                  true);
  }
  std::string_view token = std::string_view(*authorization_header).substr(kBearerPrefix.size());

  TokenCheck check = verify_token(*config.signing_key, token, now_s, config.expiry_leeway_s);
  if (check.status == TokenStatus::kExpired)
    return refuse(401, "Token has expired.", true);
  if (check.status != TokenStatus::kValid) {
    return refuse(401, "Invalid token: " + check.error, true);
  }

  if (group && !check.claims.has_scope(*group)) {
    return refuse(403,
                  "Token for user '" + check.claims.sub + "' lacks required scope '" +
                      std::string(api_group_name(*group)) +
                      "'. Token scopes: " + scope_list_python_style(check.claims.scopes),
                  false);
  }

  AuthResult result = allow();
  result.sub = check.claims.sub;
  result.claims = std::move(check.claims);
  return result;
}

// ---- `zeusd token issue` ----

std::int64_t parse_duration_s(std::string_view text) {
  auto fail = [&]() -> Error {
    return Error(ErrorKind::kInvalidArgument,
                 "invalid duration '" + std::string(text) +
                     "'; use a positive integer with an optional unit s, m, h or d, e.g. 3600, "
                     "30m, 1h, 7d");
  };
  if (text.empty())
    throw fail();
  std::int64_t unit_s = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 's':
      unit_s = 1;
      digits.remove_suffix(1);
      break;
    case 'm':
      unit_s = 60;
      digits.remove_suffix(1);
      break;
    case 'h':
      unit_s = 3600;
      digits.remove_suffix(1);
      break;
    case 'd':
      unit_s = 86400;
      digits.remove_suffix(1);
      break;
    default:
      break;
  }
  if (digits.empty())
    throw fail();
  for (char c : digits) {
    if (c < '0' || c > '9')
      throw fail();
  }
  std::int64_t count = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (ec != std::errc() || end != digits.data() + digits.size() || count <= 0)
    throw fail();
  // Cap at 100 years: anything longer is a typo, and it keeps now + duration from overflowing.
  constexpr std::int64_t kMaxDurationS = std::int64_t{100} * 365 * 86400;
  if (count > kMaxDurationS / unit_s) {
    throw Error(ErrorKind::kInvalidArgument,
                "duration '" + std::string(text) + "' is longer than 100 years");
  }
  return count * unit_s;
}

int run_token_issue(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                    std::int64_t now_s) {
  CLI::App app{"Issue an HS256 token for zeusd (printed to stdout)", "zeusd token issue"};
  std::string key_path;
  std::string sub;
  std::string scopes_text;
  std::string expires_in;
  app.add_option("--signing-key-path", key_path,
                 "The key file zeusd serve uses (mode 0600, at least 32 bytes)")
      ->required();
  app.add_option("--sub", sub, "Who the token is for (logged with every request)")->required();
  app.add_option("--scopes", scopes_text,
                 "Comma-separated API groups the token may use: gpu-control, gpu-read, cpu-read")
      ->required();
  app.add_option("--expires-in", expires_in,
                 "Lifetime such as 3600, 30m, 1h or 7d; omitted: the token never expires");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }

  try {
    if (sub.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "--sub must not be empty");
    }
    std::vector<ApiGroup> scopes = parse_api_group_list(scopes_text);
    std::optional<std::int64_t> exp_s;
    if (!expires_in.empty())
      exp_s = now_s + parse_duration_s(expires_in);
    SigningKey key = load_signing_key(key_path);
    out << issue_token(key, sub, scopes, exp_s) << '\n';
    return 0;
  } catch (const Error& e) {
    err << "zeusd token issue: " << e.what() << '\n';
    return 2;
  }
}

int run_token_issue(int argc, const char* const* argv) {
  return run_token_issue(argc, argv, std::cout, std::cerr, system_now_s());
}

}  // namespace zeus::daemon::auth
