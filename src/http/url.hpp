// The one parser of the base URLs that zeus's HTTP clients are given (the BSO server, the
// Pushgateway, ElectricityMaps, OpenEI): "[scheme://]host[:port][/prefix]". Part of the client
// half of src/http (target zeus::http_client, no Boost).
#pragma once

#include <string>
#include <string_view>

namespace zeus::http {

// A parsed base URL. IPv6 hosts are kept without their brackets.
struct Url {
  std::string scheme = "http";  // "http" or "https", lower case
  std::string host;
  int port = 80;            // the scheme's default when none was given
  bool port_given = false;  // whether the text named the port
  std::string prefix;       // path prefix without trailing '/'; "" for none

  // host[:port] as given (IPv6 in brackets; the port only when the text named it).
  std::string authority() const;
  // scheme://authority[/prefix]: the URL as the user wrote it, normalised.
  std::string base() const;
  // scheme://host:port[/prefix] with the port always written.
  std::string with_port() const;
};

// How a client reads its base URL, and how errors name it.
struct UrlRules {
  std::string_view service;      // names the URL in errors: "<service> URL \"...\": ..."
  bool scheme_required = false;  // without a scheme, http is assumed unless this is set
};

// Throws Error(kInvalidArgument) "<service> URL \"<text>\": <what is wrong>; expected
// http[s]://host[:port][/prefix]" for: an empty text, spaces or control characters, a scheme
// other than http or https (or none when required), user info, a query or fragment, no host, an
// unterminated or unbracketed IPv6 address, a port that is not 1-65535.
Url parse_url(std::string_view text, const UrlRules& rules);

}  // namespace zeus::http
