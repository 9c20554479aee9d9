// How the HTTP host turns bytes into a Request: Boost.Beast's parser with the host's limits, then
// the checks Beast leaves to its user (RFC 9112). Shared by the host and by the fuzz target, so
// that what is fuzzed is what serves.
#pragma once

#include <boost/beast/http.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http/host.hpp"

namespace zeus::http::detail {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// A request the host answers itself, with this status and message.
struct Refusal {
  int status = 400;
  std::string message;
};

// Applies the header and body limits to a fresh parser.
void configure(RequestParser& parser, const HostLimits& limits);

// What a parse error means for the client.
Refusal refusal_for(const boost::system::error_code& error, const HostLimits& limits);

// Checks a complete head and fills `out` (everything but the body and the peer). A refusal means
// the request is answered with it and the connection closed.
std::optional<Refusal> check_head(const RequestParser::value_type& head, const HostLimits& limits,
                                  Request& out);

// Whether the client asked for "Expect: 100-continue".
bool expects_continue(const RequestParser::value_type& head);

// The whole path on a byte string: parse a head (and the body when complete), check it. Used by
// the fuzz target and tests.
struct ParseOutcome {
  std::optional<Request> request;  // a complete, accepted request
  std::optional<Refusal> refusal;  // answered by the host
  bool incomplete = false;         // the bytes end before the request does
};
ParseOutcome parse_request(std::string_view bytes, const HostLimits& limits);

}  // namespace zeus::http::detail
