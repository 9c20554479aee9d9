#include "http/peer.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace zeus::http::detail {

std::string peer_key(const Peer& peer) {
  if (peer.credentials) {
    return "uid:" + std::to_string(peer.credentials->uid);
  }
  return peer.address;
}

std::string peer_text(const Peer& peer) {
  if (peer.credentials) {
    return "unix pid=" + std::to_string(peer.credentials->pid) +
           " uid=" + std::to_string(peer.credentials->uid);
  }
  if (peer.port == 0) {
    return peer.address;
  }
  return peer.address + ":" + std::to_string(peer.port);
}

Peer peer_of(const boost::asio::ip::tcp::socket::endpoint_type& remote) {
  Peer peer;
  peer.address = remote.address().to_string();
  peer.port = remote.port();
  return peer;
}

void raise_descriptor_limit(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return;
  }
  const rlim_t target = std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(wanted));
  if (limit.rlim_cur < target) {
    limit.rlim_cur = target;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace zeus::http::detail
