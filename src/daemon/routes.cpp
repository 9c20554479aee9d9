// zeusd's routes (docs: the zeusd wire protocol): the middleware, then one handler per path.
#include "daemon/routes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "common/log.hpp"
#include "common/text.hpp"
#include "daemon/power_stream.hpp"
#include "device/clock_range.hpp"

namespace zeus::daemon {
namespace {

// "00000000:3B:00.0" -> "0000:3b:00.0" (the `lspci -D` form the reference reports).
std::string lspci_address(const std::string& address) {
  std::string bus_id = text::ascii_lower(address);
  const std::size_t colon = bus_id.find(':');
  if (colon != std::string::npos && colon > 4) {
    bus_id.erase(0, colon - 4);
  }
  return bus_id;
}

std::optional<std::string> no_check(device::Gpu&) {
  return std::nullopt;
}

// An unknown path, and a known one asked with another method.
void empty_not_found(const http::Request&, http::Response& res) {
  res.status = 404;
  res.content_type = "text/plain; charset=utf-8";
  res.body.clear();
}

std::vector<int> all_indices(std::size_t count) {
  std::vector<int> ids;
  for (std::size_t i = 0; i < count; ++i) {
    ids.push_back(static_cast<int>(i));
  }
  return ids;
}

}  // namespace

Routes::Routes(const DaemonConfig& config, device::Gpus& gpus,
               const std::vector<std::shared_ptr<device::Cpu>>& cpus, GpuWriters& writers,
               AuthorizeHook authorize, std::shared_ptr<const Clock> clock)
    : config_(config),
      gpus_(gpus),
      cpus_(cpus),
      writers_(writers),
      authorize_(std::move(authorize)),
      clock_(std::move(clock)),
      gpu_power_feeds_(gpus) {
  install_server_routes();
  if (config_.enabled(ApiGroup::kGpuRead)) {
    install_gpu_reads();
  }
  if (config_.enabled(ApiGroup::kGpuControl)) {
    install_gpu_writes();
  }
  if (config_.enabled(ApiGroup::kCpuRead)) {
    install_cpu_reads();
  }
}

void Routes::add(const std::string& method, const std::string& path, RouteHandler handler) {
  router_.add(method, path, wrap(std::move(handler)));
}

void Routes::handle(const http::Request& req, http::Response& res) const {
  if (pre_route(req, res)) {
    return;
  }
  // Like the reference (actix with per-method route macros): an unknown path, or a known one
  // with another method, is a 404 with an empty body.
  static const http::Router::NoRoute kNoRoute{empty_not_found, nullptr};
  router_.dispatch(req, req.path, res, kNoRoute);
}

// ---- Middleware: group, then auth ----

bool Routes::pre_route(const http::Request& req, http::Response& res) const {
  auto refuse = [&](const HttpError& e) {
    reply_error(res, e);
    return true;
  };
  if (const auto group = required_group(req.path); group && !config_.enabled(*group)) {
    return refuse(json_error(
        404, fmt::format("API group '{}' is not enabled on this server.", api_group_name(*group))));
  }
  if (req.path == "/discover" || req.path == "/time") {
    return false;
  }
  if (!authorize_) {
    if (req.path.rfind("/auth/", 0) == 0) {
      return refuse(json_error(404, "Authentication is not enabled on this server."));
    }
    return false;
  }
  AuthResult result = authorize_(req.path, std::string(req.header("authorization").value_or("")));
  if (!result.allowed) {
    if (result.www_authenticate) {
      res.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"zeusd\"");
    }
    return refuse(json_error(result.status, result.error_message));
  }
  if (req.path == "/auth/whoami") {
    Json body{{"sub", result.subject}, {"scopes", result.scopes}};
    if (result.expires_unix_s) {
      body["exp"] = *result.expires_unix_s;
    }
    reply_json(res, body);
    return true;
  }
  return false;
}

// ---- Server routes ----

void Routes::install_server_routes() {
  add("GET", "/discover",
      [this](const http::Request& req, http::Response& res) { discover(req, res); });
  add("GET", "/time", [](const http::Request& req, http::Response& res) {
    Query query(req, {});
    reply_json(res, {{"timestamp_ms", unix_time_ms()}});
  });
}

