// Base URLs of the HTTP clients: one grammar, one set of errors.
#include "http/url.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::http {
namespace {

bool is_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::string Url::authority() const {
  return port_given ? fmt::format("{}:{}", bracketed(host), port) : bracketed(host);
}

std::string Url::base() const {
  return scheme + "://" + authority() + prefix;
}

std::string Url::with_port() const {
  return fmt::format("{}://{}:{}{}", scheme, bracketed(host), port, prefix);
}

Url parse_url(std::string_view text, const UrlRules& rules) {
  const auto fail = [&](std::string_view why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("{} URL \"{}\": {}; expected http[s]://host[:port][/prefix]",
                             rules.service, text, why));
  };
  const std::string_view trimmed = text::trim(text);
  if (trimmed.empty()) {
    throw fail("it is empty");
  }
  if (std::any_of(trimmed.begin(), trimmed.end(),
                  [](unsigned char c) { return c <= 0x20 || c == 0x7f; })) {
    throw fail("it holds a space or a control character");
  }
  Url url;
  std::string_view rest = trimmed;
  if (const auto scheme_end = rest.find("://"); scheme_end != std::string_view::npos) {
    url.scheme = text::ascii_lower(std::string(rest.substr(0, scheme_end)));
    if (url.scheme != "http" && url.scheme != "https") {
      throw fail(fmt::format("the scheme must be http:// or https://, not \"{}\"", url.scheme));
    }
    rest.remove_prefix(scheme_end + 3);
  } else if (rules.scheme_required) {
    throw fail("it must start with http:// or https://");
  }
  url.port = url.scheme == "https" ? 443 : 80;
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw fail("a query or fragment is not allowed");
  }
  const auto path_start = rest.find('/');
  const std::string_view authority = rest.substr(0, path_start);
  if (path_start != std::string_view::npos) {
    url.prefix = std::string(rest.substr(path_start));
    while (!url.prefix.empty() && url.prefix.back() == '/') {
      url.prefix.pop_back();
    }
  }
  if (authority.find('@') != std::string_view::npos) {
    throw fail("user names and passwords in the URL are not supported (use a token option)");
  }
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      throw fail("unterminated IPv6 address");
    }
    url.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        throw fail("unexpected text after the IPv6 address");
      }
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    if (std::count(authority.begin(), authority.end(), ':') > 1) {
      throw fail("write an IPv6 address in brackets, e.g. http://[::1]:8000");
    }
    const auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      has_port = true;
    }
  }
  if (url.host.empty()) {
    throw fail("it names no host");
  }
  if (has_port) {
    const int port =
        is_digits(port_text) && port_text.size() <= 5 ? std::stoi(std::string(port_text)) : -1;
    if (port < 1 || port > 65535) {
      throw fail(fmt::format("port \"{}\" is not a number from 1 to 65535", port_text));
    }
    url.port = port;
    url.port_given = true;
  }
  return url;
}

}  // namespace zeus::http
