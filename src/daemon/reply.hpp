// How zeusd answers: JSON bodies, device errors as statuses and messages, and the wrapper that
// turns what a handler throws into a reply.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/config.hpp"
#include "daemon/query.hpp"
#include "http/host.hpp"

namespace zeus::daemon {

using Json = nlohmann::ordered_json;

// Wall-clock milliseconds since the epoch: the `timestamp_ms` of the wire protocol.
std::uint64_t unix_time_ms();

// A device's refusal as the client sees it.
struct DeviceFailure {
  int status;
  std::string message;
};

// zeus::Error kinds -> 400/403/500; a VendorError's message names the vendor.
DeviceFailure failure_of(const std::exception& e);
// {"errors": {"<id>": message, ...}} with the worst status (first one's when they agree).
HttpError errors_reply(const std::map<int, DeviceFailure>& failures);

void reply_json(http::Response& res, const Json& body);
void reply_error(http::Response& res, const HttpError& error);

using RouteHandler = std::function<void(const http::Request&, http::Response&)>;
// Wraps a handler: HttpError and stray exceptions become replies.
http::Handler wrap(RouteHandler handler);

PeerCredentials peer_of(const http::Request& req);
// "peer pid=1 uid=2 gid=3" or "peer unknown", for the logs.
std::string peer_text(const PeerCredentials& peer);

}  // namespace zeus::daemon
