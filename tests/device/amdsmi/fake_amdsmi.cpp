// A scripted stand-in for libamd_smi.so: exports the AMD SMI functions zeus uses (with the C ABI
// of the real library) and returns values from a JSON script. Tests reach the script through the
// extra fake_amdsmi_* functions by dlopen'ing the same file, which yields the same loaded copy.
//
// Script (every key optional):
// {
//   "version": [26, 1, 0],       // amdsmi_get_lib_version words; a first word >= 25 selects the
//                                 // ROCm 6.4+ structure layouts, below 25 the ROCm <= 6.3 ones
//   "devices": [{
//     "name": "AMD Instinct MI300X", "uuid": "...", "bdf": "0000:c1:00.0",
//     "hip_id": 0, "node_id": 2, "socket": 0,          // socket defaults to one per device
//     "power_cap_uw": 750000000, "default_power_cap_uw": 750000000,
//     "min_power_cap_uw": 0, "max_power_cap_uw": 750000000,
//     "current_socket_power_w": 300,                    // null: not supported (sentinel value)
//     "average_socket_power_w": 290,
//     "energy_accumulator": 0, "energy_resolution_uj": 15.3,
//     "counter_power_w": 290,                           // accumulator growth per fake second;
//                                                       // defaults to the average (else current)
//     "temperature_c": 45,                              // returned as is (AMD SMI gives degrees)
//     "gfx_clocks_mhz": [500, 2100], "mem_clocks_mhz": [900, 1300],  // returned in hertz
//     "driver_version": "6.8.5"
//   }],
//   "status": {"amdsmi_set_power_cap": 10}              // per-function status overrides
// }
// ZEUS_FAKE_AMDSMI_CONFIG, when set, names a script file loaded at the first amdsmi_init of a
// process that was not scripted through fake_amdsmi_configure.
//
// FAKE_AMDSMI_MINIMAL builds a library without the optional functions; FAKE_AMDSMI_BROKEN one
// that also lacks a required function (amdsmi_get_power_info).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Status = std::uint32_t;
constexpr Status kSuccess = 0;
constexpr Status kInval = 1;
constexpr Status kNotSupported = 2;
constexpr Status kNotInit = 32;
constexpr Status kInsufficientSize = 41;

[[maybe_unused]] constexpr std::uint32_t kClockGfx = 0;
[[maybe_unused]] constexpr std::uint32_t kClockMem = 4;
constexpr std::uint32_t kTemperatureHotspot = 1;
constexpr std::uint32_t kTemperatureCurrent = 0;
constexpr std::uint32_t kMaxFrequencies = 33;

// The real structures, in both layouts, so that the backend's offsets are checked against an
// independent declaration.
struct VersionOld {  // AMD SMI <= 24.x
  std::uint32_t year, major, minor, release;
  const char* build;
};
struct VersionNew {  // AMD SMI >= 25.x
  std::uint32_t major, minor, release;
  const char* build;
};
static_assert(offsetof(VersionOld, build) == 16 && offsetof(VersionNew, build) == 16);

struct PowerInfoOld {
  std::uint32_t current_socket_power;
  std::uint32_t average_socket_power;
  std::uint32_t gfx_voltage, soc_voltage, mem_voltage, power_limit;
  std::uint32_t reserved[11];
};
struct PowerInfoNew {
  std::uint64_t socket_power;
  std::uint32_t current_socket_power;
  std::uint32_t average_socket_power;
  std::uint64_t gfx_voltage, soc_voltage, mem_voltage;
  std::uint32_t power_limit;
  std::uint32_t ubb_power;
  std::uint64_t reserved[18];
};
static_assert(offsetof(PowerInfoNew, current_socket_power) == 8);
static_assert(offsetof(PowerInfoNew, average_socket_power) == 12);

struct PowerCapInfo {
  std::uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap;
  std::uint64_t reserved[3];
};

struct KfdInfo {
  std::uint64_t kfd_id;
  std::uint32_t node_id;
  std::uint32_t current_partition_id;
  std::uint32_t reserved[12];
};

struct EnumerationInfo {
  std::uint32_t drm_render, drm_card, hsa_id, hip_id;
  char hip_uuid[256];
};

struct Frequencies {
  bool has_deep_sleep;
  std::uint32_t num_supported;
  std::uint32_t current;
  std::uint64_t frequency[kMaxFrequencies];
};
static_assert(offsetof(Frequencies, frequency) == 16);

