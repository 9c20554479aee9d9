#include "zeus/server/http_server.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

#include "zeus/common/log.hpp"

namespace zeus::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void send_message(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, json{{"message", message}}.dump());
}

void send_detail(httplib::Response& res, int status, const std::string& detail) {
  send_json(res, status, json{{"detail", detail}}.dump());
}

// "//jobs//batch_size/" -> "/jobs/batch_size"
std::string normalize_path(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (const char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') {
      continue;
    }
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') {
    out.pop_back();
  }
  return out.empty() ? "/" : out;
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  }
  return difference == 0 && !b.empty();
}

// The required query parameter, or a 422 in FastAPI's shape.
std::string query_param(const httplib::Request& req, const std::string& name) {
  if (!req.has_param(name.c_str())) {
    throw bso::ValidationError(
        {{{"query", name}, "field required", "value_error.missing", nullptr}});
  }
  return req.get_param_value(name.c_str());
}

json body_of(const httplib::Request& req) {
  if (req.body.empty()) {
    throw bso::ValidationError({{{"body"}, "field required", "value_error.missing", nullptr}});
  }
  return bso::parse_body(req.body);
}

}  // namespace

struct HttpServer::Impl {
  httplib::Server server;
  int listen_fd = -1;
  std::atomic<bool> bound{false};
  std::atomic<bool> stop_requested{false};
};

