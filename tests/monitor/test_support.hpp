// Shared helpers for the monitor tests: simulated GPUs on a manual clock, fake powercap trees.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::testing {

struct SimulatedRig {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::vector<std::shared_ptr<device::SimulatedGpu>> gpus;
  device::Gpus set;

  SimulatedRig(int count, const char* model) {
    std::vector<std::shared_ptr<device::Gpu>> as_gpus;
    std::vector<int> physical;
    for (int i = 0; i < count; ++i) {
      gpus.push_back(
          std::make_shared<device::SimulatedGpu>(device::simulated_gpu_model(model), i, clock));
      as_gpus.push_back(gpus.back());
      physical.push_back(i);
    }
    set = device::Gpus(as_gpus, physical);
  }
};

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// A powercap tree with `packages` packages; each has a DRAM zone when `with_dram`.
inline void make_powercap_tree(const std::filesystem::path& root, int packages, bool with_dram) {
  for (int p = 0; p < packages; ++p) {
    const auto zone = root / ("intel-rapl:" + std::to_string(p));
    write_file(zone / "name", "package-" + std::to_string(p));
    write_file(zone / "energy_uj", "1000000");
    write_file(zone / "max_energy_range_uj", "262143328850");
    if (with_dram) {
      const auto dram = zone / ("intel-rapl:" + std::to_string(p) + ":0");
      write_file(dram / "name", "dram");
      write_file(dram / "energy_uj", "500000");
      write_file(dram / "max_energy_range_uj", "65532610987");
    }
  }
}

}  // namespace zeus::testing
