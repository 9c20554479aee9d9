#include "daemon/auth.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/duration.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon::auth {
namespace {

using nlohmann::json;

constexpr std::array<ApiGroup, 3> kAllGroups = {ApiGroup::kGpuControl, ApiGroup::kGpuRead,
                                                ApiGroup::kCpuRead};

}  // namespace

std::string api_group_names() {
  std::string names;
  for (ApiGroup group : kAllGroups) {
    if (!names.empty()) {
      names += ", ";
    }
    names += api_group_name(group);
  }
  return names;
}

namespace {

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

std::string scope_list_python_style(const std::vector<ApiGroup>& scopes) {
  std::string text = "[";
  for (std::size_t i = 0; i < scopes.size(); ++i) {
    if (i > 0) {
      text += ", ";
    }
    text += "'";
    text += api_group_name(scopes[i]);
    text += "'";
  }
  text += "]";
  return text;
}

std::string strip_trailing_line_endings(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

std::string mode_octal(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
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
    if (api_group_name(group) == name) {
      return group;
    }
  }
  return std::nullopt;
}

std::vector<ApiGroup> parse_api_group_list(std::string_view comma_separated) {
  if (comma_separated.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the list of API groups is empty; give one or more of: " + api_group_names());
  }
  std::vector<ApiGroup> groups;
  for (const std::string_view item : text::split(comma_separated, ',')) {
    if (item.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the list of API groups '" + std::string(comma_separated) +
                      "' has an empty item; separate names with single commas, no spaces");
    }
    std::optional<ApiGroup> group = parse_api_group(item);
    if (!group) {
      throw Error(ErrorKind::kInvalidArgument, "unknown API group '" + std::string(item) +
                                                   "'; valid groups are: " + api_group_names());
    }
    if (std::find(groups.begin(), groups.end(), *group) == groups.end()) {
      groups.push_back(*group);
    }
  }
  return groups;
}

std::optional<ApiGroup> required_group(std::string_view path) {
  if (path.starts_with("/gpu/set_") || path.starts_with("/gpu/reset_")) {
    return ApiGroup::kGpuControl;
  }
  if (path.starts_with("/gpu/")) {
    return ApiGroup::kGpuRead;
  }
  if (path.starts_with("/cpu/")) {
    return ApiGroup::kCpuRead;
  }
  return std::nullopt;
}

// ---- The signing key ----

SigningKey::SigningKey(std::string bytes, AnyLength) : bytes_(std::move(bytes)) {}

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
  if (!bytes_.empty()) {
    OPENSSL_cleanse(bytes_.data(), bytes_.size());
  }
}