HttpServer::HttpServer(BsoService& service, HttpServerOptions options)
    : impl_(std::make_unique<Impl>()), options_(std::move(options)) {
  httplib::Server& server = impl_->server;
  const int threads = options_.threads < 1 ? 1 : options_.threads;
  server.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<std::size_t>(threads));
  };
  server.set_payload_max_length(options_.max_body_bytes);
  // Headers and body go out in two writes: without this, Nagle's algorithm holds the body for
  // the client's delayed ACK (about 40 ms per request on a kept-alive connection).
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(5);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  // Remember the listening socket so that its backlog can be raised after bind (the library's
  // fixed backlog of 5 drops connections when many clients connect at once).
  Impl* impl = impl_.get();
  server.set_socket_options([impl](socket_t fd) {
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    impl->listen_fd = fd;
  });

  auto handle = [this, &service](const httplib::Request& req, httplib::Response& res) {
    const auto started = std::chrono::steady_clock::now();
    const std::string path = normalize_path(req.path);
    const std::string& method = req.method;
    try {
      if (options_.noop_route && path == "/_noop") {
        send_json(res, 200, "null");
        ++requests_;
        return;
      }
      if (path == "/healthz") {
        if (method != "GET") {
          send_detail(res, 405, "Method Not Allowed");
          return;
        }
        const StoreHealth health = service.store().health();
        if (health.ok) {
          send_json(res, 200, R"({"status":"ok"})");
        } else {
          send_json(res, 503,
                    json{{"status", "unavailable"}, {"storage", health.message}}.dump(
                        -1, ' ', false, json::error_handler_t::replace));
        }
        return;
      }
      if (!options_.token.empty()) {
        const std::string header = req.get_header_value("Authorization");
        const std::string prefix = "Bearer ";
        if (header.rfind(prefix, 0) != 0 ||
            !equal_constant_time(header.substr(prefix.size()), options_.token)) {
          res.set_header("WWW-Authenticate", "Bearer");
          send_detail(res, 401,
                      header.empty() ? "Not authenticated: send Authorization: Bearer <token>"
                                     : "Invalid token");
          return;
        }
      }
      if (path == "/jobs") {
        if (method == "POST") {
          const RegisterResult result = service.register_job(bso::job_spec_from_json(body_of(req)));
          send_json(res, result.created ? 201 : 200, bso::to_json(result.spec).dump());
        } else if (method == "DELETE") {
          if (service.delete_job(query_param(req, "job_id"))) {
            send_json(res, 200, "null");
          } else {
            send_message(res, 404, "No job was deleted.");
          }
        } else if (method == "GET") {
          ordered_json ids = ordered_json::array();
          service.store().transact([&](StoreTransaction& tx) {
            for (const std::string& id : tx.list_job_ids()) {
              ids.push_back(id);
            }
          });
          send_json(res, 200, ordered_json{{"jobs", ids}}.dump());
        } else {
          send_detail(res, 405, "Method Not Allowed");
        }
      } else if (path == "/jobs/batch_size") {
        if (method != "GET") {
          send_detail(res, 405, "Method Not Allowed");
          return;
        }
        send_json(res, 200,
                  bso::to_json(service.next_batch_size(query_param(req, "job_id"))).dump());
      } else if (path == "/report") {
        if (method != "POST") {
          send_detail(res, 405, "Method Not Allowed");
          return;
        }
        send_json(
            res, 200,
            bso::to_json(service.report(bso::training_result_from_json(body_of(req)))).dump());
      } else if (path == "/trials") {
        if (method != "PATCH") {
          send_detail(res, 405, "Method Not Allowed");
          return;
        }
        service.end_trial(bso::trial_id_from_json(body_of(req)));
        send_json(res, 200, "null");
      } else if (path.rfind("/jobs/", 0) == 0 && path.find('/', 6) == std::string::npos) {
        if (method != "GET") {
          send_detail(res, 405, "Method Not Allowed");
          return;
        }
        const std::string job_id = httplib::detail::decode_url(path.substr(6), false);
        if (auto state = service.job_state(job_id)) {
          send_json(res, 200, state->dump());
        } else {
          send_message(res, 404, "Unknown job(" + job_id + ")");
        }
      } else {
        send_detail(res, 404, "Not Found");
      }
    } catch (const bso::ValidationError& error) {
      send_json(res, 422, error.to_json().dump());
    } catch (const ServiceError& error) {
      send_message(res, error.status(), error.what());
    } catch (const StoreError& error) {
      switch (error.failure()) {
        case StoreFailure::kUnavailable:
          send_message(res, 503, std::string("database unavailable: ") + error.what());
          break;
        case StoreFailure::kReadOnly:
          send_message(res, 503,
                       std::string("the database refuses writes (read-only): ") + error.what());
          break;
        case StoreFailure::kConflict:
          send_message(res, 503, std::string("the database is busy; retry: ") + error.what());
          break;
        default:
          send_message(res, 500, std::string("database error: ") + error.what());
      }
      zeus::log().error("{} {}: {}", method, req.path, error.what());
    } catch (const std::exception& error) {
      send_message(res, 500, error.what());
      zeus::log().error("{} {}: {}", method, req.path, error.what());
    }
    ++requests_;
    if (zeus::log().should_log(spdlog::level::debug)) {
      const double elapsed_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      zeus::log().debug("{} {} {} {} {:.2f} ms", req.remote_addr, method, req.path, res.status,
                        elapsed_ms);
    }
  };
  for (const char* pattern : {".*"}) {
    server.Get(pattern, handle);
    server.Post(pattern, handle);
    server.Patch(pattern, handle);
    server.Delete(pattern, handle);
    server.Put(pattern, handle);
    server.Options(pattern, handle);
  }
  // Errors the library raises itself (413 payload too large, 400 bad request line) get a JSON
  // body too.
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) {
      return;
    }
    std::string detail = "HTTP error " + std::to_string(res.status);
    if (res.status == 413) {
      detail = "Request body too large";
    } else if (res.status == 400) {
      detail = "Bad Request";
    } else if (res.status == 404) {
      detail = "Not Found";
    } else if (res.status == 405) {
      detail = "Method Not Allowed";
    } else if (res.status == 414) {
      detail = "Request URI too long";
    }
    send_detail(res, res.status, detail);
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_message(res, 500, message);
      });
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  httplib::Server& server = impl_->server;
  bool ok = false;
  if (options_.port == 0) {
    const int port = server.bind_to_any_port(options_.host);
    ok = port > 0;
    port_ = port;
  } else {
    ok = server.bind_to_port(options_.host, options_.port);
    port_ = options_.port;
  }
  if (!ok) {
    throw Error(ErrorKind::kInvalidArgument,
                "cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " +
                    std::strerror(errno) +
                    " (is another server on that port? choose another with --port, or --port 0 "
                    "for any free one)");
  }
  if (impl_->listen_fd >= 0) {
    ::listen(impl_->listen_fd, options_.listen_backlog);
  }
  impl_->bound = true;
  return port_;
}

void HttpServer::serve() {
  if (!impl_->bound) {
    bind();
  }
  if (impl_->stop_requested) {
    return;
  }
  impl_->server.listen_after_bind();
}

void HttpServer::stop() {
  impl_->stop_requested = true;
  impl_->server.stop();
}

bool HttpServer::running() const {
  return impl_->server.is_running();
}

}  // namespace zeus::server