void Routes::discover(const http::Request& req, http::Response& res) const {
  Query query(req, {});
  Json gpu_list = Json::array();
  if (config_.enabled(ApiGroup::kGpuRead) || config_.enabled(ApiGroup::kGpuControl)) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      device::Gpu& gpu = gpus_.at(static_cast<int>(i));
      gpu_list.push_back({{"id", i},
                          {"name", gpu.name()},
                          {"pci_address", lspci_address(gpu.pci_bus_id())},
                          {"cumulative_energy_available", gpu.supports_energy_counter()}});
    }
  }
  Json cpu_list = Json::array();
  if (config_.enabled(ApiGroup::kCpuRead)) {
    for (const auto& cpu : cpus_) {
      cpu_list.push_back({{"id", cpu->index()}, {"dram_available", cpu->has_dram()}});
    }
  }
  Json groups = Json::array();
  for (ApiGroup group : config_.enabled_groups) {
    groups.push_back(api_group_name(group));
  }
  reply_json(res, {{"gpus", gpu_list},
                   {"cpus", cpu_list},
                   {"enabled_api_groups", groups},
                   {"auth_required", config_.auth_required}});
}

// ---- GPU reads ----

std::vector<int> Routes::read_gpu_ids(const Query& query) const {
  const auto value = query.optional("gpu_ids");
  if (!value) {
    return all_indices(gpus_.size());
  }
  std::vector<int> ids = parse_ids("gpu_ids", *value, "GPU");
  for (int id : ids) {
    if (static_cast<std::size_t>(id) >= gpus_.size()) {
      throw json_error(400, fmt::format("GPU {} not found", id));
    }
  }
  return ids;
}

// Reads `read(gpu)` for each requested GPU into {"<id>": value}; device failures -> errors.
Json Routes::read_each(const std::vector<int>& ids,
                       const std::function<Json(device::Gpu&)>& read) const {
  Json out = Json::object();
  std::map<int, DeviceFailure> failures;
  for (int id : ids) {
    try {
      out[std::to_string(id)] = read(gpus_.at(id));
    } catch (const std::exception& e) {
      failures.emplace(id, failure_of(e));
    }
  }
  if (!failures.empty()) {
    throw errors_reply(failures);
  }
  return out;
}

void Routes::gpu_read(const std::string& path, std::function<Json(device::Gpu&)> read) {
  add("GET", path, [this, read](const http::Request& req, http::Response& res) {
    Query query(req, {"gpu_ids"});
    reply_json(res, read_each(read_gpu_ids(query), read));
  });
}

void Routes::install_gpu_reads() {
  gpu_read("/gpu/get_cumulative_energy", [](device::Gpu& gpu) -> Json {
    return {{"energy_mj", gpu.total_energy_mj()}};
  });
  gpu_read("/gpu/get_power_limit", [](device::Gpu& gpu) -> Json {
    return {{"power_limit_mw", gpu.power_limit_mw()}};
  });
  gpu_read("/gpu/get_power_limit_constraints", [](device::Gpu& gpu) -> Json {
    const device::PowerLimitConstraints c = gpu.power_limit_constraints_mw();
    return {{"min_power_limit_mw", c.min_mw}, {"max_power_limit_mw", c.max_mw}};
  });
  gpu_read("/gpu/get_persistence_mode", [](device::Gpu& gpu) -> Json {
    return {{"enabled", gpu.persistence_mode()}};
  });
  add("GET", "/gpu/get_power", [this](const http::Request& req, http::Response& res) {
    Query query(req, {"gpu_ids"});
    Json power = read_each(read_gpu_ids(query),
                           [](device::Gpu& gpu) -> Json { return gpu.instant_power_mw(); });
    reply_json(res, {{"timestamp_ms", unix_time_ms()}, {"power_mw", power}});
  });
  add("GET", "/gpu/stream_power", [this](const http::Request& req, http::Response& res) {
    Query query(req, {"gpu_ids"});
    std::vector<int> ids = all_indices(gpus_.size());
    if (const auto value = query.optional("gpu_ids")) {
      ids = parse_ids("gpu_ids", *value, "GPU");
      std::vector<int> unknown;
      for (int id : ids) {
        if (static_cast<std::size_t>(id) >= gpus_.size()) {
          unknown.push_back(id);
        }
      }
      if (!unknown.empty()) {
        throw json_error(
            400, fmt::format("Unknown GPU indices: [{}]. Available: [{}]", fmt::join(unknown, ", "),
                             fmt::join(all_indices(gpus_.size()), ", ")));
      }
    }
    gpu_power_feeds_.stream(res, std::move(ids), config_.gpu_power_poll_hz);
  });
}

