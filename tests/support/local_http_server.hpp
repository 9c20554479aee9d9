// A cpp-httplib server for a test, on 127.0.0.1 at a port the kernel picks, served from its own
// thread: the test registers its routes on server(), calls start(), and points a client at url().
#pragma once

#include <httplib.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace zeus::testing {

class LocalHttpServer {
 public:
  LocalHttpServer() = default;
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;
  ~LocalHttpServer() { stop(); }

  // The routes go here, before start().
  httplib::Server& server() { return server_; }

  // Binds, starts the serving thread and returns once requests are being taken.
  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) {
      throw std::runtime_error("cannot bind an HTTP server on loopback");
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Stops serving (a connection refused from then on) and joins the thread; idempotent.
  void stop() {
    server_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace zeus::testing
