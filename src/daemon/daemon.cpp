// zeusd's routes, validation and per-GPU write serialisation (docs: the zeusd wire protocol).
#include "daemon/daemon.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/log.hpp"
#include "http/host.hpp"
#include "query.hpp"
#include "zeus/common/error.hpp"

namespace zeus::daemon {
namespace {

using Json = nlohmann::ordered_json;

std::uint64_t unix_time_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// ---- Device errors -> status and message ----

int status_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNoPermission:
      return 403;
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kNotSupported:
    case ErrorKind::kNotFound:
      return 400;
    default:
      return 500;
  }
}

struct DeviceFailure {
  int status;
  std::string message;
};

DeviceFailure failure_of(const std::exception& e) {
  if (const auto* vendor = dynamic_cast<const VendorError*>(&e)) {
    return {status_for(vendor->kind()), fmt::format("{} error: {}", vendor->vendor(), e.what())};
  }
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    return {status_for(error->kind()), error->what()};
  }
  return {500, e.what()};
}

HttpError errors_reply(const std::map<int, DeviceFailure>& failures) {
  Json errors = Json::object();
  int status = 400;
  bool first = true;
  for (const auto& [id, failure] : failures) {
    errors[std::to_string(id)] = failure.message;
    status = first ? failure.status : std::max(status, failure.status);
    first = false;
  }
  return {status, "application/json", Json{{"errors", errors}}.dump()};
}

std::string peer_text(const PeerCredentials& peer) {
  if (!peer.known)
    return "peer unknown";
  return fmt::format("peer pid={} uid={} gid={}", peer.pid, peer.uid, peer.gid);
}

// "00000000:3B:00.0" -> "0000:3b:00.0" (the `lspci -D` form the reference reports).
std::string lspci_address(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::size_t colon = bus_id.find(':');
  if (colon != std::string::npos && colon > 4)
    bus_id.erase(0, colon - 4);
  return bus_id;
}

// ---- One worker per GPU: writes to a GPU run one at a time, in arrival order ----

class GpuWorker {
 public:
  GpuWorker() : thread_([this] { run(); }) {}
  ~GpuWorker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty())
          return;  // stopping, queue drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

std::string join_clocks(const std::vector<std::uint32_t>& clocks) {
  std::vector<std::uint32_t> sorted = clocks;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(sorted[i]);
  }
  return out;
}

// A write to one GPU, validated before anything is changed.
struct WriteCommand {
  std::string setting;    // WriteEvent::setting
  std::string new_value;  // WriteEvent::new_value
  std::function<std::string(Gpu&)> read_old;
  std::function<void(Gpu&)> apply;
};

}  // namespace

// ---- Free functions ----

void prepare_socket_path(const std::filesystem::path& socket_path) {
  struct stat info {};
  if (::lstat(socket_path.c_str(), &info) != 0) {
    if (errno != ENOENT) {
      throw Error(ErrorKind::kIo, fmt::format("cannot inspect socket path {}: {}",
                                              socket_path.string(), std::strerror(errno)));
    }
    std::error_code ec;
    if (socket_path.has_parent_path()) {
      std::filesystem::create_directories(socket_path.parent_path(), ec);
      if (ec) {
        throw Error(ErrorKind::kIo, fmt::format("cannot create the socket's directory {}: {}",
                                                socket_path.parent_path().string(), ec.message()));
      }
    }
    return;
  }
  if (!S_ISSOCK(info.st_mode)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} exists and is not a socket; refusing to remove it (remove it "
                            "yourself or choose another --socket-path)",
                            socket_path.string()));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket_path.string();
  if (path.size() >= sizeof(addr.sun_path)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("socket path {} is too long ({} bytes, at most {})", path, path.size(),
                            sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    throw Error(ErrorKind::kOperatingSystem,
                fmt::format("socket(AF_UNIX) failed: {}", std::strerror(errno)));
  }
  const int rc = ::connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int connect_errno = errno;
  ::close(sock);
  if (rc == 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("another daemon is already listening on {}; refusing to start", path));
  }
  if (connect_errno != ECONNREFUSED) {
    throw Error(ErrorKind::kIo,
                fmt::format("cannot tell whether the socket {} is in use (connect: {}); not "
                            "removing it",
                            path, std::strerror(connect_errno)));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw Error(ErrorKind::kIo,
                fmt::format("cannot remove the stale socket {}: {}", path, std::strerror(errno)));
  }
  log().warn("zeusd: removed stale socket {} (nothing was listening)", path);
}

