// zeusd's access policy: the API groups, the group a path needs, and the middleware's decision
// (auth.hpp). The tokens it checks are jwt.cpp's, the key key_file.cpp's.
#include "daemon/auth.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
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

}  // namespace zeus::daemon::auth
