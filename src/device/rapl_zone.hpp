// One RAPL zone's energy counter (energy_uj) made monotonic across wraparounds, with what it
// takes to track it: how often it must be read, derived from its range and maximum power, and
// what its reads saw (wraps, resets, gaps). See docs/rapl.md, "Counter wraparound".
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "zeus/common/clock.hpp"
#include "zeus/device/cpu.hpp"

namespace zeus::device {

// The power assumed for a zone whose sysfs folder states no usable maximum power: twice the
// largest CPU package TDP on sale (500 W).
inline constexpr double kRaplUnknownMaxPowerW = 1000.0;
// A stated maximum power above this describes no CPU zone and is ignored (as if absent).
inline constexpr double kRaplMaxCredibleMaxPowerW = 100'000.0;
// The largest range a RAPL counter can have: 32 bits of energy units of at most 1 J.
inline constexpr std::uint64_t kRaplMaxCredibleRangeUj = 4'294'967'296'000'000;
// A tracked zone is read `kRaplReadsPerWrap` times per wrap period at its maximum power, but
// never more often than every kRaplMinReadPeriodNs nor less often than every kRaplMaxReadPeriodNs.
inline constexpr std::int64_t kRaplReadsPerWrap = 4;
inline constexpr std::int64_t kRaplMinReadPeriodNs = 10'000'000;      // 10 ms
inline constexpr std::int64_t kRaplMaxReadPeriodNs = 60'000'000'000;  // 60 s
// A decrease of the counter is a wrap only when the energy it implies could have been drawn in
// the time since the previous read (plus this slack) at kRaplWrapPowerFactor times the zone's
// maximum power, or at kRaplUnknownMaxPowerW when that is more.
inline constexpr double kRaplWrapPowerFactor = 2.0;
inline constexpr double kRaplWrapSlackS = 0.1;

// How to get permission to read energy_uj (appended to permission errors).
std::string rapl_permission_advice();
// An energy_uj file as a number; errors are about a CPU, and permission errors carry the advice.
std::uint64_t read_rapl_energy_file_uj(const std::filesystem::path& energy_path);

class RaplZone {
 public:
  // Reads max_energy_range_uj, the constraint_*_max_power_uw files and a first energy_uj; `clock`
  // times the reads. Throws zeus::Error (subject kCpu) when a file cannot be read, or kIo for a
  // range of 0 or above kRaplMaxCredibleRangeUj.
  RaplZone(std::filesystem::path zone_dir, std::shared_ptr<const Clock> clock);

  // Cumulative energy in µJ (the first raw reading plus everything counted since). Reads the file
  // on every call, holding this zone's mutex across the read so that two threads cannot swap
  // their raw values and take the older one for a wrap. Throws zeus::Error; a failed read leaves
  // the state untouched.
  std::uint64_t read_energy_uj();
  // A read by the tracker: errors are logged once per zone and swallowed. `starting`: the read
  // that begins tracking the zone, after which a gap means lost energy (none is reported for the
  // untracked time before it).
  void read_in_background(bool starting) noexcept;

  const std::filesystem::path& dir() const { return dir_; }
  std::uint64_t max_energy_range_uj() const { return range_uj_; }
  // The power the periods are derived from: the largest constraint_*_max_power_uw, or
  // kRaplUnknownMaxPowerW when there is none (max_power_stated() is false then).
  double max_power_w() const { return max_power_w_; }
  bool max_power_stated() const { return max_power_stated_; }
  // The shortest time one wrap can take (range / max power), at least 1 ns.
  std::int64_t wrap_period_ns() const { return wrap_period_ns_; }
  // How often the tracker reads this zone.
  std::int64_t read_period_ns() const { return read_period_ns_; }
  // False when the zone wraps faster than kRaplReadsPerWrap reads at the floor period (an
  // absurdly small range): it is read at the floor, and its gaps say how often energy may have
  // been lost.
  bool trackable() const { return wrap_period_ns_ >= kRaplReadsPerWrap * kRaplMinReadPeriodNs; }
  CounterHealth health() const;

 private:
  std::uint64_t read_locked(bool starting);  // mutex_ held
  double plausible_energy_uj(std::int64_t elapsed_ns) const;

  const std::filesystem::path dir_;
  const std::filesystem::path energy_path_;
  const std::shared_ptr<const Clock> clock_;
  std::uint64_t range_uj_ = 0;
  double max_power_w_ = kRaplUnknownMaxPowerW;
  bool max_power_stated_ = false;
  std::int64_t wrap_period_ns_ = 1;
  std::int64_t read_period_ns_ = kRaplMinReadPeriodNs;

  mutable std::mutex mutex_;  // guards everything below
  std::uint64_t last_raw_uj_ = 0;
  std::int64_t last_read_ns_ = 0;
  std::uint64_t total_uj_ = 0;
  CounterHealth health_;
  bool warned_gap_ = false;
  bool warned_reset_ = false;
  std::atomic<bool> warned_background_error_{false};
};

}  // namespace zeus::device