// ---- GPU writes ----

std::vector<int> Routes::write_gpu_ids(const Query& query) const {
  std::vector<int> ids = parse_ids("gpu_ids", query.required("gpu_ids"), "GPU");
  for (int id : ids) {
    if (static_cast<std::size_t>(id) >= gpus_.size()) {
      throw HttpError{400, "text/plain; charset=utf-8",
                      fmt::format("GPU index {} does not exist.", id)};
    }
  }
  return ids;
}

// Validates on every GPU first (no device changes on a bad request), then runs the writes on
// the GPUs' workers; waits for them when `block`.
void Routes::run_writes(const http::Request& req, http::Response& res, const std::vector<int>& ids,
                        bool block, const PlannedWrite& planned) {
  const PeerCredentials peer = peer_of(req);
  std::map<int, DeviceFailure> failures;
  for (int id : ids) {
    try {
      if (auto problem = planned.validate(gpus_.at(id))) {
        failures.emplace(id, DeviceFailure{400, "Invalid request: " + *problem});
      }
    } catch (const std::exception& e) {
      failures.emplace(id, failure_of(e));
    }
  }
  const GpuWrite& write = planned.write;
  if (!failures.empty()) {
    log().warn("zeusd: refused {} = {} on GPU(s) {} ({}): invalid request", write.field,
               write.value ? value_text(write.settings.front(), *write.value) : "reset",
               fmt::format("{}", fmt::join(ids, ",")), peer_text(peer));
    throw errors_reply(failures);
  }
  std::vector<std::future<std::optional<DeviceFailure>>> results;
  for (int id : ids) {
    results.push_back(writers_.submit(id, write, peer));
  }
  if (block) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (auto failure = results[i].get()) {
        failures.emplace(ids[i], *failure);
      }
    }
    if (!failures.empty()) {
      throw errors_reply(failures);
    }
  }
  res.status = 200;  // empty body
}

void Routes::gpu_write(const std::string& path, std::vector<std::string_view> fields,
                       std::function<PlannedWrite(const Query&)> parse) {
  fields.insert(fields.begin(), "gpu_ids");
  fields.push_back("block");
  add("POST", path, [this, fields, parse](const http::Request& req, http::Response& res) {
    Query query(req, fields);
    const PlannedWrite planned = parse(query);
    const bool block = query.boolean("block");
    // Every field parses before the ids are checked (serde's order).
    const auto ids = write_gpu_ids(query);
    run_writes(req, res, ids, block, planned);
  });
}

