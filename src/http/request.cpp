// Request accessors and the text helpers of the HTTP host (percent-decoding, UTF-8, Bearer).
#include <algorithm>

#include "common/text.hpp"
#include "http/host.hpp"

namespace zeus::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return text::ascii_iequals(a, b);
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) {
      return std::string_view(value);
    }
  }
  return std::nullopt;
}

bool Request::has_param(std::string_view name) const {
  return param_count(name) > 0;
}

std::optional<std::string> Request::param(std::string_view name) const {
  for (const auto& [key, value] : params) {
    if (key == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::size_t Request::param_count(std::string_view name) const {
  return static_cast<std::size_t>(std::count_if(
      params.begin(), params.end(), [name](const auto& pair) { return pair.first == name; }));
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<Fields> parse_query(std::string_view query) {
  Fields out;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string_view::npos) {
      end = query.size();
    }
    const std::string_view item = query.substr(start, end - start);
    if (!item.empty()) {
      const std::size_t equals = item.find('=');
      auto key = percent_decode(item.substr(0, equals), true);
      auto value = percent_decode(
          equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1), true);
      if (!key || !value) {
        return std::nullopt;
      }
      out.emplace_back(std::move(*key), std::move(*value));
    }
    start = end + 1;
  }
  return out;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  authorization = text::trim(authorization, kOptionalWhitespace);
  if (authorization.size() <= kScheme.size() ||
      !iequals(authorization.substr(0, kScheme.size()), kScheme) ||
      (authorization[kScheme.size()] != ' ' && authorization[kScheme.size()] != '\t')) {
    return std::nullopt;
  }
  const std::string_view token =
      text::trim(authorization.substr(kScheme.size()), kOptionalWhitespace);
  if (token.empty()) {
    return std::nullopt;
  }
  return token;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace zeus::http