SigningKey load_signing_key(const std::filesystem::path& path, bool reference_rules) {
  const std::string name = path.string();
  // O_NONBLOCK: a FIFO given as the key must be refused below, not wait for a writer forever.
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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
  // Under the reference's rules these are warnings (--allow-weak-signing-key).
  const auto refuse_or_warn = [&](ErrorKind kind, const std::string& message) {
    if (!reference_rules) {
      throw Error(kind, message);
    }
    log().warn("zeusd: {} (accepted: --allow-weak-signing-key)", message);
  };
  if ((info.st_mode & 077) != 0) {
    refuse_or_warn(ErrorKind::kNoPermission,
                   "the signing key file " + name + " has mode " + mode_octal(info.st_mode) +
                       ", so group or others can access it; anyone who reads it can mint "
                       "tokens. Run `chmod 600 " +
                       name + "`");
  }
  if (info.st_uid != 0 && info.st_uid != ::geteuid()) {
    refuse_or_warn(ErrorKind::kNoPermission,
                   "the signing key file " + name + " is owned by uid " +
                       std::to_string(info.st_uid) + ", neither root nor this user (uid " +
                       std::to_string(::geteuid()) + "); run `chown root " + name + "`");
  }

  std::string contents;
  std::array<char, 4096> buffer{};
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      int error = errno;
      OPENSSL_cleanse(contents.data(), contents.size());
      throw Error(ErrorKind::kIo,
                  "cannot read the signing key file " + name + ": " + std::strerror(error));
    }
    if (n == 0) {
      break;
    }
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
  if (key.size() < kMinSigningKeyBytes && reference_rules) {
    log().warn(
        "zeusd: the signing key in {} is {} bytes, shorter than the {} HS256 needs; tokens "
        "signed with it are easier to forge (accepted: --allow-weak-signing-key)",
        name, key.size(), kMinSigningKeyBytes);
    return SigningKey(std::move(key), SigningKey::AnyLength{});
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

// ---- The middleware decision ----

bool AuthConfig::group_enabled(ApiGroup group) const {
  for (ApiGroup enabled : enabled_groups) {
    if (enabled == group) {
      return true;
    }
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
  if (path == "/discover" || path == "/time") {
    return allow();
  }

  constexpr std::string_view kBearerPrefix = "Bearer ";
  if (!authorization_header || !authorization_header->starts_with(kBearerPrefix)) {
    return refuse(401, "Authentication required. Provide an Authorization: Bearer <token> header.",
                  true);
  }
  std::string_view token = std::string_view(*authorization_header).substr(kBearerPrefix.size());

  TokenCheck check = verify_token(*config.signing_key, token, now_s, config.expiry_leeway_s);
  if (check.status == TokenStatus::kExpired) {
    return refuse(401, "Token has expired.", true);
  }
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
  // The common grammar (common/duration.hpp), narrowed to what `zeusd token issue` has always
  // taken: a whole number of seconds, minutes, hours or days, without blanks, sign or fraction.
  std::string_view count = text;
  if (!count.empty() && std::string_view("smhd").find(count.back()) != std::string_view::npos) {
    count.remove_suffix(1);
  }
  if (count.empty() || count.find_first_not_of("0123456789") != std::string_view::npos) {
    throw fail();
  }
  double seconds = 0.0;
  try {
    seconds = zeus::parse_duration_s(text, "--expires");
  } catch (const Error&) {
    throw fail();
  }
  if (seconds < 1.0) {
    throw fail();
  }
  // Cap at 100 years: anything longer is a typo, and it keeps now + duration from overflowing.
  constexpr std::int64_t kMaxDurationS = std::int64_t{100} * 365 * 86400;
  if (seconds > static_cast<double>(kMaxDurationS)) {
    throw Error(ErrorKind::kInvalidArgument,
                "duration '" + std::string(text) + "' is longer than 100 years");
  }
  return static_cast<std::int64_t>(seconds);
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
  // The reference's spellings (--user, --scope, --expires) and our earlier ones (--sub,
  // --scopes, --expires-in) are the same options.
  app.add_option("--user,--sub", sub,
                 "Who the token is for (its `sub` claim, logged with every "
                 "request)")
      ->required();
  app.add_option("--scope,--scopes", scopes_text,
                 "Comma-separated API groups the token may use: gpu-control, gpu-read, cpu-read")
      ->required();
  bool allow_weak_key = false;
  app.add_flag("--allow-weak-signing-key", allow_weak_key,
               "Take the key as the reference zeusd does (any non-empty file), with warnings");
  app.add_option("--expires,--expires-in", expires_in,
                 "Lifetime such as 3600, 30m, 1h, 7d or 30d; `never` or 0 (or omitted): the "
                 "token never expires");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }

  try {
    if (sub.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "--user (--sub) must not be empty");
    }
    std::vector<ApiGroup> scopes = parse_api_group_list(scopes_text);
    std::optional<std::int64_t> exp_s;
    if (!expires_in.empty() && expires_in != "never" && expires_in != "0") {
      exp_s = now_s + parse_duration_s(expires_in);
    }
    SigningKey key = load_signing_key(key_path, allow_weak_key);
    out << issue_token(key, sub, scopes, exp_s) << '\n';
    return 0;
  } catch (const Error& e) {
    err << "zeusd token issue: " << e.what() << '\n';
    return 2;
  }
}

int run_token_issue(int argc, const char* const* argv) {
  return run_token_issue(argc, argv, std::cout, std::cerr,
                         static_cast<std::int64_t>(system_clock()->now_s()));
}

}  // namespace zeus::daemon::auth