void check_startup_privileges(const DaemonConfig& config, std::optional<GpuBackend> gpu_backend,
                              bool has_root) {
  const bool control =
      !config.read_only && std::find(config.enabled_groups.begin(), config.enabled_groups.end(),
                                     ApiGroup::kGpuControl) != config.enabled_groups.end();
  if (!control || has_root || !gpu_backend || *gpu_backend == GpuBackend::kSimulated)
    return;
  throw Error(ErrorKind::kNoPermission,
              fmt::format("the gpu-control API group changes real GPUs ({}) and needs root or "
                          "CAP_SYS_ADMIN, which this process (uid {}) lacks. Run zeusd as root, or "
                          "start it without control: --read-only or --enable gpu-read,cpu-read",
                          gpu_backend_name(*gpu_backend), ::geteuid()));
}

// ---- The daemon ----

struct Daemon::Impl {
  Daemon& owner;
  DaemonConfig config;
  Gpus gpus;
  std::vector<std::shared_ptr<Cpu>> cpus;
  std::unique_ptr<http::Host> host;
  // "METHOD /path" -> handler
  std::map<std::string, http::Handler> routes;
  std::vector<std::unique_ptr<GpuWorker>> workers;
  bool bound = false;
  bool created_socket = false;
  int port = 0;
  std::mutex stop_mutex;

  Impl(Daemon& daemon, DaemonConfig cfg, Gpus g, std::vector<std::shared_ptr<Cpu>> c)
      : owner(daemon), config(std::move(cfg)), gpus(std::move(g)), cpus(std::move(c)) {
    if (config.read_only) {
      std::erase(config.enabled_groups, ApiGroup::kGpuControl);
    }
    for (std::size_t i = 0; i < gpus.size(); ++i)
      workers.push_back(std::make_unique<GpuWorker>());
    install_routes();
    http::HostOptions options;
    options.name = "zeusd";
    // Requests handled at once; idle, slow and streaming connections hold none of them.
    options.worker_threads = kWorkerThreads;
    options.listen_backlog = SOMAXCONN;
    // zeusd's requests carry everything in the query string.
    options.limits.max_body_bytes = 64 * 1024;
    // On the Unix socket a peer is a uid: one local user cannot take every connection (the
    // host's default share, 256 of 1024).
    options.error_body = [](int status, const std::string& message, http::Response& res) {
      res.status = status;
      res.content_type = "application/json";
      res.body = Json{{"error", message}}.dump(-1, ' ', false, Json::error_handler_t::replace);
    };
    host = std::make_unique<http::Host>(
        std::move(options),
        [this](const http::Request& req, http::Response& res) { handle(req, res); });
  }

  static constexpr int kWorkerThreads = 16;

  void add_route(const std::string& method, const std::string& path, http::Handler handler) {
    routes[method + " " + path] = std::move(handler);
  }

  void handle(const http::Request& req, http::Response& res) {
    if (pre_route(req, res))
      return;
    // Like the reference (actix with per-method route macros): an unknown path, or a known one
    // with another method, is a 404 with an empty body.
    const auto route = routes.find(req.method + " " + req.path);
    if (route == routes.end()) {
      res.status = 404;
      res.content_type = "text/plain; charset=utf-8";
      res.body.clear();
      return;
    }
    route->second(req, res);
  }

  static PeerCredentials peer_of(const http::Request& req) {
    PeerCredentials peer;
    if (req.peer.credentials) {
      peer.known = true;
      peer.pid = req.peer.credentials->pid;
      peer.uid = req.peer.credentials->uid;
      peer.gid = req.peer.credentials->gid;
    }
    return peer;
  }

  static std::chrono::milliseconds period_of(double hz) {
    return std::chrono::milliseconds(std::max<long long>(1, std::llround(1000.0 / hz)));
  }

  static void send_event(std::string& out, const Json& event) {
    out += "data: " + event.dump() + "\n\n";
  }

