// An httplib::Server that knows who is on the other end of each connection.
//
// cpp-httplib 0.11.4 neither hands the connection's socket to handlers nor exposes its
// connection loop, but Server::process_and_close_socket is virtual and Server::process_request is
// protected. PeerServer replaces the per-connection loop (keep-alive, timeouts, the same rules as
// httplib's) with one that reads SO_PEERCRED first; the credentials are visible to the handlers
// through current_peer() for as long as the connection's thread serves it.
#pragma once

#include <httplib.h>

#include "zeus/daemon/daemon.hpp"

namespace zeus::daemon {

class PeerServer : public httplib::Server {
 public:
  // The peer of the connection the calling thread is serving (unknown outside a handler).
  static PeerCredentials current_peer();

  // httplib listens with a backlog of 5; on a Unix socket a full backlog makes connect() fail
  // at once (EAGAIN) instead of waiting, so a few concurrent clients would be refused. Linux
  // lets a listening socket's backlog be raised by calling listen() again. Call after bind.
  bool raise_listen_backlog(int backlog);

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace zeus::daemon
