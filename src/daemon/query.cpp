#include "query.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "common/text.hpp"

namespace zeus::daemon {
namespace {

std::string expected_fields(const std::vector<std::string_view>& fields) {
  if (fields.empty()) {
    return "there are no fields";
  }
  if (fields.size() == 1) {
    return fmt::format("expected `{}`", fields[0]);
  }
  if (fields.size() == 2) {
    return fmt::format("expected `{}` or `{}`", fields[0], fields[1]);
  }
  std::string out = "expected one of ";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    out += fmt::format("{}`{}`", i == 0 ? "" : ", ", fields[i]);
  }
  return out;
}

}  // namespace

HttpError json_error(int status, const std::string& message) {
  // The message may quote the client's bytes: never let invalid UTF-8 make the dump throw.
  return {status, "application/json",
          nlohmann::ordered_json{{"error", message}}.dump(
              -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)};
}

HttpError query_error(const std::string& message) {
  return {400, "text/plain; charset=utf-8", "Query deserialize error: " + message};
}

Query::Query(const http::Request& req, std::vector<std::string_view> fields) : req_(req) {
  for (const auto& [key, value] : req.params) {
    if (std::find(fields.begin(), fields.end(), key) == fields.end()) {
      throw query_error(fmt::format("unknown field `{}`, {}", key, expected_fields(fields)));
    }
    if (req.param_count(key) > 1) {
      throw query_error(fmt::format("duplicate field `{}`", key));
    }
  }
}

std::optional<std::string> Query::optional(const std::string& name) const {
  return req_.param(name);
}

std::string Query::required(const std::string& name) const {
  auto value = optional(name);
  if (!value) {
    throw query_error(fmt::format("missing field `{}`", name));
  }
  return *value;
}

bool Query::boolean(const std::string& name) const {
  const std::string value = required(name);
  if (value == "true") {
    return true;
  }
  if (value == "false") {
    return false;
  }
  throw query_error("provided string was not `true` or `false`");
}

std::uint32_t Query::u32(const std::string& name) const {
  const std::string value = required(name);
  if (value.empty()) {
    throw query_error("cannot parse integer from empty string");
  }
  std::string_view digits = value;
  if (digits.front() == '+') {
    digits.remove_prefix(1);
  }
  std::uint64_t parsed = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      throw query_error("invalid digit found in string");
    }
    parsed = parsed * 10 + static_cast<std::uint64_t>(c - '0');
    if (parsed > 0xFFFFFFFFull) {
      throw query_error("number too large to fit in target type");
    }
  }
  if (digits.empty()) {
    throw query_error("invalid digit found in string");
  }
  return static_cast<std::uint32_t>(parsed);
}

std::vector<int> parse_ids(const std::string& field, const std::string& value,
                           std::string_view kind) {
  if (value.empty()) {
    throw json_error(400, fmt::format("{} must contain at least one {} index", field, kind));
  }
  std::vector<int> ids;
  for (const std::string_view item : text::split(value, ',')) {
    if (item.empty()) {
      throw json_error(400, fmt::format("{} contains an empty {} index", field, kind));
    }
    int id = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || end != item.data() + item.size() || id < 0) {
      throw json_error(400, fmt::format("Invalid {} index: {}", kind, item));
    }
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace zeus::daemon