  // ---- SSE power streams ----
  void install_gpu_stream() {
    add_route(
        "GET", "/gpu/stream_power", wrap([this](const http::Request& req, http::Response& res) {
          Query query(req, {"gpu_ids"});
          std::vector<int> ids;
          if (const auto value = query.optional("gpu_ids")) {
            ids = parse_ids("gpu_ids", *value, "GPU");
            std::vector<int> unknown;
            for (int id : ids) {
              if (static_cast<std::size_t>(id) >= gpus.size())
                unknown.push_back(id);
            }
            if (!unknown.empty()) {
              std::vector<int> available;
              for (std::size_t i = 0; i < gpus.size(); ++i)
                available.push_back(static_cast<int>(i));
              throw json_error(400,
                               fmt::format("Unknown GPU indices: [{}]. Available: [{}]",
                                           fmt::join(unknown, ", "), fmt::join(available, ", ")));
            }
          } else {
            for (std::size_t i = 0; i < gpus.size(); ++i)
              ids.push_back(static_cast<int>(i));
          }
          auto last_mw = std::make_shared<std::vector<std::optional<std::uint32_t>>>(ids.size());
          res.headers.emplace_back("Cache-Control", "no-cache");
          res.content_type = "text/event-stream";
          res.stream = std::make_shared<http::StreamSource>();
          res.stream->period =
              period_of(config.gpu_power_poll_hz > 0 ? config.gpu_power_poll_hz : 20.0);
          // The current values right away, then only changes, once a period.
          res.stream->next = [this, ids, last_mw](std::string& out) {
            for (std::size_t i = 0; i < ids.size(); ++i) {
              std::uint32_t power_mw = 0;
              try {
                power_mw = gpus.at(ids[i]).instant_power_mw();
              } catch (const std::exception& e) {
                log().debug("zeusd: stream: GPU {} power: {}", ids[i], e.what());
                continue;
              }
              if ((*last_mw)[i] == power_mw)
                continue;
              (*last_mw)[i] = power_mw;
              send_event(
                  out,
                  {{"timestamp_ms", unix_time_ms()}, {"gpu_id", ids[i]}, {"power_mw", power_mw}});
            }
            return true;
          };
        }));
  }

  void install_cpu_stream() {
    add_route(
        "GET", "/cpu/stream_power", wrap([this](const http::Request& req, http::Response& res) {
          Query query(req, {"cpu_ids"});
          const auto selected = read_cpus(query);
          struct Baseline {
            std::chrono::steady_clock::time_point time;
            std::uint64_t cpu_uj = 0;
            std::optional<std::uint64_t> dram_uj;
            bool primed = false;
          };
          auto baselines = std::make_shared<std::vector<Baseline>>(selected.size());
          res.headers.emplace_back("Cache-Control", "no-cache");
          res.content_type = "text/event-stream";
          res.stream = std::make_shared<http::StreamSource>();
          res.stream->period =
              period_of(config.cpu_power_poll_hz > 0 ? config.cpu_power_poll_hz : 10.0);
          // The first call only reads the baselines; every later one (a period later) reports.
          res.stream->next = [selected, baselines](std::string& out) {
            for (std::size_t i = 0; i < selected.size(); ++i) {
              Baseline now;
              try {
                now.time = std::chrono::steady_clock::now();
                now.cpu_uj = selected[i]->package_energy_uj();
                if (selected[i]->has_dram())
                  now.dram_uj = selected[i]->dram_energy_uj();
                now.primed = true;
              } catch (const std::exception& e) {
                log().debug("zeusd: stream: CPU {} energy: {}", selected[i]->index(), e.what());
                continue;
              }
              Baseline& before = (*baselines)[i];
              if (before.primed) {
                const double us =
                    std::chrono::duration<double, std::micro>(now.time - before.time).count();
                auto to_mw = [us](std::uint64_t a, std::uint64_t b) {
                  return static_cast<std::uint32_t>(b >= a && us > 0 ? (b - a) * 1000.0 / us : 0.0);
                };
                Json event{{"timestamp_ms", unix_time_ms()},
                           {"cpu_id", selected[i]->index()},
                           {"cpu_mw", to_mw(before.cpu_uj, now.cpu_uj)},
                           {"dram_mw", nullptr}};
                if (before.dram_uj && now.dram_uj) {
                  event["dram_mw"] = to_mw(*before.dram_uj, *now.dram_uj);
                }
                send_event(out, event);
              }
              before = now;
            }
            return true;
          };
        }));
  }

  bool enabled(ApiGroup group) const {
    return std::find(config.enabled_groups.begin(), config.enabled_groups.end(), group) !=
           config.enabled_groups.end();
  }

  // Wraps a handler: HttpError and stray exceptions become replies.
  http::Handler wrap(std::function<void(const http::Request&, http::Response&)> fn) {
    return [fn = std::move(fn)](const http::Request& req, http::Response& res) {
      try {
        fn(req, res);
      } catch (const HttpError& e) {
        res.status = e.status;
        res.body = e.body;
        res.content_type = e.content_type;
      } catch (const std::exception& e) {
        const DeviceFailure failure = failure_of(e);
        res.status = failure.status;
        res.body =
            Json{{"error", failure.message}}.dump(-1, ' ', false, Json::error_handler_t::replace);
        res.content_type = "application/json";
      }
    };
  }

