// The CPU interface: cumulative energy of a CPU package and its DRAM, in microjoules.
#pragma once

#include <cstdint>
#include <string>

namespace zeus::device {

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
};

}  // namespace zeus::device