// Sizes the real library writes for structures whose tail grew between releases.
constexpr std::size_t kAsicInfoSizeOld = 456;
constexpr std::size_t kAsicInfoSizeNew = 720;
[[maybe_unused]] constexpr std::size_t kDriverInfoSizeOld = 3 * 64;
[[maybe_unused]] constexpr std::size_t kDriverInfoSizeNew = 3 * 256 + 64 * 8;

struct Device {
  std::string name;
  std::string uuid;
  std::uint64_t bdf = 0;
  std::uint32_t hip_id = 0;
  std::uint32_t node_id = 0;
  std::uint32_t socket = 0;
  std::uint64_t power_cap_uw = 0;
  std::uint64_t default_power_cap_uw = 0;
  std::uint64_t min_power_cap_uw = 0;
  std::uint64_t max_power_cap_uw = 0;
  std::optional<std::uint32_t> current_socket_power_w;
  std::optional<std::uint32_t> average_socket_power_w;
  long double energy_counts = 0.0L;  // fractional accumulator
  float energy_resolution_uj = 15.3F;
  double counter_power_w = 0.0;
  std::int64_t temperature_c = 0;
  std::vector<std::uint64_t> gfx_clocks_mhz;
  std::vector<std::uint64_t> mem_clocks_mhz;
  std::string driver_version;
  // What the backend did.
  int set_power_cap_calls = 0;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> gfx_range_mhz;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> mem_range_mhz;
  std::uint32_t perf_level = 0;
  int perf_level_calls = 0;
};

struct State {
  std::mutex mutex;
  std::vector<std::uint32_t> version{26, 1, 0};
  std::vector<Device> devices;
  std::vector<std::uint32_t> sockets;  // distinct socket ids in order
  std::map<std::string, Status> status;
  int init_count = 0;
  int init_calls = 0;
  int shutdown_calls = 0;
  bool scripted = false;  // by fake_amdsmi_configure
  std::string last_error;
};

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

// Common entry: an override wins, then the library must be initialised.
std::optional<Status> enter(State& s, const char* function, bool needs_init = true) {
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

#define FAKE_ENTER(function)                           \
  State& s = state();                                  \
  std::lock_guard<std::mutex> lock(s.mutex);           \
  if (const auto early = enter(s, #function); early) { \
    return *early;                                     \
  }

#define FAKE_DEVICE(handle)          \
  Device* d = device_for(s, handle); \
  if (d == nullptr) {                \
    return kInval;                   \
  }

}  // namespace

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

// ---- AMD SMI ----

Status amdsmi_init(std::uint64_t /*flags*/) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.init_calls;
  if (const auto early = enter(s, "amdsmi_init", false); early) {
    return *early;
  }
  load_env_script(s);
  ++s.init_count;
  return kSuccess;
}

Status amdsmi_shut_down() {
  FAKE_ENTER(amdsmi_shut_down)
  --s.init_count;
  ++s.shutdown_calls;
  return kSuccess;
}

Status amdsmi_get_lib_version(void* version) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (const auto early = enter(s, "amdsmi_get_lib_version", false); early) {
    return *early;
  }
  if (version == nullptr) {
    return kInval;
  }
  const auto word = [&s](std::size_t i) { return i < s.version.size() ? s.version[i] : 0U; };
  if (new_layout(s)) {
    VersionNew v{word(0), word(1), word(2), kBuild};
    std::memcpy(version, &v, sizeof(v));
  } else {
    VersionOld v{word(0), word(1), word(2), word(3), kBuild};
    std::memcpy(version, &v, sizeof(v));
  }
  return kSuccess;
}

Status amdsmi_get_socket_handles(std::uint32_t* count, void** sockets) {
  FAKE_ENTER(amdsmi_get_socket_handles)
  if (count == nullptr) {
    return kInval;
  }
  const auto total = static_cast<std::uint32_t>(s.sockets.size());
  if (sockets == nullptr) {
    *count = total;
    return kSuccess;
  }
  const std::uint32_t written = std::min(*count, total);
  for (std::uint32_t i = 0; i < written; ++i) {
    sockets[i] = socket_handle_for(i);
  }
  *count = written;
  return written < total ? kInsufficientSize : kSuccess;
}

