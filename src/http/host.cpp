// The HTTP host: Boost.Asio connections on an I/O thread, requests handled on a worker pool,
// every phase of a connection under a deadline (docs/security.md). This file accepts
// connections and runs the host; session.hpp is one connection, host_impl.hpp the shared state.
#include "http/host.hpp"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "http/host_impl.hpp"
#include "http/peer.hpp"
#include "http/session.hpp"

namespace zeus::http {

// ---- Accepting ----------------------------------------------------------------------------

template <typename Socket>
void Host::Impl::refuse_connection(Socket socket, const std::string& reason) {
  ++refused;
  Response response;
  options.error_body(503, reason, response);
  auto text = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + response.content_type +
      "\r\nContent-Length: " + std::to_string(response.body.size()) +
      "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + response.body);
  auto shared = std::make_shared<Socket>(std::move(socket));
  auto timer = std::make_shared<net::steady_timer>(shared->get_executor());
  timer->expires_after(std::chrono::seconds(1));
  timer->async_wait([shared](error_code ec) {
    if (!ec) {
      error_code ignored;
      shared->close(ignored);
    }
  });
  net::async_write(*shared, net::buffer(*text), [shared, text, timer](error_code, std::size_t) {
    error_code ignored;
    shared->shutdown(Socket::shutdown_both, ignored);
    shared->close(ignored);
    timer->cancel();
  });
}

template <typename Acceptor>
void Host::Impl::accept_on(Acceptor& acceptor) {
  using Strand = net::strand<net::io_context::executor_type>;
  using SocketType =
      typename Acceptor::protocol_type::socket::template rebind_executor<Strand>::other;
  acceptor.async_accept(net::make_strand(io), [self = shared_from_this(), &acceptor](
                                                  error_code ec, SocketType socket) {
    if (self->stopping->load() || ec == net::error::operation_aborted) {
      return;
    }
    if (ec) {
      // Out of descriptors (EMFILE, ENFILE) or a transient failure: back off briefly.
      log().warn("{}: accept: {}", self->options.name, ec.message());
      auto timer = std::make_shared<net::steady_timer>(self->io);
      timer->expires_after(std::chrono::milliseconds(50));
      timer->async_wait([self, timer, &acceptor](error_code) {
        if (!self->stopping->load()) {
          self->accept_on(acceptor);
        }
      });
      return;
    }
    ++self->accepted;
    Peer peer = detail::describe_peer(socket);
    const std::string key = detail::peer_key(peer);
    Impl::Admission admission = self->admit(key);
    for (auto& victim : admission.victims) {
      victim->post_evict();
    }
    if (!admission.victims.empty()) {
      if (const auto unlogged = self->due(self->eviction_log)) {
        log().warn(
            "{}: at its cap of {} connections: closing an idle connection of {} (the peer "
            "with the most) to admit {}{}",
            self->options.name, self->options.limits.max_connections, admission.victim_peer,
            detail::peer_text(peer),
            *unlogged > 0 ? fmt::format(" ({} more since the last such line)", *unlogged)
                          : std::string());
      }
    }
    if (admission.refusal) {
      if (const auto unlogged = self->due(self->refusal_log)) {
        log().warn("{}: refused a connection from {}: {}{}", self->options.name,
                   detail::peer_text(peer), *admission.refusal,
                   *unlogged > 0
                       ? fmt::format(" ({} more refused since the last such line)", *unlogged)
                       : std::string());
      }
      self->refuse_connection(std::move(socket), *admission.refusal);
    } else {
      auto session = std::make_shared<Session<SocketType>>(self, std::move(socket), peer);
      self->add(session.get(), session, key);
      session->start();
    }
    self->accept_on(acceptor);
  });
}

// ---- Host ----------------------------------------------------------------------------------

Host::Host(HostOptions options, Handler handler)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler))) {}

Host::~Host() {
  stop();
  join();
  if (!impl_->served.exchange(true)) {
    // Never served: run what stop() queued (it closes the acceptors) so nothing is left behind.
    impl_->io.run();
    impl_->workers.join();
  }
}