  static void reply_json(http::Response& res, const Json& body) {
    res.status = 200;
    res.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
    res.content_type = "application/json";
  }

  // ---- Middleware: group, then auth ----
  // True when the request was answered here (refused, or /auth/whoami).
  bool pre_route(const http::Request& req, http::Response& res) {
    auto refuse = [&](const HttpError& e) {
      res.status = e.status;
      res.body = e.body;
      res.content_type = e.content_type;
      return true;
    };
    if (const auto group = required_group(req.path); group && !enabled(*group)) {
      return refuse(json_error(404, fmt::format("API group '{}' is not enabled on this server.",
                                                api_group_name(*group))));
    }
    if (req.path == "/discover" || req.path == "/time") {
      return false;
    }
    if (!owner.authorize) {
      if (req.path.rfind("/auth/", 0) == 0) {
        return refuse(json_error(404, "Authentication is not enabled on this server."));
      }
      return false;
    }
    AuthResult result =
        owner.authorize(req.path, std::string(req.header("authorization").value_or("")));
    if (!result.allowed) {
      if (result.www_authenticate)
        res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
      return refuse(json_error(result.status, result.error_message));
    }
    if (req.path == "/auth/whoami") {
      Json body{{"sub", result.subject}, {"scopes", result.scopes}};
      if (result.expires_unix_s)
        body["exp"] = *result.expires_unix_s;
      reply_json(res, body);
      return true;
    }
    return false;
  }

