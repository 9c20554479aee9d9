// A raw HTTP/1.1 client over a TCP or Unix socket, for tests that must send exactly the bytes
// they mean (malformed, slow, half-closed) and see exactly what comes back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace zeus::testing {

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked when chunked
  bool has_header(const std::string& lower_name_colon_value) const {
    std::string lower;
    for (char c : head) {
      lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    return lower.find(lower_name_colon_value) != std::string::npos;
  }
};

class RawClient {
 public:
  // To 127.0.0.1:`port`; from `source_address` when given (any 127.x.y.z is local on Linux, so
  // one machine can play many peers).
  static RawClient tcp(int port, const std::string& source_address = "") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!source_address.empty()) {
      sockaddr_in source{};
      source.sin_family = AF_INET;
      if (::inet_pton(AF_INET, source_address.c_str(), &source.sin_addr) != 1 ||
          ::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot bind to " + source_address);
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    }
    return RawClient(fd);
  }
  static RawClient unix_socket(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    }
    return RawClient(fd);
  }

  RawClient(RawClient&& other) noexcept : fd_(other.fd_), pending_(std::move(other.pending_)) {
    other.fd_ = -1;
  }
  RawClient& operator=(RawClient&&) = delete;
  ~RawClient() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }

  // False when the peer has closed (EPIPE, ECONNRESET).
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return false;
      }
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // Reads one response (skipping 100 Continue); nullopt if the connection closes or `timeout`
  // passes first.
  std::optional<RawResponse> read_response(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto response = read_head_only(timeout);
    if (!response) {
      return std::nullopt;
    }
    if (response->status == 100) {
      return read_response(timeout);
    }
    const std::optional<std::size_t> length = content_length(response->head);
    if (response->has_header("transfer-encoding: chunked")) {
      while (true) {
        bool last = false;
        auto chunk = next_chunk(deadline, last);
        if (!chunk) {
          return std::nullopt;
        }
        if (last) {
          break;
        }
        response->body += *chunk;
      }
    } else if (length) {
      while (pending_.size() < *length) {
        if (!fill(deadline)) {
          return std::nullopt;
        }
      }
      response->body = pending_.substr(0, *length);
      pending_.erase(0, *length);
    } else {
      while (fill(deadline)) {
      }
      response->body = std::move(pending_);
      pending_.clear();
    }
    return response;
  }

  // Reads one chunk of a chunked stream (after read_head_only); nullopt at the end or timeout.
  std::optional<std::string> read_chunk(std::chrono::milliseconds timeout) {
    bool last = false;
    auto chunk = next_chunk(std::chrono::steady_clock::now() + timeout, last);
    if (last) {
      return std::nullopt;
    }
    return chunk;
  }
  // Reads a response head only (for streams and interim responses).
  std::optional<RawResponse> read_head_only(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::size_t head_end;
    while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) {
        return std::nullopt;
      }
    }
    RawResponse response;
    response.head = pending_.substr(0, head_end);
    pending_.erase(0, head_end + 4);
    if (response.head.size() < 12) {
      return std::nullopt;
    }
    response.status = std::stoi(response.head.substr(9, 3));
    return response;
  }

  // True when the server closes the connection within `timeout` (EOF or reset).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd pfd{fd_, POLLIN, 0};
      const int rc = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (rc <= 0) {
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        return true;
      }
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }
  const std::string& pending() const { return pending_; }

 private:
  explicit RawClient(int fd) : fd_(fd) {}

  static std::optional<std::size_t> content_length(const std::string& head) {
    std::string lower;
    for (char c : head) {
      lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    const std::size_t at = lower.find("content-length:");
    if (at == std::string::npos) {
      return std::nullopt;
    }
    return std::stoul(lower.substr(at + 15));
  }

  // One chunk: its data, or with `last` set the terminating zero-size chunk.
  std::optional<std::string> next_chunk(std::chrono::steady_clock::time_point deadline,
                                        bool& last) {
    std::size_t line_end;
    while ((line_end = pending_.find("\r\n")) == std::string::npos) {
      if (!fill(deadline)) {
        return std::nullopt;
      }
    }
    const std::size_t size = std::stoul(pending_.substr(0, line_end), nullptr, 16);
    while (pending_.size() < line_end + 2 + size + 2) {
      if (!fill(deadline)) {
        return std::nullopt;
      }
    }
    std::string chunk = pending_.substr(line_end + 2, size);
    pending_.erase(0, line_end + 2 + size + 2);
    last = size == 0;
    return chunk;
  }

  bool fill(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return false;
    }
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      return false;
    }
    char buffer[16384];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      return false;
    }
    pending_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string pending_;
};

}  // namespace zeus::testing
