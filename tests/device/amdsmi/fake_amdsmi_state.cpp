// The fake AMD SMI's script and state, and the fake_amdsmi_* functions tests call to script it
// (fake_amdsmi.hpp).
#include "fake_amdsmi.hpp"

namespace fake_amdsmi {

State& state() {
  static State instance;
  return instance;
}

const char* const kBuild = "fake-amdsmi";

bool new_layout(const State& s) {
  return !s.version.empty() && s.version[0] >= 25;
}

std::uint64_t parse_bdf(const std::string& text) {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  unsigned function = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    throw std::runtime_error("bad bdf " + text);
  }
  return (static_cast<std::uint64_t>(domain) << 16) | (static_cast<std::uint64_t>(bus) << 8) |
         (static_cast<std::uint64_t>(device & 0x1Fu) << 3) | (function & 0x7u);
}

std::optional<std::uint32_t> optional_watts(const nlohmann::json& device, const char* key,
                                            std::optional<std::uint32_t> fallback) {
  if (!device.contains(key)) {
    return fallback;
  }
  if (device.at(key).is_null()) {
    return std::nullopt;
  }
  return device.at(key).get<std::uint32_t>();
}

void apply_script(State& s, const nlohmann::json& script) {
  s.version = script.value("version", std::vector<std::uint32_t>{26, 1, 0});
  s.entry_delay_us = script.value("entry_delay_us", 0);
  s.devices.clear();
  s.sockets.clear();
  s.status.clear();
  const auto devices = script.value("devices", nlohmann::json::array());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto& in = devices[i];
    Device d;
    d.name = in.value("name", "AMD Instinct MI300X");
    d.uuid = in.value("uuid", "00000000-0000-0000-0000-00000000000" + std::to_string(i));
    d.bdf = parse_bdf(in.value("bdf", "0000:0" + std::to_string(i + 1) + ":00.0"));
    d.hip_id = in.value("hip_id", static_cast<std::uint32_t>(i));
    d.node_id = in.value("node_id", static_cast<std::uint32_t>(i + 1));
    d.socket = in.value("socket", static_cast<std::uint32_t>(i));
    d.max_power_cap_uw = in.value("max_power_cap_uw", std::uint64_t{750'000'000});
    d.min_power_cap_uw = in.value("min_power_cap_uw", std::uint64_t{0});
    d.default_power_cap_uw = in.value("default_power_cap_uw", d.max_power_cap_uw);
    d.power_cap_uw = in.value("power_cap_uw", d.default_power_cap_uw);
    d.current_socket_power_w = optional_watts(in, "current_socket_power_w", 100);
    d.average_socket_power_w = optional_watts(in, "average_socket_power_w", 100);
    d.energy_counts = static_cast<long double>(in.value("energy_accumulator", std::uint64_t{0}));
    d.energy_resolution_uj = in.value("energy_resolution_uj", 15.3F);
    const double default_counter_power =
        d.average_socket_power_w ? *d.average_socket_power_w
                                 : (d.current_socket_power_w ? *d.current_socket_power_w : 0.0);
    d.counter_power_w = in.value("counter_power_w", default_counter_power);
    d.temperature_c = in.value("temperature_c", std::int64_t{40});
    d.gfx_clocks_mhz = in.value("gfx_clocks_mhz", std::vector<std::uint64_t>{500, 1700, 2100});
    d.mem_clocks_mhz = in.value("mem_clocks_mhz", std::vector<std::uint64_t>{900, 1300});
    d.driver_version = in.value("driver_version", "6.8.5");
    s.devices.push_back(std::move(d));
  }
  for (const auto& d : s.devices) {
    bool seen = false;
    for (auto socket : s.sockets) {
      seen = seen || socket == d.socket;
    }
    if (!seen) {
      s.sockets.push_back(d.socket);
    }
  }
  const auto overrides = script.value("status", nlohmann::json::object());
  for (const auto& [function, code] : overrides.items()) {
    s.status[function] = code.get<Status>();
  }
}

