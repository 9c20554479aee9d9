// The one catalogue of GPU models that zeus-cpp knows without hardware. Each entry says what
// each consumer knows about the model: the board that SimulatedGpu models (device layer), the
// parameters of the simulator's built-in workload models (sim layer, docs/workload-models.md),
// and whether the reference published power traces for it (sim's trace files). A consumer that
// needs two of them (`zeus demo` needs a board and workload parameters) asks for both here
// instead of intersecting lists by hand.
//
// It lives in the device layer, the lowest layer that needs it; sim reads it through its one-way
// edge sim -> device (docs/design.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/simulated_gpu.hpp"

namespace zeus::device {

// What the built-in workload models need of a GPU (docs/workload-models.md).
struct WorkloadGpuModel {
  std::vector<int> power_limits_w;  // ascending: the limits the model gives points at
  double static_power_w;            // drawn whenever the job runs, busy or not
  double dynamic_power_w;           // extra power of a fully busy GPU at full clock (intensity 1)
  double speed;                     // compute throughput relative to the V100
  double dvfs_exponent;             // busy power above static grows as clock^dvfs_exponent
};

struct GpuModelEntry {
  std::string key;                           // "v100"
  std::optional<SimulatedGpuModel> board;    // nullopt: no simulated GPU of this model
  std::optional<WorkloadGpuModel> workload;  // nullopt: no built-in workload model on it
  bool public_traces = false;                // summary_power_<key>.csv exists in the reference's
};

// Every model, in a fixed order (the reference's trace order first: v100, a40, rtx6000, p100).
const std::vector<GpuModelEntry>& gpu_models();
// nullptr when `key` (exact, lower case) is not in the catalogue.
const GpuModelEntry* find_gpu_model(std::string_view key);

}  // namespace zeus::device
