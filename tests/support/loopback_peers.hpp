// Hostile and minimal peers for client tests, on raw sockets: a listener that is never accepted
// from (a hung, half-open service), and an HTTP peer that reads each request head and answers
// it with bytes of the test's choosing, or not at all.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zeus::testing {

// A listening socket that nothing accepts from unless its owner does: the kernel completes each
// connection into the backlog, a request can be sent, and no answer ever comes.
class SilentListener {
 public:
  // TCP on 127.0.0.1, at a port the kernel picks.
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      close_fd();
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(address.sin_port);
  }
  // A Unix socket at `unix_socket_path` (which must not exist yet).
  explicit SilentListener(const std::string& unix_socket_path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, unix_socket_path.c_str(), sizeof(address.sun_path) - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd_, 16) != 0) {
      close_fd();
      throw std::runtime_error("cannot listen on " + unix_socket_path);
    }
  }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;
  ~SilentListener() { close_fd(); }

  int fd() const { return fd_; }
  // The TCP port (0 for a Unix socket).
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Makes a blocked accept() on fd() return (with an error), so that its thread can end.
  void wake_accept() const { ::shutdown(fd_, SHUT_RDWR); }

 private:
  void close_fd() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  int fd_ = -1;
  int port_ = 0;
};

// An HTTP peer on a loopback TCP port, served from its own thread one connection at a time: it
// reads the request head (to the blank line, or until the client stops sending), keeps it, and
// passes it to `respond`. Bytes returned are sent and the connection closed (or, with
// `close_after_answer` false, kept open and never read from again: a peer that has begun to
// answer a request whose body it will not take); std::nullopt keeps the connection open and
// unanswered until the peer goes.
class RawHttpPeer {
 public:
  using Respond = std::function<std::optional<std::string>(const std::string& request_head)>;

  explicit RawHttpPeer(Respond respond, bool close_after_answer = true)
      : respond_(std::move(respond)), close_after_answer_(close_after_answer) {
    thread_ = std::thread([this] { serve(); });
  }
  RawHttpPeer(const RawHttpPeer&) = delete;
  RawHttpPeer& operator=(const RawHttpPeer&) = delete;
  ~RawHttpPeer() {
    stop();
    for (const int client : open_clients_) {
      ::close(client);
    }
  }

  // Ends the serving thread; what it kept can be read after this.
  void stop() {
    if (thread_.joinable()) {
      listener_.wake_accept();
      thread_.join();
    }
  }
  std::string url() const { return listener_.url(); }
  // Each request's first line ("GET /path?query HTTP/1.1"), in order. Only after stop().
  std::vector<std::string> request_lines() const {
    std::vector<std::string> lines;
    for (const std::string& head : request_heads_) {
      lines.push_back(head.substr(0, head.find("\r\n")));
    }
    return lines;
  }

  // A complete 200 answer with `body` as JSON, for `respond`.
  static std::string ok_json(const std::string& body) {
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }

 private:
  void serve() {
    while (true) {
      const int client = ::accept(listener_.fd(), nullptr, nullptr);
      if (client < 0) {
        return;
      }
      std::string head;
      char buffer[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        const ssize_t got = ::recv(client, buffer, sizeof buffer, 0);
        if (got <= 0) {
          break;
        }
        head.append(buffer, static_cast<std::size_t>(got));
      }
      request_heads_.push_back(head);
      const std::optional<std::string> answer = respond_(head);
      if (!answer) {
        open_clients_.push_back(client);
        continue;
      }
      for (std::size_t sent = 0; sent < answer->size();) {
        const ssize_t wrote =
            ::send(client, answer->data() + sent, answer->size() - sent, MSG_NOSIGNAL);
        if (wrote <= 0) {
          break;
        }
        sent += static_cast<std::size_t>(wrote);
      }
      if (close_after_answer_) {
        ::close(client);
      } else {
        open_clients_.push_back(client);
      }
    }
  }

  SilentListener listener_;
  Respond respond_;
  bool close_after_answer_ = true;
  std::vector<std::string> request_heads_;
  std::vector<int> open_clients_;
  std::thread thread_;
};

}  // namespace zeus::testing
