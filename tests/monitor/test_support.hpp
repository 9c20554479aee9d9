// Shared helpers for the monitor tests: simulated GPUs on a manual clock, fake powercap trees.
#pragma once

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "support/temp_dir.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/window_monitor.hpp"

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

using EnergyList = std::initializer_list<std::pair<int, double>>;

// A measurement of `time_s` with these joules per GPU, CPU package and DRAM zone.
inline monitor::Measurement energies(double time_s, EnergyList gpu_j, EnergyList cpu_j = {},
                                     EnergyList dram_j = {}) {
  monitor::Measurement measurement;
  measurement.time_s = time_s;
  for (const auto& [index, joules] : gpu_j) {
    measurement.gpu_energy_j.set(index, joules);
  }
  for (const auto& [index, joules] : cpu_j) {
    measurement.cpu_energy_j.set(index, joules);
  }
  for (const auto& [index, joules] : dram_j) {
    measurement.dram_energy_j.set(index, joules);
  }
  return measurement;
}

// A window monitor whose every window used the same energies, whatever its length: what the
// carbon and cost monitors' accounting is tested on. Ending a window that is not open throws
// Error(kInvalidArgument); a cancelled window has its time and no energy. Thread-safe.
class FixedEnergyMonitor final : public monitor::WindowMonitor {
 public:
  explicit FixedEnergyMonitor(monitor::Measurement energies) : energies_(std::move(energies)) {
    for (const auto& [index, joules] : energies_.gpu_energy_j) {
      gpus_.push_back(index);
    }
  }

  void begin_window(const std::string& name, monitor::BeginWindowOptions) override {
    const std::lock_guard lock(mutex_);
    ++open_[name];
  }
  monitor::Measurement end_window(const std::string& name,
                                  monitor::EndWindowOptions options) override {
    const std::lock_guard lock(mutex_);
    const auto open = open_.find(name);
    if (open == open_.end() || open->second == 0) {
      throw Error(ErrorKind::kInvalidArgument, "window " + name + " is not open");
    }
    --open->second;
    if (options.cancel) {
      monitor::Measurement none;
      none.time_s = energies_.time_s;
      return none;
    }
    return energies_;
  }
  const std::vector<int>& gpu_indices() const override { return gpus_; }

 private:
  monitor::Measurement energies_;
  std::vector<int> gpus_;
  std::mutex mutex_;
  std::map<std::string, int> open_;
};

}  // namespace zeus::testing
