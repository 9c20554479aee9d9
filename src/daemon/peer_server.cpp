#include "peer_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace zeus::daemon {
namespace {

thread_local PeerCredentials t_peer;

// Waits up to `timeout_ms` for `events` on `sock`; >0 ready, 0 timeout, <0 error.
int wait_for(int sock, short events, int timeout_ms) {
  pollfd pfd{sock, events, 0};
  while (true) {
    const int rc = ::poll(&pfd, 1, timeout_ms);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc > 0 && (pfd.revents & (POLLERR | POLLNVAL)))
      return -1;
    return rc;
  }
}

int to_ms(time_t sec, time_t usec) {
  return static_cast<int>(sec * 1000 + usec / 1000);
}

// The Stream httplib's request processing reads from and writes to.
class PeerSocketStream final : public httplib::Stream {
 public:
  PeerSocketStream(int sock, int read_timeout_ms, int write_timeout_ms)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

  bool is_readable() const override { return wait_for(sock_, POLLIN, read_timeout_ms_) > 0; }
  bool is_writable() const override {
    if (wait_for(sock_, POLLOUT, write_timeout_ms_) <= 0)
      return false;
    // Alive unless readable with nothing to read (the peer closed).
    if (wait_for(sock_, POLLIN, 0) > 0) {
      char byte = 0;
      const ssize_t n = ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0)
        return false;
    }
    return true;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (!is_readable())
      return -1;
    while (true) {
      const ssize_t n = ::recv(sock_, ptr, size, 0);
      if (n < 0 && errno == EINTR)
        continue;
      return n;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable())
      return -1;
    while (true) {
      const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  template <typename Fn>
  void address_of(Fn fn, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = 0;
    if (fn(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      port = ntohs(in->sin_port);
      ip = text;
    } else if (addr.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      port = ntohs(in6->sin6_port);
      ip = text;
    } else if (addr.ss_family == AF_UNIX) {
      ip = "unix";
    }
  }

  int sock_;
  int read_timeout_ms_;
  int write_timeout_ms_;
};

PeerCredentials read_peer_credentials(int sock) {
  PeerCredentials peer;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) &&
      cred.pid > 0) {
    peer.known = true;
    peer.pid = cred.pid;
    peer.uid = cred.uid;
    peer.gid = cred.gid;
  }
  return peer;
}

}  // namespace

PeerCredentials PeerServer::current_peer() {
  return t_peer;
}

bool PeerServer::raise_listen_backlog(int backlog) {
  const socket_t sock = svr_sock_;
  return sock != INVALID_SOCKET && ::listen(sock, backlog) == 0;
}

bool PeerServer::process_and_close_socket(socket_t sock) {
  t_peer = read_peer_credentials(sock);
  PeerSocketStream stream(sock, to_ms(read_timeout_sec_, read_timeout_usec_),
                          to_ms(write_timeout_sec_, write_timeout_usec_));
  bool ok = false;
  std::size_t remaining = keep_alive_max_count_;
  const auto keep_alive_timeout = std::chrono::seconds(keep_alive_timeout_sec_);
  while (svr_sock_ != INVALID_SOCKET && remaining > 0) {
    // Keep-alive: wait for the next request in short slices so that stop() is noticed.
    const auto idle_since = std::chrono::steady_clock::now();
    bool readable = false;
    while (svr_sock_ != INVALID_SOCKET) {
      const int rc = wait_for(sock, POLLIN, 100);
      if (rc < 0)
        break;
      if (rc > 0) {
        readable = true;
        break;
      }
      if (std::chrono::steady_clock::now() - idle_since > keep_alive_timeout)
        break;
    }
    if (!readable)
      break;
    const bool close_connection = remaining == 1;
    bool connection_closed = false;
    ok = process_request(stream, close_connection, connection_closed, nullptr);
    if (!ok || connection_closed)
      break;
    --remaining;
  }
  t_peer = PeerCredentials{};
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace zeus::daemon