  // ---- Server routes ----
  void discover(const http::Request& req, http::Response& res) {
    Query query(req, {});
    Json gpu_list = Json::array();
    if (enabled(ApiGroup::kGpuRead) || enabled(ApiGroup::kGpuControl)) {
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        Gpu& gpu = gpus.at(static_cast<int>(i));
        gpu_list.push_back({{"id", i},
                            {"name", gpu.name()},
                            {"pci_address", lspci_address(gpu.pci_bus_id())},
                            {"cumulative_energy_available", gpu.supports_energy_counter()}});
      }
    }
    Json cpu_list = Json::array();
    if (enabled(ApiGroup::kCpuRead)) {
      for (const auto& cpu : cpus) {
        cpu_list.push_back({{"id", cpu->index()}, {"dram_available", cpu->has_dram()}});
      }
    }
    Json groups = Json::array();
    for (ApiGroup group : config.enabled_groups)
      groups.push_back(api_group_name(group));
    reply_json(res, {{"gpus", gpu_list},
                     {"cpus", cpu_list},
                     {"enabled_api_groups", groups},
                     {"auth_required", config.auth_required}});
  }

  // ---- GPU reads ----
  std::vector<int> read_gpu_ids(const Query& query) const {
    const auto value = query.optional("gpu_ids");
    std::vector<int> ids;
    if (!value) {
      for (std::size_t i = 0; i < gpus.size(); ++i)
        ids.push_back(static_cast<int>(i));
      return ids;
    }
    ids = parse_ids("gpu_ids", *value, "GPU");
    for (int id : ids) {
      if (static_cast<std::size_t>(id) >= gpus.size()) {
        throw json_error(400, fmt::format("GPU {} not found", id));
      }
    }
    return ids;
  }

  // Reads `fn(gpu)` for each requested GPU into {"<id>": value}; device failures -> errors.
  Json read_each(const std::vector<int>& ids, const std::function<Json(Gpu&)>& fn) const {
    Json out = Json::object();
    std::map<int, DeviceFailure> failures;
    for (int id : ids) {
      try {
        out[std::to_string(id)] = fn(gpus.at(id));
      } catch (const std::exception& e) {
        failures.emplace(id, failure_of(e));
      }
    }
    if (!failures.empty())
      throw errors_reply(failures);
    return out;
  }

  void gpu_read_route(const std::string& path, std::function<Json(Gpu&)> fn) {
    add_route("GET", path, wrap([this, fn](const http::Request& req, http::Response& res) {
                Query query(req, {"gpu_ids"});
                reply_json(res, read_each(read_gpu_ids(query), fn));
              }));
  }

  // ---- GPU writes ----
  std::vector<int> write_gpu_ids(const Query& query) const {
    std::vector<int> ids = parse_ids("gpu_ids", query.required("gpu_ids"), "GPU");
    for (int id : ids) {
      if (static_cast<std::size_t>(id) >= gpus.size()) {
        throw HttpError{400, "text/plain; charset=utf-8",
                        fmt::format("GPU index {} does not exist.", id)};
      }
    }
    return ids;
  }

  // Validates on every GPU first (no device changes on a bad request), then runs the writes on
  // the GPUs' workers; waits for them when `block`.
  void run_writes(const http::Request& req, http::Response& res, const std::vector<int>& ids,
                  bool block, const std::function<std::optional<std::string>(Gpu&)>& validate,
                  const WriteCommand& command) {
    std::map<int, DeviceFailure> failures;
    for (int id : ids) {
      try {
        if (auto problem = validate(gpus.at(id))) {
          failures.emplace(id, DeviceFailure{400, "Invalid request: " + *problem});
        }
      } catch (const std::exception& e) {
        failures.emplace(id, failure_of(e));
      }
    }
    if (!failures.empty()) {
      log().warn("zeusd: refused {} = {} on GPU(s) {} ({}): invalid request", command.setting,
                 command.new_value, fmt::format("{}", fmt::join(ids, ",")),
                 peer_text(peer_of(req)));
      throw errors_reply(failures);
    }

    const PeerCredentials peer = peer_of(req);
    std::vector<std::future<std::optional<DeviceFailure>>> results;
    for (int id : ids) {
      auto promise = std::make_shared<std::promise<std::optional<DeviceFailure>>>();
      results.push_back(promise->get_future());
      workers[static_cast<std::size_t>(id)]->enqueue([this, id, peer, command, promise] {
        Gpu& gpu = gpus.at(id);
        std::optional<DeviceFailure> failure;
        try {
          std::string old_value = "unknown";
          try {
            old_value = command.read_old(gpu);
          } catch (const std::exception& e) {
            log().debug("zeusd: cannot read the old {} of GPU {}: {}", command.setting, id,
                        e.what());
          }
          if (owner.before_write) {
            owner.before_write(WriteEvent{id, command.setting, old_value, command.new_value, peer});
          }
          command.apply(gpu);
          log().info("zeusd: GPU {} {}: {} -> {} ({})", id, command.setting, old_value,
                     command.new_value, peer_text(peer));
          if (owner.on_write) {
            owner.on_write(WriteEvent{id, command.setting, old_value, command.new_value, peer});
          }
        } catch (const std::exception& e) {
          failure = failure_of(e);
          log().error("zeusd: GPU {} {} = {} failed ({}): {}", id, command.setting,
                      command.new_value, peer_text(peer), failure->message);
        }
        promise->set_value(failure);
      });
    }
    if (block) {
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (auto failure = results[i].get())
          failures.emplace(ids[i], *failure);
      }
      if (!failures.empty())
        throw errors_reply(failures);
    }
    res.status = 200;  // empty body
  }

  static std::optional<std::string> check_clocks(const std::string& domain, std::uint32_t min_mhz,
                                                 std::uint32_t max_mhz,
                                                 const std::vector<std::uint32_t>& supported) {
    if (min_mhz > max_mhz) {
      return fmt::format("min_clock_mhz {} is greater than max_clock_mhz {}", min_mhz, max_mhz);
    }
    for (std::uint32_t clock : {min_mhz, max_mhz}) {
      if (std::find(supported.begin(), supported.end(), clock) == supported.end()) {
        return fmt::format("{} clock {} MHz is not supported by this GPU (supported: {})", domain,
                           clock, join_clocks(supported));
      }
    }
    return std::nullopt;
  }

  void install_write_routes() {
    add_route("POST", "/gpu/set_power_limit",
              wrap([this](const http::Request& req, http::Response& res) {
                Query query(req, {"gpu_ids", "power_limit_mw", "block"});
                const std::uint32_t limit_mw = query.u32("power_limit_mw");
                const bool block = query.boolean("block");
                // Every field parses before the ids are checked (serde's order).
                const auto ids = write_gpu_ids(query);
                run_writes(
                    req, res, ids, block,
                    [limit_mw](Gpu& gpu) -> std::optional<std::string> {
                      const PowerLimitConstraints c = gpu.power_limit_constraints_mw();
                      if (limit_mw < c.min_mw || limit_mw > c.max_mw) {
                        return fmt::format("Power limit {} mW is outside the valid range {}-{} mW",
                                           limit_mw, c.min_mw, c.max_mw);
                      }
                      return std::nullopt;
                    },
                    WriteCommand{"power_limit_mw", std::to_string(limit_mw),
                                 [](Gpu& gpu) { return std::to_string(gpu.power_limit_mw()); },
                                 [limit_mw](Gpu& gpu) { gpu.set_power_limit_mw(limit_mw); }});
              }));

    add_route(
        "POST", "/gpu/set_persistence_mode",
        wrap([this](const http::Request& req, http::Response& res) {
          Query query(req, {"gpu_ids", "enabled", "block"});
          const bool enabled_mode = query.boolean("enabled");
          const bool block = query.boolean("block");
          // Every field parses before the ids are checked (serde's order).
          const auto ids = write_gpu_ids(query);
          run_writes(
              req, res, ids, block, [](Gpu&) -> std::optional<std::string> { return std::nullopt; },
              WriteCommand{
                  "persistence_mode", enabled_mode ? "true" : "false",
                  [](Gpu& gpu) -> std::string { return gpu.persistence_mode() ? "true" : "false"; },
                  [enabled_mode](Gpu& gpu) { gpu.set_persistence_mode(enabled_mode); }});
        }));

    auto set_clocks = [this](const std::string& path, bool memory) {
      add_route("POST", path, wrap([this, memory](const http::Request& req, http::Response& res) {
                  Query query(req, {"gpu_ids", "min_clock_mhz", "max_clock_mhz", "block"});
                  const std::uint32_t min_mhz = query.u32("min_clock_mhz");
                  const std::uint32_t max_mhz = query.u32("max_clock_mhz");
                  const bool block = query.boolean("block");
                  // Every field parses before the ids are checked (serde's order).
                  const auto ids = write_gpu_ids(query);
                  run_writes(
                      req, res, ids, block,
                      [=](Gpu& gpu) {
                        return memory
                                   ? check_clocks("Memory", min_mhz, max_mhz,
                                                  gpu.supported_memory_clocks_mhz())
                                   : check_clocks("Graphics", min_mhz, max_mhz,
                                                  gpu.supported_graphics_clocks_mhz(std::nullopt));
                      },
                      WriteCommand{memory ? "mem_locked_clocks_mhz" : "gpu_locked_clocks_mhz",
                                   fmt::format("{}-{}", min_mhz, max_mhz),
                                   [](Gpu&) -> std::string { return "unknown"; },
                                   [=](Gpu& gpu) {
                                     if (memory) {
                                       gpu.set_memory_locked_clocks_mhz(min_mhz, max_mhz);
                                     } else {
                                       gpu.set_gpu_locked_clocks_mhz(min_mhz, max_mhz);
                                     }
                                   }});
                }));
    };
    set_clocks("/gpu/set_gpu_locked_clocks", false);
    set_clocks("/gpu/set_mem_locked_clocks", true);

    auto reset_clocks = [this](const std::string& path, std::string setting,
                               std::function<void(Gpu&)> apply) {
      add_route("POST", path,
                wrap([this, setting, apply](const http::Request& req, http::Response& res) {
                  Query query(req, {"gpu_ids", "block"});
                  const bool block = query.boolean("block");
                  // Every field parses before the ids are checked (serde's order).
                  const auto ids = write_gpu_ids(query);
                  run_writes(
                      req, res, ids, block,
                      [](Gpu&) -> std::optional<std::string> { return std::nullopt; },
                      WriteCommand{setting, "reset", [](Gpu&) -> std::string { return "unknown"; },
                                   apply});
                }));
    };
    reset_clocks("/gpu/reset_gpu_locked_clocks", "gpu_locked_clocks_mhz",
                 [](Gpu& gpu) { gpu.reset_gpu_locked_clocks(); });
    reset_clocks("/gpu/reset_mem_locked_clocks", "mem_locked_clocks_mhz",
                 [](Gpu& gpu) { gpu.reset_memory_locked_clocks(); });
    reset_clocks("/gpu/reset_locked_clocks", "locked_clocks_mhz",
                 [](Gpu& gpu) { gpu.reset_locked_clocks(); });
  }

  // ---- CPU reads ----
  std::vector<std::shared_ptr<Cpu>> read_cpus(const Query& query) const {
    const auto value = query.optional("cpu_ids");
    if (!value)
      return cpus;
    std::vector<std::shared_ptr<Cpu>> out;
    for (int id : parse_ids("cpu_ids", *value, "CPU")) {
      auto it = std::find_if(cpus.begin(), cpus.end(),
                             [id](const auto& cpu) { return cpu->index() == id; });
      if (it == cpus.end())
        throw json_error(400, fmt::format("CPU {} not found", id));
      out.push_back(*it);
    }
    return out;
  }

  void install_cpu_routes() {
    add_route("GET", "/cpu/get_cumulative_energy",
              wrap([this](const http::Request& req, http::Response& res) {
                Query query(req, {"cpu_ids", "cpu", "dram"});
                const bool want_cpu = query.boolean("cpu");
                const bool want_dram = query.boolean("dram");
                const auto selected = read_cpus(query);
                Json out = Json::object();
                std::map<int, DeviceFailure> failures;
                for (const auto& cpu : selected) {
                  try {
                    Json entry{{"cpu_energy_uj", nullptr}, {"dram_energy_uj", nullptr}};
                    if (want_cpu)
                      entry["cpu_energy_uj"] = cpu->package_energy_uj();
                    if (want_dram && cpu->has_dram())
                      entry["dram_energy_uj"] = cpu->dram_energy_uj();
                    out[std::to_string(cpu->index())] = entry;
                  } catch (const std::exception& e) {
                    failures.emplace(cpu->index(), failure_of(e));
                  }
                }
                if (!failures.empty())
                  throw errors_reply(failures);
                reply_json(res, out);
              }));

    add_route(
        "GET", "/cpu/get_power", wrap([this](const http::Request& req, http::Response& res) {
          Query query(req, {"cpu_ids"});
          const auto selected = read_cpus(query);
          struct Sample {
            std::uint64_t cpu_uj;
            std::optional<std::uint64_t> dram_uj;
          };
          auto sample = [&] {
            std::vector<Sample> out;
            for (const auto& cpu : selected) {
              out.push_back({cpu->package_energy_uj(), cpu->has_dram()
                                                           ? std::optional(cpu->dram_energy_uj())
                                                           : std::nullopt});
            }
            return out;
          };
          const auto start = std::chrono::steady_clock::now();
          const auto first = sample();
          const double hz = config.cpu_power_poll_hz > 0 ? config.cpu_power_poll_hz : 10.0;
          std::this_thread::sleep_for(std::chrono::duration<double>(1.0 / hz));
          const auto second = sample();
          const double elapsed_us =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count();
          auto to_mw = [elapsed_us](std::uint64_t a, std::uint64_t b) {
            return static_cast<std::uint32_t>(b >= a ? (b - a) * 1000.0 / elapsed_us : 0.0);
          };
          Json power = Json::object();
          for (std::size_t i = 0; i < selected.size(); ++i) {
            Json entry{{"cpu_mw", to_mw(first[i].cpu_uj, second[i].cpu_uj)}, {"dram_mw", nullptr}};
            if (first[i].dram_uj && second[i].dram_uj) {
              entry["dram_mw"] = to_mw(*first[i].dram_uj, *second[i].dram_uj);
            }
            power[std::to_string(selected[i]->index())] = entry;
          }
          reply_json(res, {{"timestamp_ms", unix_time_ms()}, {"power_mw", power}});
        }));
  }

  void install_routes() {
    add_route("GET", "/discover",
              wrap([this](const http::Request& req, http::Response& res) { discover(req, res); }));
    add_route("GET", "/time", wrap([](const http::Request& req, http::Response& res) {
                Query query(req, {});
                reply_json(res, {{"timestamp_ms", unix_time_ms()}});
              }));

    if (enabled(ApiGroup::kGpuRead)) {
      gpu_read_route("/gpu/get_cumulative_energy", [](Gpu& gpu) -> Json {
        return {{"energy_mj", gpu.total_energy_mj()}};
      });
      gpu_read_route("/gpu/get_power_limit", [](Gpu& gpu) -> Json {
        return {{"power_limit_mw", gpu.power_limit_mw()}};
      });
      gpu_read_route("/gpu/get_power_limit_constraints", [](Gpu& gpu) -> Json {
        const PowerLimitConstraints c = gpu.power_limit_constraints_mw();
        return {{"min_power_limit_mw", c.min_mw}, {"max_power_limit_mw", c.max_mw}};
      });
      gpu_read_route("/gpu/get_persistence_mode", [](Gpu& gpu) -> Json {
        return {{"enabled", gpu.persistence_mode()}};
      });
      add_route("GET", "/gpu/get_power",
                wrap([this](const http::Request& req, http::Response& res) {
                  Query query(req, {"gpu_ids"});
                  Json power = read_each(read_gpu_ids(query),
                                         [](Gpu& gpu) -> Json { return gpu.instant_power_mw(); });
                  reply_json(res, {{"timestamp_ms", unix_time_ms()}, {"power_mw", power}});
                }));
    }
    if (enabled(ApiGroup::kGpuRead)) {
      install_gpu_stream();
    }
    if (enabled(ApiGroup::kGpuControl)) {
      install_write_routes();
    }
    if (enabled(ApiGroup::kCpuRead)) {
      install_cpu_routes();
      install_cpu_stream();
    }
  }
};

