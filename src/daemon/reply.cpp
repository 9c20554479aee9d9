#include "daemon/reply.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::daemon {
namespace {

int status_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNoPermission:
      return 403;
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kNotSupported:
    case ErrorKind::kNotFound:
      return 400;
    default:
      return 500;
  }
}

std::string dump(const Json& body) {
  // Messages may quote the client's bytes: never let invalid UTF-8 make the dump throw.
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::uint64_t unix_time_ms() {
  return static_cast<std::uint64_t>(units::milliseconds_from_nanoseconds(system_clock()->now_ns()));
}

DeviceFailure failure_of(const std::exception& e) {
  if (const auto* vendor = dynamic_cast<const VendorError*>(&e)) {
    return {status_for(vendor->kind()), fmt::format("{} error: {}", vendor->vendor(), e.what())};
  }
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    return {status_for(error->kind()), error->what()};
  }
  return {500, e.what()};
}

HttpError errors_reply(const std::map<int, DeviceFailure>& failures) {
  Json errors = Json::object();
  int status = 400;
  bool first = true;
  for (const auto& [id, failure] : failures) {
    errors[std::to_string(id)] = failure.message;
    status = first ? failure.status : std::max(status, failure.status);
    first = false;
  }
  return {status, "application/json", Json{{"errors", errors}}.dump()};
}

void reply_json(http::Response& res, const Json& body) {
  res.status = 200;
  res.body = dump(body);
  res.content_type = "application/json";
}

void reply_error(http::Response& res, const HttpError& error) {
  res.status = error.status;
  res.body = error.body;
  res.content_type = error.content_type;
}

http::Handler wrap(RouteHandler handler) {
  return [handler = std::move(handler)](const http::Request& req, http::Response& res) {
    try {
      handler(req, res);
    } catch (const HttpError& e) {
      reply_error(res, e);
    } catch (const std::exception& e) {
      const DeviceFailure failure = failure_of(e);
      res.status = failure.status;
      res.body = dump(Json{{"error", failure.message}});
      res.content_type = "application/json";
    }
  };
}

PeerCredentials peer_of(const http::Request& req) {
  PeerCredentials peer;
  if (req.peer.credentials) {
    peer.known = true;
    peer.pid = req.peer.credentials->pid;
    peer.uid = req.peer.credentials->uid;
    peer.gid = req.peer.credentials->gid;
  }
  return peer;
}

std::string peer_text(const PeerCredentials& peer) {
  if (!peer.known) {
    return "peer unknown";
  }
  return fmt::format("peer pid={} uid={} gid={}", peer.pid, peer.uid, peer.gid);
}

}  // namespace zeus::daemon