void load_env_script(State& s) {
  if (s.scripted) {
    return;
  }
  const char* path = std::getenv("ZEUS_FAKE_AMDSMI_CONFIG");
  if (path == nullptr || path[0] == '\0') {
    return;
  }
  std::ifstream file(path);
  if (!file) {
    s.last_error = std::string("cannot read ") + path;
    return;
  }
  try {
    apply_script(s, nlohmann::json::parse(file));
    s.scripted = true;
  } catch (const std::exception& error) {
    s.last_error = error.what();
  }
}

std::optional<Status> enter(State& s, const char* function, bool needs_init) {
  if (const auto it = s.status.find(function); it != s.status.end() && it->second != kSuccess) {
    return it->second;
  }
  if (needs_init && s.init_count == 0) {
    return kNotInit;
  }
  return std::nullopt;
}

Device* device_for(State& s, void* handle) {
  const auto value = reinterpret_cast<std::uintptr_t>(handle);
  if (value < 0x1000 || value >= 0x1000 + s.devices.size()) {
    return nullptr;
  }
  return &s.devices[value - 0x1000];
}

void* handle_for(std::size_t index) {
  return reinterpret_cast<void*>(0x1000 + index);
}

void* socket_handle_for(std::size_t index) {
  return reinterpret_cast<void*>(0x9000 + index);
}

}  // namespace fake_amdsmi

using namespace fake_amdsmi;

extern "C" {

// ---- Control functions for tests ----

// Replaces the whole script; 0 on success, -1 (see fake_amdsmi_last_error) on a bad script.
int fake_amdsmi_configure(const char* json) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  try {
    apply_script(s, nlohmann::json::parse(json));
    s.scripted = true;
    s.last_error.clear();
    return 0;
  } catch (const std::exception& error) {
    s.last_error = error.what();
    return -1;
  }
}

// Forgets the script and every counter, as if the library had just been loaded.
void fake_amdsmi_reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  apply_script(s, nlohmann::json::object());
  s.scripted = false;
  s.init_count = 0;
  s.init_calls = 0;
  s.shutdown_calls = 0;
  s.overlapping_calls = 0;
  s.last_error.clear();
}

// Makes `function` return `status` until set back to 0.
void fake_amdsmi_set_status(const char* function, std::uint32_t status) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.status[function] = status;
}

// Moves fake time: every energy accumulator grows by counter_power_w x seconds.
void fake_amdsmi_advance_time_s(double seconds) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& d : s.devices) {
    d.energy_counts += static_cast<long double>(d.counter_power_w * seconds * 1e6) /
                       static_cast<long double>(d.energy_resolution_uj);
  }
}

// Writes the state as JSON into `buffer`; returns the length needed (without the NUL).
std::size_t fake_amdsmi_state_json(char* buffer, std::size_t size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  nlohmann::json out;
  out["init_count"] = s.init_count;
  out["init_calls"] = s.init_calls;
  out["shutdown_calls"] = s.shutdown_calls;
  out["overlapping_calls"] = s.overlapping_calls.load();
  out["last_error"] = s.last_error;
  out["devices"] = nlohmann::json::array();
  for (const auto& d : s.devices) {
    nlohmann::json device;
    device["name"] = d.name;
    device["power_cap_uw"] = d.power_cap_uw;
    device["set_power_cap_calls"] = d.set_power_cap_calls;
    device["perf_level"] = d.perf_level;
    device["perf_level_calls"] = d.perf_level_calls;
    device["gfx_range_mhz"] =
        d.gfx_range_mhz ? nlohmann::json::array({d.gfx_range_mhz->first, d.gfx_range_mhz->second})
                        : nlohmann::json();
    device["mem_range_mhz"] =
        d.mem_range_mhz ? nlohmann::json::array({d.mem_range_mhz->first, d.mem_range_mhz->second})
                        : nlohmann::json();
    out["devices"].push_back(device);
  }
  const std::string text = out.dump();
  if (buffer != nullptr && size > 0) {
    const std::size_t copied = std::min(size - 1, text.size());
    std::memcpy(buffer, text.data(), copied);
    buffer[copied] = '\0';
  }
  return text.size();
}

}  // extern "C"
