// A scripted stand-in for libamd_smi.so (fake_amdsmi.cpp: the AMD SMI functions;
// fake_amdsmi_state.cpp: the script, the state and the fake_amdsmi_* control functions): exports
// the AMD SMI functions zeus uses (with the C ABI of the real library) and returns values from a
// JSON script. Tests reach the script through the extra fake_amdsmi_* functions by dlopen'ing the
// same file, which yields the same loaded copy.
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
//   "status": {"amdsmi_set_power_cap": 10},             // per-function status overrides
//   "entry_delay_us": 200    // every call waits this long on entry, before the fake's own lock,
//                            // so that calls from two threads overlap unless the caller serializes
// }
// Every call that enters while another is inside is counted ("overlapping_calls" in the state):
// the real library before ROCm 7.2 is not thread-safe, and zeus must not let that happen there.
// ZEUS_FAKE_AMDSMI_CONFIG, when set, names a script file loaded at the first amdsmi_init of a
// process that was not scripted through fake_amdsmi_configure.
//
// FAKE_AMDSMI_MINIMAL builds a library without the optional functions; FAKE_AMDSMI_BROKEN one
// that also lacks a required function (amdsmi_get_power_info).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
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
#include <thread>
#include <utility>
#include <vector>

namespace fake_amdsmi {

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
  // Outside the mutex: calls inside now, calls that entered while another was inside, and the
  // scripted wait on entry.
  std::atomic<int> inside{0};
  std::atomic<int> overlapping_calls{0};
  std::atomic<int> entry_delay_us{0};
};

// Held for a whole call, from before the fake takes its own lock: counts overlapping calls.
class Entered {
 public:
  explicit Entered(State& s) : s_(s) {
    if (s_.inside.fetch_add(1) > 0) {
      s_.overlapping_calls.fetch_add(1);
    }
    if (const int delay_us = s_.entry_delay_us.load(); delay_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    }
  }
  ~Entered() { s_.inside.fetch_sub(1); }
  Entered(const Entered&) = delete;
  Entered& operator=(const Entered&) = delete;

 private:
  State& s_;
};

State& state();
extern const char* const kBuild;
bool new_layout(const State& s);
// Common entry: an override wins, then the library must be initialised.
std::optional<Status> enter(State& s, const char* function, bool needs_init = true);
Device* device_for(State& s, void* handle);
void* handle_for(std::size_t index);
void* socket_handle_for(std::size_t index);
// The script in ZEUS_FAKE_AMDSMI_CONFIG, once, unless fake_amdsmi_configure scripted the library.
void load_env_script(State& s);

#define FAKE_ENTER(function)                           \
  State& s = state();                                  \
  const Entered entered(s);                            \
  std::lock_guard<std::mutex> lock(s.mutex);           \
  if (const auto early = enter(s, #function); early) { \
    return *early;                                     \
  }

#define FAKE_DEVICE(handle)          \
  Device* d = device_for(s, handle); \
  if (d == nullptr) {                \
    return kInval;                   \
  }

}  // namespace fake_amdsmi