int Host::bind_tcp(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    throw BindError("port " + std::to_string(port) + " is out of range 0-65535", EINVAL);
  }
  detail::raise_descriptor_limit(impl_->options.limits.max_connections + 256);
  error_code ec;
  net::ip::address address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    net::ip::tcp::resolver resolver(impl_->io);
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      throw BindError("cannot listen on " + host + ":" + std::to_string(port) +
                          ": no such address (give an IP address or a resolvable name)",
                      EADDRNOTAVAIL);
    }
    address = results.begin()->endpoint().address();
  }
  const net::ip::tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& acceptor = impl_->tcp_acceptor.emplace(impl_->io);
  auto fail = [&](const char* what) {
    const int number = ec.value();
    impl_->tcp_acceptor.reset();
    throw BindError("cannot listen on " + host + ":" + std::to_string(port) + ": " + what + ": " +
                        std::strerror(number),
                    number);
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec) {
    fail("socket");
  }
  // SO_REUSEADDR only (restart over TIME_WAIT); never SO_REUSEPORT, which would let a second
  // server share the port silently.
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec) {
    fail("bind");
  }
  acceptor.listen(impl_->options.listen_backlog, ec);
  if (ec) {
    fail("listen");
  }
  return acceptor.local_endpoint().port();
}

void Host::bind_unix(const std::filesystem::path& path) {
  detail::raise_descriptor_limit(impl_->options.limits.max_connections + 256);
  error_code ec;
  auto& acceptor = impl_->unix_acceptor.emplace(impl_->io);
  auto fail = [&](const char* what) {
    const int number = ec.value();
    impl_->unix_acceptor.reset();
    throw BindError("cannot listen on the Unix socket " + path.string() + ": " + what + ": " +
                        std::strerror(number),
                    number);
  };
  acceptor.open(net::local::stream_protocol(), ec);
  if (ec) {
    fail("socket");
  }
  acceptor.bind(net::local::stream_protocol::endpoint(path.string()), ec);
  if (ec) {
    fail("bind");
  }
  acceptor.listen(impl_->options.listen_backlog, ec);
  if (ec) {
    fail("listen");
  }
}

void Host::serve() {
  Impl& impl = *impl_;
  if (impl.served.exchange(true)) {
    return;
  }
  if (!impl.stopping->load()) {
    if (impl.tcp_acceptor) {
      impl.accept_on(*impl.tcp_acceptor);
    }
    if (impl.unix_acceptor) {
      impl.accept_on(*impl.unix_acceptor);
    }
  }
  impl.serving = true;
  std::vector<std::thread> extra;
  for (int i = 1; i < impl.options.io_threads; ++i) {
    extra.emplace_back([&impl] { impl.io.run(); });
  }
  impl.io.run();
  for (auto& thread : extra) {
    thread.join();
  }
  impl.serving = false;
  // Handlers still running finish (their replies are dropped).
  impl.workers.join();
}

void Host::start() {
  if (impl_->background.joinable() || impl_->served) {
    return;
  }
  impl_->background = std::thread([this] { serve(); });
  // Return once connections are accepted.
  for (int i = 0; i < 5000 && !impl_->serving && !impl_->served.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Host::join() {
  if (impl_->background.joinable() && impl_->background.get_id() != std::this_thread::get_id()) {
    impl_->background.join();
  }
}

void Host::stop() {
  std::shared_ptr<Impl> impl = impl_;
  if (impl->stopping->exchange(true)) {
    return;
  }
  net::post(impl->control, [impl] {
    error_code ignored;
    if (impl->tcp_acceptor) {
      impl->tcp_acceptor->close(ignored);
    }
    if (impl->unix_acceptor) {
      impl->unix_acceptor->close(ignored);
    }
    impl->stop_sessions(false);
    impl->grace_timer.expires_after(impl->options.limits.shutdown_grace);
    impl->grace_timer.async_wait([impl](error_code ec) {
      if (ec) {
        return;
      }
      log().warn("{}: requests still in flight after {} ms; closing their connections",
                 impl->options.name, impl->options.limits.shutdown_grace.count());
      impl->stop_sessions(true);
    });
    impl->work.reset();
    impl->check_drained();
  });
}

bool Host::running() const {
  return impl_->serving && !impl_->stopping->load();
}

HostStats Host::stats() const {
  HostStats stats;
  stats.connections_accepted = impl_->accepted;
  stats.connections_refused = impl_->refused;
  stats.connections_evicted = impl_->evicted;
  stats.requests = impl_->requests;
  stats.rejected_requests = impl_->rejected;
  stats.timeouts = impl_->timeouts;
  std::lock_guard lock(impl_->mutex);
  stats.open_connections = impl_->sessions.size();
  stats.evicting_connections = impl_->evicting;
  return stats;
}

}  // namespace zeus::http
