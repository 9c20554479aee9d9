// zeus_cpp._zeus._ZeusdTransport and _ZeusdEventStream: the HTTP transport under the Python
// zeusd clients (zeus_cpp.utils.zeusd.ZeusdClient, zeus_cpp.monitor.power_streaming), which
// judge statuses and parse JSON themselves. They are the C++ device layer's own client
// (ZeusdConnection, ZeusdEventStream), so there is one HTTP client to zeusd in the project.
// Every blocking call releases the GIL.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "bindings.hpp"
#include "device/zeusd_connection.hpp"
#include "zeus/device/zeusd_stream.hpp"

namespace zeus::python {
namespace {

device::ZeusdConfig config_of(const std::optional<std::string>& socket_path,
                              const std::string& host, int port,
                              const std::optional<std::string>& token, double timeout_s) {
  device::ZeusdConfig config;
  config.socket_path = socket_path;
  config.host = host;
  config.port = port;
  if (token && !token->empty()) {
    config.token = token;
  }
  config.timeout_s = timeout_s;
  return config;
}

}  // namespace

void bind_zeusd(py::module_& module) {
  py::class_<device::ZeusdConnection, std::shared_ptr<device::ZeusdConnection>>(
      module, "_ZeusdTransport",
      "A keep-alive HTTP connection to zeusd (Unix socket when socket_path is given, else "
      "host:port), with the bearer token on every request when one is given.")
      .def(py::init([](const std::optional<std::string>& socket_path, const std::string& host,
                       int port, const std::optional<std::string>& token, double timeout_s) {
             return std::make_shared<device::ZeusdConnection>(
                 config_of(socket_path, host, port, token, timeout_s));
           }),
           py::arg("socket_path") = py::none(), py::arg("host") = "", py::arg("port") = 0,
           py::arg("token") = py::none(), py::arg("timeout_s") = 5.0)
      .def(
          "request",
          [](device::ZeusdConnection& connection, const std::string& method,
             const std::string& path_and_query) {
            device::ZeusdReply reply;
            try {
              py::gil_scoped_release release;
              reply = connection.request(method, path_and_query);
            } catch (const Error& error) {
              if (error.kind() == ErrorKind::kInvalidArgument) {
                throw py::value_error(error.what());
              }
              throw_python_error("ZeusdConnectionError", error.what());
            }
            return std::make_tuple(reply.status, py::bytes(reply.body));
          },
          py::arg("method"), py::arg("path_and_query"),
          "(status, body) of `method` (GET or POST) `path_and_query`, whatever the status. "
          "Raises ZeusdConnectionError when the daemon cannot be reached or does not answer "
          "within timeout_s.");

  py::class_<device::ZeusdEventStream, std::shared_ptr<device::ZeusdEventStream>>(
      module, "_ZeusdEventStream",
      "One SSE stream from zeusd on its own connection; cancel() ends run() from any thread.")
      .def(py::init([](const std::optional<std::string>& socket_path, const std::string& host,
                       int port, const std::optional<std::string>& token, double connect_timeout_s,
                       double idle_timeout_s, std::size_t max_event_bytes) {
             device::ZeusdStreamOptions options;
             options.connect_timeout_s = connect_timeout_s;
             options.idle_timeout_s = idle_timeout_s;
             options.max_event_bytes = max_event_bytes;
             return std::make_shared<device::ZeusdEventStream>(
                 config_of(socket_path, host, port, token, connect_timeout_s), options);
           }),
           py::arg("socket_path") = py::none(), py::arg("host") = "", py::arg("port") = 0,
           py::arg("token") = py::none(), py::arg("connect_timeout_s") = 5.0,
           py::arg("idle_timeout_s") = 60.0, py::arg("max_event_bytes") = 1 << 20)
      .def(
          "run",
          [](device::ZeusdEventStream& stream, const std::string& path_and_query,
             const py::function& on_event, const py::object& on_oversized) {
            // The callbacks run on this (released) thread: each takes the GIL for its call.
            const auto event = [&on_event](std::string_view text) {
              py::gil_scoped_acquire acquire;
              on_event(py::bytes(text.data(), text.size()));
            };
            std::function<void(std::size_t)> oversized;
            if (!on_oversized.is_none()) {
              oversized = [&on_oversized](std::size_t bytes) {
                py::gil_scoped_acquire acquire;
                on_oversized(bytes);
              };
            }
            device::ZeusdStreamOutcome outcome;
            {
              py::gil_scoped_release release;
              outcome = stream.run(path_and_query, event, oversized);
            }
            return std::make_tuple(std::string(device::zeusd_stream_end_name(outcome.end)),
                                   outcome.status, py::bytes(outcome.body), outcome.error);
          },
          py::arg("path_and_query"), py::arg("on_event"), py::arg("on_oversized") = py::none(),
          "GET `path_and_query` and call on_event(bytes) for each event until the stream ends. "
          "Returns (end, status, body, error): end is 'ended', 'refused' (status and body of a "
          "non-200 answer), 'unreachable', 'lost', 'idle' (silence for idle_timeout_s) or "
          "'cancelled'.")
      .def("cancel", &device::ZeusdEventStream::cancel, py::call_guard<py::gil_scoped_release>(),
           "Ends the current run() and makes later ones return 'cancelled' at once.")
      .def_property_readonly("cancelled", &device::ZeusdEventStream::cancelled);
}

}  // namespace zeus::python
