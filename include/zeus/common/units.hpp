// Unit conversions. Quantities carry their unit in their name (power_mw, energy_j, time_ns); these
// functions are the only places where one unit becomes another, so that a factor of 1000 is never
// written inline. All are constexpr and exact for the integer inputs devices report.
#pragma once

#include <cstdint>
#include <limits>

namespace zeus::units {

// ---- Power ----
constexpr double watts_from_milliwatts(double power_mw) {
  return power_mw / 1e3;
}
constexpr double milliwatts_from_watts(double power_w) {
  return power_w * 1e3;
}
// Milliwatts of a whole-watt figure (exact; vendors report socket power in whole watts).
constexpr std::uint64_t milliwatts_from_whole_watts(std::uint64_t power_w) {
  return power_w * 1000;
}
// Whole milliwatts of a microwatt figure, rounded toward zero (callers that must round up check
// the remainder microwatts_in_part_milliwatt).
constexpr std::uint64_t whole_milliwatts_from_microwatts(std::uint64_t power_uw) {
  return power_uw / 1000;
}
constexpr std::uint64_t microwatts_in_part_milliwatt(std::uint64_t power_uw) {
  return power_uw % 1000;
}
constexpr std::uint64_t microwatts_from_milliwatts(std::uint64_t power_mw) {
  return power_mw * 1000;
}
// Whole watts of a milliwatt figure, rounded toward zero (the reference's `mw // 1000`).
constexpr std::int64_t whole_watts_from_milliwatts(std::int64_t power_mw) {
  return power_mw / 1000;
}

// ---- Energy ----
constexpr double joules_from_millijoules(double energy_mj) {
  return energy_mj / 1e3;
}
constexpr double millijoules_from_joules(double energy_j) {
  return energy_j * 1e3;
}
constexpr double joules_from_microjoules(double energy_uj) {
  return energy_uj / 1e6;
}
constexpr double millijoules_from_microjoules(double energy_uj) {
  return energy_uj / 1e3;
}
// Long-double millijoules, for accumulators whose product outgrows a double's 53 bits.
constexpr long double precise_millijoules_from_microjoules(long double energy_uj) {
  return energy_uj / 1000.0L;
}
constexpr double kilowatt_hours_from_joules(double energy_j) {
  return energy_j / 3.6e6;
}

// ---- Frequency ----
// Megahertz of a hertz figure, rounded to the nearest.
constexpr std::uint64_t megahertz_from_hertz(std::uint64_t frequency_hz) {
  return (frequency_hz + 500'000) / 1'000'000;
}

// ---- Temperature ----
// Whole degrees Celsius of a millidegree figure, rounded toward zero (the kernel's hwmon unit).
constexpr std::int64_t celsius_from_millicelsius(std::int64_t temperature_mc) {
  return temperature_mc / 1000;
}

// ---- Time ----
constexpr double seconds_from_nanoseconds(double time_ns) {
  return time_ns * 1e-9;
}
constexpr double seconds_from_nanoseconds(std::int64_t time_ns) {
  return static_cast<double>(time_ns) * 1e-9;
}
// Saturating: NaN is 0, and a duration past int64's reach (about 292 years) is its bound, so a
// huge or garbage duration never becomes undefined behaviour.
constexpr std::int64_t nanoseconds_from_seconds(double time_s) {
  if (!(time_s == time_s)) {
    return 0;
  }
  if (time_s >= 9.2e9) {
    return std::numeric_limits<std::int64_t>::max();
  }
  if (time_s <= -9.2e9) {
    return std::numeric_limits<std::int64_t>::min();
  }
  return static_cast<std::int64_t>(time_s * 1e9);
}
constexpr double seconds_from_microseconds(double time_us) {
  return time_us * 1e-6;
}
constexpr double seconds_from_milliseconds(double time_ms) {
  return time_ms * 1e-3;
}
constexpr double milliseconds_from_seconds(double time_s) {
  return time_s * 1e3;
}
constexpr double microseconds_from_seconds(double time_s) {
  return time_s * 1e6;
}
constexpr std::int64_t microseconds_from_nanoseconds(std::int64_t time_ns) {
  return time_ns / 1000;
}
// Whole milliseconds, rounded toward zero (Unix-time stamps in milliseconds).
constexpr std::int64_t milliseconds_from_nanoseconds(std::int64_t time_ns) {
  return time_ns / 1'000'000;
}

// Energy in millijoules drawn at `power_mw` for `time_ns` nanoseconds.
constexpr double millijoules_at(double power_mw, std::int64_t time_ns) {
  return power_mw * seconds_from_nanoseconds(time_ns);
}
// Energy in joules drawn at `power_w` for `time_ns` nanoseconds.
constexpr double joules_at(double power_w, std::int64_t time_ns) {
  return power_w * seconds_from_nanoseconds(time_ns);
}

}  // namespace zeus::units
