// A hostile HTTP service for client tests, on raw sockets: every connection gets the same
// misbehaviour, from its own thread, until the peer goes. It trickles (a byte every interval, in
// the head or in the body, forever), hangs after the head, or floods (an endless chunked body, a
// 4 GiB announced one, or one without a length that never ends). Bodies that are JSON-shaped
// start with '[' so that nothing parses before the end.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/loopback_peers.hpp"

namespace zeus::testing {

enum class Hostility {
  kTrickleHead,         // "HTTP/1.1 200 OK\r\nX-Slow: " and then one byte every interval
  kTrickleBody,         // a whole head announcing 1 MB, then one body byte every interval
  kHangAfterHead,       // a whole head announcing 100 bytes, then nothing
  kEndlessChunked,      // chunked, 64 KiB chunks as fast as the client takes them, never a last one
  kHugeLength,          // Content-Length: 4294967296, bytes as fast as the client takes them
  kEndlessUnannounced,  // no length, "Connection: close", bytes as fast as they go, forever
};

class HostileHttpPeer {
 public:
  explicit HostileHttpPeer(Hostility hostility,
                           std::chrono::milliseconds interval = std::chrono::milliseconds(1000))
      : hostility_(hostility), interval_(interval) {
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  HostileHttpPeer(const HostileHttpPeer&) = delete;
  HostileHttpPeer& operator=(const HostileHttpPeer&) = delete;
  ~HostileHttpPeer() { stop(); }

  // Ends every connection and joins the threads; idempotent.
  void stop() {
    stopping_.store(true);
    if (acceptor_.joinable()) {
      listener_.wake_accept();
      acceptor_.join();
    }
    const std::lock_guard lock(mutex_);
    for (std::thread& connection : connections_) {
      connection.join();
    }
    connections_.clear();
  }

  std::string url() const { return listener_.url(); }
  int port() const { return listener_.port(); }
  // Connections accepted so far (one per attempt of a client that does not keep them).
  int connections() const { return accepted_.load(); }

 private:
  void accept_loop() {
    while (!stopping_.load()) {
      const int client = ::accept(listener_.fd(), nullptr, nullptr);
      if (client < 0) {
        return;
      }
      ++accepted_;
      const std::lock_guard lock(mutex_);
      connections_.emplace_back([this, client] {
        misbehave(client);
        ::close(client);
      });
    }
  }

  // False once the client has gone or the peer stops.
  bool send_all(int client, const std::string& bytes) const {
    for (std::size_t sent = 0; sent < bytes.size();) {
      if (stopping_.load()) {
        return false;
      }
      const ssize_t wrote =
          ::send(client, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (wrote < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (wrote <= 0) {
        return false;
      }
      sent += static_cast<std::size_t>(wrote);
    }
    return true;
  }

  // Waits one interval in small steps; false once the peer stops.
  bool pause() const {
    const auto until = std::chrono::steady_clock::now() + interval_;
    while (std::chrono::steady_clock::now() < until) {
      if (stopping_.load()) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  void read_request_head(int client) const {
    timeval wait{0, 100 * 1000};  // so that a stop is noticed
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && !stopping_.load()) {
      const ssize_t got = ::recv(client, buffer, sizeof buffer, 0);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        continue;
      }
      if (got <= 0) {
        return;
      }
      head.append(buffer, static_cast<std::size_t>(got));
    }
  }

  void misbehave(int client) const {
    read_request_head(client);
    const std::string ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
    const std::string flood(64 * 1024, ' ');
    switch (hostility_) {
      case Hostility::kTrickleHead:
        if (send_all(client, ok + "X-Slow: ")) {
          while (pause() && send_all(client, "a")) {
          }
        }
        return;
      case Hostility::kTrickleBody:
        if (send_all(client, ok + "Content-Length: 1000000\r\n\r\n[")) {
          while (pause() && send_all(client, " ")) {
          }
        }
        return;
      case Hostility::kHangAfterHead:
        if (send_all(client, ok + "Content-Length: 100\r\n\r\n")) {
          while (pause()) {
          }
        }
        return;
      case Hostility::kEndlessChunked: {
        const std::string chunk = "10000\r\n" + flood + "\r\n";
        if (send_all(client, ok + "Transfer-Encoding: chunked\r\n\r\n1\r\n[\r\n")) {
          while (send_all(client, chunk)) {
          }
        }
        return;
      }
      case Hostility::kHugeLength:
        if (send_all(client, ok + "Content-Length: 4294967296\r\n\r\n[")) {
          while (send_all(client, flood)) {
          }
        }
        return;
      case Hostility::kEndlessUnannounced:
        if (send_all(client, ok + "Connection: close\r\n\r\n[")) {
          while (send_all(client, flood)) {
          }
        }
        return;
    }
  }

  Hostility hostility_;
  std::chrono::milliseconds interval_;
  SilentListener listener_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::thread acceptor_;
};

}  // namespace zeus::testing
