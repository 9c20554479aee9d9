// Who is on the other end of a connection: address and port for TCP, the SO_PEERCRED
// credentials for a Unix socket; and the key the per-peer connection cap counts by (the address,
// or the uid on a Unix socket). Internal to the http layer.
#pragma once

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <cstddef>
#include <string>
#include <type_traits>

#include "http/host.hpp"

namespace zeus::http::detail {

// The key a peer's connections are counted under.
std::string peer_key(const Peer& peer);

// The peer for logs: "10.0.0.1:4242", or "unix pid=.. uid=..".
std::string peer_text(const Peer& peer);

Peer peer_of(const boost::asio::ip::tcp::socket::endpoint_type& remote);

// The peer of a connected socket (TCP: also turns Nagle off).
template <typename Socket>
Peer describe_peer(Socket& socket) {
  namespace net = boost::asio;
  if constexpr (std::is_same_v<typename Socket::protocol_type, net::ip::tcp>) {
    boost::system::error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    if (ec) {
      return Peer{"unknown", 0, std::nullopt};
    }
    socket.set_option(net::ip::tcp::no_delay(true), ec);
    return peer_of(remote);
  } else {
    Peer peer;
    peer.address = "unix";
    ucred cred{};
    socklen_t length = sizeof(cred);
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 &&
        length == sizeof(cred) && cred.pid > 0) {
      peer.credentials = PeerCredentials{cred.pid, cred.uid, cred.gid};
    }
    return peer;
  }
}

// Raises the soft descriptor limit toward `wanted`, so that the connection cap, not EMFILE, is
// what bounds the host.
void raise_descriptor_limit(std::size_t wanted);

}  // namespace zeus::http::detail