void Routes::install_gpu_writes() {
  gpu_write("/gpu/set_power_limit", {"power_limit_mw"}, [](const Query& query) {
    const std::uint32_t limit_mw = query.u32("power_limit_mw");
    return PlannedWrite{
        {"power_limit_mw", {Setting::kPowerLimit}, SettingValue::power_limit(limit_mw), {}},
        [limit_mw](device::Gpu& gpu) -> std::optional<std::string> {
          const device::PowerLimitConstraints c = gpu.power_limit_constraints_mw();
          if (limit_mw < c.min_mw || limit_mw > c.max_mw) {
            return fmt::format("Power limit {} mW is outside the valid range {}-{} mW", limit_mw,
                               c.min_mw, c.max_mw);
          }
          return std::nullopt;
        }};
  });
  gpu_write("/gpu/set_persistence_mode", {"enabled"}, [](const Query& query) {
    return PlannedWrite{{"persistence_mode",
                         {Setting::kPersistenceMode},
                         SettingValue::persistence(query.boolean("enabled")),
                         {}},
                        no_check};
  });
  for (const bool memory : {false, true}) {
    const Setting setting = memory ? Setting::kMemoryLockedClocks : Setting::kGpuLockedClocks;
    gpu_write(memory ? "/gpu/set_mem_locked_clocks" : "/gpu/set_gpu_locked_clocks",
              {"min_clock_mhz", "max_clock_mhz"}, [memory, setting](const Query& query) {
                const std::uint32_t min_mhz = query.u32("min_clock_mhz");
                const std::uint32_t max_mhz = query.u32("max_clock_mhz");
                return PlannedWrite{
                    {std::string(setting_field(setting)),
                     {setting},
                     SettingValue::locked_clocks(ClockRangeMhz{min_mhz, max_mhz}),
                     {}},
                    [=](device::Gpu& gpu) {
                      // A range, as NVML takes it: the driver picks supported clocks inside.
                      return memory ? device::clock_range_problem("Memory", min_mhz, max_mhz,
                                                                  gpu.supported_memory_clocks_mhz())
                                    : device::clock_range_problem(
                                          "Graphics", min_mhz, max_mhz,
                                          gpu.supported_graphics_clocks_mhz(std::nullopt));
                    }};
              });
  }
  auto reset_route = [this](const std::string& path, GpuWrite write) {
    gpu_write(path, {}, [write](const Query&) { return PlannedWrite{write, no_check}; });
  };
  reset_route(
      "/gpu/reset_gpu_locked_clocks",
      {"gpu_locked_clocks_mhz", {Setting::kGpuLockedClocks}, std::nullopt, [](device::Gpu& gpu) {
         gpu.reset_gpu_locked_clocks();
       }});
  reset_route(
      "/gpu/reset_mem_locked_clocks",
      {"mem_locked_clocks_mhz", {Setting::kMemoryLockedClocks}, std::nullopt, [](device::Gpu& gpu) {
         gpu.reset_memory_locked_clocks();
       }});
  reset_route("/gpu/reset_locked_clocks",
              {"locked_clocks_mhz",
               {Setting::kGpuLockedClocks, Setting::kMemoryLockedClocks},
               std::nullopt,
               [](device::Gpu& gpu) { gpu.reset_locked_clocks(); }});
}

// ---- CPU reads ----

std::vector<std::shared_ptr<device::Cpu>> Routes::read_cpus(const Query& query) const {
  const auto value = query.optional("cpu_ids");
  if (!value) {
    return cpus_;
  }
  std::vector<std::shared_ptr<device::Cpu>> out;
  for (int id : parse_ids("cpu_ids", *value, "CPU")) {
    auto it = std::find_if(cpus_.begin(), cpus_.end(),
                           [id](const auto& cpu) { return cpu->index() == id; });
    if (it == cpus_.end()) {
      throw json_error(400, fmt::format("CPU {} not found", id));
    }
    out.push_back(*it);
  }
  return out;
}

void Routes::install_cpu_reads() {
  add("GET", "/cpu/get_cumulative_energy", [this](const http::Request& req, http::Response& res) {
    Query query(req, {"cpu_ids", "cpu", "dram"});
    const bool want_cpu = query.boolean("cpu");
    const bool want_dram = query.boolean("dram");
    const auto selected = read_cpus(query);
    Json out = Json::object();
    std::map<int, DeviceFailure> failures;
    for (const auto& cpu : selected) {
      try {
        Json entry{{"cpu_energy_uj", nullptr}, {"dram_energy_uj", nullptr}};
        if (want_cpu) {
          entry["cpu_energy_uj"] = cpu->package_energy_uj();
        }
        if (want_dram && cpu->has_dram()) {
          entry["dram_energy_uj"] = cpu->dram_energy_uj();
        }
        out[std::to_string(cpu->index())] = entry;
      } catch (const std::exception& e) {
        failures.emplace(cpu->index(), failure_of(e));
      }
    }
    if (!failures.empty()) {
      throw errors_reply(failures);
    }
    reply_json(res, out);
  });
  add("GET", "/cpu/get_power", [this](const http::Request& req, http::Response& res) {
    Query query(req, {"cpu_ids"});
    reply_json(res, sample_cpu_power(read_cpus(query), config_.cpu_power_poll_hz, *clock_));
  });
  add("GET", "/cpu/stream_power", [this](const http::Request& req, http::Response& res) {
    Query query(req, {"cpu_ids"});
    stream_cpu_power(res, read_cpus(query), config_.cpu_power_poll_hz, clock_);
  });
}

}  // namespace zeus::daemon
