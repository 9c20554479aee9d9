// A CPU package read through zeusd, for CPU discovery when the local powercap tree cannot be
// read (zeusd_cpu.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "device/zeusd_connection.hpp"
#include "zeus/device/cpu.hpp"

namespace zeus::device {

// RAPL through the daemon, for a process that may not read /sys/class/powercap itself: every
// reading is one GET /cpu/get_cumulative_energy (docs/zeusd.md, "Using zeusd from jobs").
class ZeusdCpu final : public Cpu {
 public:
  ZeusdCpu(ZeusdCpuInfo info, std::shared_ptr<ZeusdConnection> daemon);

  int index() const override { return info_.id; }
  std::string name() const override { return "package-" + std::to_string(info_.id); }
  std::uint64_t package_energy_uj() override;
  bool has_dram() const override { return info_.dram_available; }
  std::uint64_t dram_energy_uj() override;

 private:
  // read_energy_uj with every error marked as about a CPU.
  std::uint64_t read(bool dram);
  std::uint64_t read_energy_uj(bool dram);

  ZeusdCpuInfo info_;
  std::shared_ptr<ZeusdConnection> daemon_;
};

}  // namespace zeus::device
