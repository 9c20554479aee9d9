// The CPU interface: cumulative energy of a CPU package and its DRAM, in microjoules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zeus::device {

// What a CPU's energy counters saw since discovery (docs/rapl.md, "Counter wraparound"), package
// and DRAM together.
struct CounterHealth {
  std::uint64_t wraps = 0;   // wraparounds counted
  std::uint64_t resets = 0;  // decreases too large to be a wrap: counted as a counter reset
  // Intervals between two reads long enough for a whole wrap to go unseen: energy may have been
  // lost (the tracker thread was held up, or the clock jumped).
  std::uint64_t gaps = 0;
};

class Cpu {
 public:
  virtual ~Cpu() = default;

  // The package number (RAPL zone intel-rapl:N has index N).
  virtual int index() const = 0;
  // Zone name as reported by the kernel, e.g. "package-0".
  virtual std::string name() const = 0;

  // Cumulative package energy in µJ, monotonic across counter wraparounds (see docs/rapl.md
  // for how often it must be read not to miss one). Throws zeus::Error (kNoPermission, kIo...).
  virtual std::uint64_t package_energy_uj() = 0;

  virtual bool has_dram() const = 0;
  // Cumulative DRAM energy in µJ. Throws Error(kNotSupported) when has_dram() is false.
  virtual std::uint64_t dram_energy_uj() = 0;

  // Keeps this CPU's counters read in the background, often enough that no wraparound goes
  // unseen, for as long as the returned handle lives (one thread per process, shared by every
  // holder; docs/rapl.md). Null where nothing needs it (a CPU read through zeusd: the daemon
  // tracks its own counters).
  virtual std::shared_ptr<void> track_wraparound() { return nullptr; }
  virtual CounterHealth counter_health() const { return {}; }
};

// One handle keeping every CPU of `cpus` tracked (see Cpu::track_wraparound); null when none
// needs it.
inline std::shared_ptr<void> track_wraparound(const std::vector<std::shared_ptr<Cpu>>& cpus) {
  auto handles = std::make_shared<std::vector<std::shared_ptr<void>>>();
  for (const std::shared_ptr<Cpu>& cpu : cpus) {
    if (std::shared_ptr<void> handle = cpu->track_wraparound()) {
      handles->push_back(std::move(handle));
    }
  }
  return handles->empty() ? nullptr : std::shared_ptr<void>(std::move(handles));
}

}  // namespace zeus::device