Status amdsmi_get_processor_handles(void* socket, std::uint32_t* count, void** processors) {
  FAKE_ENTER(amdsmi_get_processor_handles)
  const auto socket_index = reinterpret_cast<std::uintptr_t>(socket) - 0x9000;
  if (count == nullptr || socket_index >= s.sockets.size()) {
    return kInval;
  }
  std::vector<void*> handles;
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    if (s.devices[i].socket == s.sockets[socket_index]) {
      handles.push_back(handle_for(i));
    }
  }
  const auto total = static_cast<std::uint32_t>(handles.size());
  if (processors == nullptr) {
    *count = total;
    return kSuccess;
  }
  const std::uint32_t written = std::min(*count, total);
  for (std::uint32_t i = 0; i < written; ++i) {
    processors[i] = handles[i];
  }
  *count = written;
  return written < total ? kInsufficientSize : kSuccess;
}

Status amdsmi_get_gpu_asic_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_asic_info)
  FAKE_DEVICE(handle)
  std::memset(info, 0, new_layout(s) ? kAsicInfoSizeNew : kAsicInfoSizeOld);
  std::strncpy(static_cast<char*>(info), d->name.c_str(), 255);
  return kSuccess;
}

Status amdsmi_get_gpu_device_uuid(void* handle, unsigned int* length, char* uuid) {
  FAKE_ENTER(amdsmi_get_gpu_device_uuid)
  FAKE_DEVICE(handle)
  if (length == nullptr || uuid == nullptr) {
    return kInval;
  }
  if (*length < d->uuid.size() + 1) {
    *length = static_cast<unsigned int>(d->uuid.size() + 1);
    return kInsufficientSize;
  }
  std::memcpy(uuid, d->uuid.c_str(), d->uuid.size() + 1);
  *length = static_cast<unsigned int>(d->uuid.size() + 1);
  return kSuccess;
}

Status amdsmi_get_gpu_device_bdf(void* handle, void* bdf) {
  FAKE_ENTER(amdsmi_get_gpu_device_bdf)
  FAKE_DEVICE(handle)
  if (bdf == nullptr) {
    return kInval;
  }
  std::memcpy(bdf, &d->bdf, sizeof(d->bdf));
  return kSuccess;
}

Status amdsmi_get_power_cap_info(void* handle, std::uint32_t sensor, void* info) {
  FAKE_ENTER(amdsmi_get_power_cap_info)
  FAKE_DEVICE(handle)
  if (sensor != 0 || info == nullptr) {
    return kInval;
  }
  PowerCapInfo caps{};
  caps.power_cap = d->power_cap_uw;
  caps.default_power_cap = d->default_power_cap_uw;
  caps.dpm_cap = 2100;
  caps.min_power_cap = d->min_power_cap_uw;
  caps.max_power_cap = d->max_power_cap_uw;
  std::memcpy(info, &caps, sizeof(caps));
  return kSuccess;
}

Status amdsmi_set_power_cap(void* handle, std::uint32_t sensor, std::uint64_t cap_uw) {
  FAKE_ENTER(amdsmi_set_power_cap)
  FAKE_DEVICE(handle)
  ++d->set_power_cap_calls;
  if (sensor != 0 || cap_uw < d->min_power_cap_uw || cap_uw > d->max_power_cap_uw) {
    return kInval;
  }
  d->power_cap_uw = cap_uw;
  return kSuccess;
}

#ifndef FAKE_AMDSMI_BROKEN
Status amdsmi_get_power_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_power_info)
  FAKE_DEVICE(handle)
  if (new_layout(s)) {
    PowerInfoNew p{};
    p.current_socket_power = d->current_socket_power_w.value_or(0xFFFFFFFFu);
    p.average_socket_power = d->average_socket_power_w.value_or(0xFFFFFFFFu);
    p.socket_power = d->current_socket_power_w.value_or(d->average_socket_power_w.value_or(0));
    p.power_limit = static_cast<std::uint32_t>(d->power_cap_uw / 1'000'000);
    std::memcpy(info, &p, sizeof(p));
  } else {
    PowerInfoOld p{};
    p.current_socket_power = d->current_socket_power_w.value_or(0xFFFFu);
    p.average_socket_power = d->average_socket_power_w.value_or(0xFFFFu);
    p.power_limit = static_cast<std::uint32_t>(d->power_cap_uw / 1'000'000);
    std::memcpy(info, &p, sizeof(p));
  }
  return kSuccess;
}
#endif

