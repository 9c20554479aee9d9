// The one table of published and measured sensor parameters (zeus/device/sensor.hpp).
//
// Sources:
// - [Yang24] Z. Yang, K. Adamek, W. Armour, "Accurate and Convenient Energy Measurements for
//   GPUs: A Detailed Study of NVIDIA GPU's Built-in Power Sensor", SC'24 (arXiv 2312.02741):
//   on A100 and H100 the power is sampled during about 25 ms of every 100 ms (25 % of the
//   runtime) and the readings extrapolate that window.
// - [NVML] NVIDIA's nvml.h: NVML_FI_DEV_POWER_AVERAGE and nvmlDeviceGetPowerUsage are a 1 s
//   average on Ampere and newer except GA100; GA100 and older return the instantaneous power.
//   nvmlDeviceGetTotalEnergyConsumption counts millijoules; its refresh period is undocumented
//   (20-100 ms observed).
// - [Probe] zeus sensor-probe under scripts/gpu_load.py on a real GPU (scripts/device-check.sh;
//   docs/monitor.md, "Measuring a GPU's sensor"): the H200 entry.
// Every other figure is an estimate and says so in `source` (docs/devices.md lists them all).
#include <array>
#include <cctype>

#include "common/text.hpp"
#include "zeus/device/sensor.hpp"

namespace zeus::device {
namespace {

struct Entry {
  const char* token;  // a whole word of the GPU's name, e.g. "H100"
  SensorParameters parameters;
};

const std::array<Entry, 5>& table() {
  static const std::array<Entry, 5> entries = {{
      {"V100",
       {.counter_refresh_s = 0.1,
        .counter_resolution_mj = 1.0,
        .power_sample_window_s = 0.0,
        .power_sample_period_s = 0.0,
        .average_power_window_s = 0.0,
        .reading_delay_s = 0.0,
        .source = "average power instantaneous on GA100 and older [NVML]; estimates: counter "
                  "refresh 100 ms (the slow end of the 20-100 ms observed), 1 mJ resolution "
                  "(the counter's unit), power sampled all the time (Yang et al. SC'24 report "
                  "part-time sampling only on A100/H100), no reading delay"}},
      {"A40",
       {.counter_refresh_s = 0.1,
        .counter_resolution_mj = 1.0,
        .power_sample_window_s = 0.0,
        .power_sample_period_s = 0.0,
        .average_power_window_s = 1.0,
        .reading_delay_s = 0.0,
        .source = "average power over 1 s on Ampere except GA100 [NVML]; estimates: counter "
                  "refresh 100 ms, 1 mJ resolution, power sampled all the time, no reading "
                  "delay"}},
      {"A100",
       {.counter_refresh_s = 0.1,
        .counter_resolution_mj = 1.0,
        .power_sample_window_s = 0.025,
        .power_sample_period_s = 0.1,
        .average_power_window_s = 0.0,
        .reading_delay_s = 0.0,
        .source = "power sampled 25 ms of every 100 ms (Yang et al. SC'24); average power "
                  "instantaneous on GA100 [NVML]; estimates: counter refresh 100 ms (one "
                  "sampling period), 1 mJ resolution, no reading delay"}},
      {"H100",
       {.counter_refresh_s = 0.1,
        .counter_resolution_mj = 1.0,
        .power_sample_window_s = 0.025,
        .power_sample_period_s = 0.1,
        .average_power_window_s = 1.0,
        .reading_delay_s = 0.0,
        .source = "power sampled 25 ms of every 100 ms (Yang et al. SC'24); average power over "
                  "1 s on Hopper [NVML]; estimates: counter refresh 100 ms (one sampling "
                  "period), 1 mJ resolution, no reading delay"}},
      {"H200",
       {.counter_refresh_s = 0.1,
        .counter_resolution_mj = 1.0,
        .power_sample_window_s = 0.028,
        .power_sample_period_s = 0.1,
        .counter_integrates_continuously = true,
        .average_power_window_s = 1.0,
        .reading_delay_s = 0.014,
        .source = "measured on one H200 (driver 580.159.04) by zeus sensor-probe, 2026-12-04 "
                  "[Probe]: counter refresh 100.0 ms, counter sees every 20 ms burst "
                  "(integrates all the time), instant power reflects about 28 ms of every "
                  "101.7 ms (from 58 of 100 bursts missed; +-6 ms), average power rises 10-90% "
                  "in 0.63-0.80 s (1 s average, as [NVML] says), shortest lag 14 ms (taken as "
                  "the delay); estimate: 1 mJ resolution (the counter's unit; each step holds a "
                  "whole refresh period's energy, so finer steps are never seen)"}},
  }};
  return entries;
}

// Whether `word` is a whole word of `name` (words: runs of letters and digits), ignoring case:
// "H200" is in "NVIDIA H200 NVL" but not in "NVIDIA GH200 480GB".
bool has_word(std::string_view name, std::string_view word) {
  std::size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && std::isalnum(static_cast<unsigned char>(name[i])) == 0) {
      ++i;
    }
    const std::size_t start = i;
    while (i < name.size() && std::isalnum(static_cast<unsigned char>(name[i])) != 0) {
      ++i;
    }
    if (i > start && text::ascii_iequals(name.substr(start, i - start), word)) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<SensorParameters> published_sensor_parameters(std::string_view gpu_name) {
  for (const Entry& entry : table()) {
    if (has_word(gpu_name, entry.token)) {
      return entry.parameters;
    }
  }
  return std::nullopt;
}

}  // namespace zeus::device