Daemon::Daemon(DaemonConfig config, Gpus gpus, std::vector<std::shared_ptr<Cpu>> cpus)
    : impl_(std::make_unique<Impl>(*this, std::move(config), std::move(gpus), std::move(cpus))) {}

Daemon::~Daemon() {
  stop();
}

const DaemonConfig& Daemon::config() const {
  return impl_->config;
}

void Daemon::bind() {
  Impl& d = *impl_;
  if (d.bound)
    throw Error(ErrorKind::kInvalidArgument, "zeusd: bind() called twice");
  if (d.config.mode == TransportMode::kUds) {
    const std::string path = d.config.socket_path.string();
    prepare_socket_path(d.config.socket_path);
    // Never world-accessible, not even between bind() and chmod().
    const mode_t old_mask = ::umask(0177);
    try {
      d.host->bind_unix(path);
    } catch (const http::BindError& e) {
      ::umask(old_mask);
      throw Error(ErrorKind::kIo, e.what());
    }
    ::umask(old_mask);
    d.created_socket = true;
    if (::chmod(path.c_str(), d.config.socket_permissions) != 0) {
      throw Error(ErrorKind::kIo,
                  fmt::format("cannot chmod {:o} the socket {}: {}", d.config.socket_permissions,
                              path, std::strerror(errno)));
    }
    if (d.config.socket_uid || d.config.socket_gid) {
      const uid_t uid = d.config.socket_uid.value_or(static_cast<uid_t>(-1));
      const gid_t gid = d.config.socket_gid.value_or(static_cast<gid_t>(-1));
      if (::chown(path.c_str(), uid, gid) != 0) {
        throw Error(ErrorKind::kNoPermission,
                    fmt::format("cannot chown the socket {} to uid {} gid {}: {}", path,
                                d.config.socket_uid ? std::to_string(uid) : "(unchanged)",
                                d.config.socket_gid ? std::to_string(gid) : "(unchanged)",
                                std::strerror(errno)));
      }
    }
    log().info("zeusd: listening on {} (mode {:o})", path, d.config.socket_permissions);
  } else {
    const std::string& address = d.config.tcp_bind_address;
    const std::size_t colon = address.rfind(':');
    int port = -1;
    if (colon != std::string::npos) {
      const auto [end, ec] =
          std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
      if (ec != std::errc() || end != address.data() + address.size() || port < 0 || port > 65535) {
        port = -1;
      }
    }
    if (port < 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--tcp-bind-address must be host:port, got '{}'", address));
    }
    std::string host = address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    try {
      port = d.host->bind_tcp(host, port);
    } catch (const http::BindError& e) {
      throw Error(ErrorKind::kIo, fmt::format("cannot bind TCP {}: {}{}", address, e.what(),
                                              e.error_number() == EADDRINUSE ? " (in use?)" : ""));
    }
    d.port = port;
    log().info("zeusd: listening on tcp {}:{}", host, port);
    if (!d.owner.authorize) {
      log().warn(
          "zeusd: TCP mode without authentication: anyone who can reach {}:{} may use "
          "every enabled API group",
          host, port);
    }
  }
  d.bound = true;
}

void Daemon::run_serialized(int gpu_index, const std::function<void()>& action) {
  if (gpu_index < 0 || static_cast<std::size_t>(gpu_index) >= impl_->workers.size()) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("GPU index {} does not exist ({} GPUs)",
                                                         gpu_index, impl_->workers.size()));
  }
  std::promise<void> done;
  impl_->workers[static_cast<std::size_t>(gpu_index)]->enqueue([&action, &done] {
    try {
      action();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  done.get_future().get();
}

int Daemon::tcp_port() const {
  return impl_->port;
}

void Daemon::serve() {
  if (!impl_->bound)
    bind();
  impl_->host->serve();
}

void Daemon::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  impl_->host->stop();
  if (impl_->created_socket) {
    ::unlink(impl_->config.socket_path.c_str());
    impl_->created_socket = false;
  }
}

bool Daemon::is_running() const {
  return impl_->host->running();
}

}  // namespace zeus::daemon