Status amdsmi_get_temp_metric(void* handle, std::uint32_t sensor_type, std::uint32_t metric,
                              std::int64_t* temperature) {
  FAKE_ENTER(amdsmi_get_temp_metric)
  FAKE_DEVICE(handle)
  if (temperature == nullptr) {
    return kInval;
  }
  if (sensor_type != kTemperatureHotspot || metric != kTemperatureCurrent) {
    return kNotSupported;
  }
  *temperature = d->temperature_c;
  return kSuccess;
}

Status amdsmi_get_gpu_kfd_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_kfd_info)
  FAKE_DEVICE(handle)
  KfdInfo kfd{};
  kfd.kfd_id = 40000 + d->node_id;
  kfd.node_id = d->node_id;
  std::memcpy(info, &kfd, sizeof(kfd));
  return kSuccess;
}

#if !defined(FAKE_AMDSMI_MINIMAL) && !defined(FAKE_AMDSMI_BROKEN)
Status amdsmi_get_gpu_enumeration_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_enumeration_info)
  FAKE_DEVICE(handle)
  EnumerationInfo e{};
  e.drm_render = 128 + d->hip_id;
  e.drm_card = d->hip_id;
  e.hsa_id = d->node_id;
  e.hip_id = d->hip_id;
  std::snprintf(e.hip_uuid, sizeof(e.hip_uuid), "GPU-%s", d->uuid.c_str());
  std::memcpy(info, &e, sizeof(e));
  return kSuccess;
}

Status amdsmi_get_energy_count(void* handle, std::uint64_t* accumulator, float* resolution_uj,
                               std::uint64_t* timestamp) {
  FAKE_ENTER(amdsmi_get_energy_count)
  FAKE_DEVICE(handle)
  if (accumulator == nullptr || resolution_uj == nullptr || timestamp == nullptr) {
    return kInval;
  }
  *accumulator = static_cast<std::uint64_t>(std::floor(d->energy_counts));
  *resolution_uj = d->energy_resolution_uj;
  *timestamp = 0;
  return kSuccess;
}

Status amdsmi_get_clk_freq(void* handle, std::uint32_t clock_type, void* frequencies) {
  FAKE_ENTER(amdsmi_get_clk_freq)
  FAKE_DEVICE(handle)
  const std::vector<std::uint64_t>* list = nullptr;
  if (clock_type == kClockGfx) {
    list = &d->gfx_clocks_mhz;
  } else if (clock_type == kClockMem) {
    list = &d->mem_clocks_mhz;
  } else {
    return kNotSupported;
  }
  Frequencies f{};
  f.num_supported =
      static_cast<std::uint32_t>(std::min<std::size_t>(list->size(), kMaxFrequencies));
  for (std::uint32_t i = 0; i < f.num_supported; ++i) {
    f.frequency[i] = (*list)[i] * 1'000'000;
  }
  std::memcpy(frequencies, &f, sizeof(f));
  return kSuccess;
}

Status amdsmi_set_gpu_clk_range(void* handle, std::uint64_t min_mhz, std::uint64_t max_mhz,
                                std::uint32_t clock_type) {
  FAKE_ENTER(amdsmi_set_gpu_clk_range)
  FAKE_DEVICE(handle)
  if (min_mhz > max_mhz) {
    return kInval;
  }
  if (clock_type == kClockGfx) {
    d->gfx_range_mhz = std::make_pair(min_mhz, max_mhz);
  } else if (clock_type == kClockMem) {
    d->mem_range_mhz = std::make_pair(min_mhz, max_mhz);
  } else {
    return kInval;
  }
  d->perf_level = 3;  // AMDSMI_DEV_PERF_LEVEL_MANUAL
  return kSuccess;
}

Status amdsmi_set_gpu_perf_level(void* handle, std::uint32_t level) {
  FAKE_ENTER(amdsmi_set_gpu_perf_level)
  FAKE_DEVICE(handle)
  ++d->perf_level_calls;
  d->perf_level = level;
  if (level == 0) {
    d->gfx_range_mhz.reset();
    d->mem_range_mhz.reset();
  }
  return kSuccess;
}

Status amdsmi_get_gpu_driver_info(void* handle, void* info) {
  FAKE_ENTER(amdsmi_get_gpu_driver_info)
  FAKE_DEVICE(handle)
  std::memset(info, 0, new_layout(s) ? kDriverInfoSizeNew : kDriverInfoSizeOld);
  std::strncpy(static_cast<char*>(info), d->driver_version.c_str(), 63);
  return kSuccess;
}
#endif

}  // extern "C"
