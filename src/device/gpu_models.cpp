#include "device/gpu_models.hpp"

#include <algorithm>

namespace zeus::device {

const std::vector<GpuModelEntry>& gpu_models() {
  // Boards: power-limit ranges are the real boards' (nvidia-smi -q); idle and memory power are
  // typical.
  // Thermal constants (used only with thermal_enabled) are our estimates, not datasheet
  // figures: NVIDIA's product briefs give board power and cooling type but no thermal
  // resistance or time constant. Ambient 30 C: a warm data-centre inlet (ASHRAE class A1 allows
  // 15-32 C). Thermal resistance 55 C / peak W, so that full load settles at 85 C, where the
  // instantaneous model puts it, below the boards' slowdown temperatures (high 80s C). Time
  // constant: 30 s for SXM boards (large heatsinks, forced air), 40 s for passively cooled PCIe
  // boards (estimates of heatsink-dominated warm-up; tests depend only on the model's own
  // values). Leakage: 1 % of idle power per degree above ambient, a linearised stand-in for
  // leakage that grows roughly exponentially with temperature.
  // Workload-model parameters: docs/workload-models.md explains how they were chosen.
  // The order is the reference's order of its power traces, then the newer boards.
  static const std::vector<GpuModelEntry> models = {
      {.key = "v100",
       .board = SimulatedGpuModel{"v100",
                                  "Tesla V100-PCIE-32GB",
                                  "volta",
                                  100'000,
                                  250'000,
                                  250'000,
                                  25'000,
                                  250'000,
                                  20'000,
                                  {877},
                                  1380,
                                  135,
                                  true,
                                  SimulatedThermalModel{30.0, 0.22, 40.0, 0.01},
                                  false},
       .workload = WorkloadGpuModel{{100, 125, 150, 175, 200, 225, 250}, 40.0, 230.0, 1.0, 3.5},
       .public_traces = true},
      {.key = "a40",
       .board = SimulatedGpuModel{"a40",
                                  "NVIDIA A40",
                                  "ampere",
                                  100'000,
                                  300'000,
                                  300'000,
                                  30'000,
                                  300'000,
                                  25'000,
                                  {7251, 5001, 405},
                                  1740,
                                  210,
                                  true,
                                  SimulatedThermalModel{30.0, 0.183, 40.0, 0.01},
                                  false},
       .workload =
           WorkloadGpuModel{{100, 125, 150, 175, 200, 225, 250, 275, 300}, 75.0, 215.0, 1.3, 4.0},
       .public_traces = true},
      {.key = "rtx6000",
       .board = std::nullopt,
       .workload =
           WorkloadGpuModel{{100, 125, 150, 175, 200, 225, 250, 260}, 55.0, 195.0, 0.85, 3.5},
       .public_traces = true},
      {.key = "p100",
       .board = SimulatedGpuModel{"p100",
                                  "Tesla P100-PCIE-16GB",
                                  "pascal",
                                  125'000,
                                  250'000,
                                  250'000,
                                  26'000,
                                  250'000,
                                  18'000,
                                  {715},
                                  1328,
                                  544,
                                  false,
                                  SimulatedThermalModel{30.0, 0.22, 40.0, 0.01},
                                  false},
       .workload = WorkloadGpuModel{{125, 150, 175, 200, 225, 250}, 32.0, 150.0, 0.55, 4.5},
       .public_traces = true},
      {.key = "a100",
       .board = SimulatedGpuModel{"a100",
                                  "NVIDIA A100-SXM4-80GB",
                                  "ampere",
                                  100'000,
                                  400'000,
                                  400'000,
                                  55'000,
                                  400'000,
                                  45'000,
                                  {1593},
                                  1410,
                                  210,
                                  true,
                                  SimulatedThermalModel{30.0, 0.1375, 30.0, 0.01},
                                  false},
       .workload = std::nullopt,
       .public_traces = false},
      {.key = "h100",
       .board = SimulatedGpuModel{"h100",
                                  "NVIDIA H100 80GB HBM3",
                                  "hopper",
                                  200'000,
                                  700'000,
                                  700'000,
                                  70'000,
                                  700'000,
                                  60'000,
                                  {2619},
                                  1980,
                                  345,
                                  true,
                                  SimulatedThermalModel{30.0, 0.0786, 30.0, 0.01},
                                  false},
       .workload = std::nullopt,
       .public_traces = false},
      {.key = "h200",
       .board = SimulatedGpuModel{"h200",
                                  "NVIDIA H200",
                                  "hopper",
                                  200'000,
                                  700'000,
                                  700'000,
                                  75'000,
                                  700'000,
                                  65'000,
                                  {3201},
                                  1980,
                                  345,
                                  true,
                                  SimulatedThermalModel{30.0, 0.0786, 30.0, 0.01},
                                  false},
       .workload = std::nullopt,
       .public_traces = false},
  };
  return models;
}

const GpuModelEntry* find_gpu_model(std::string_view key) {
  const auto& models = gpu_models();
  const auto it = std::find_if(models.begin(), models.end(),
                               [&](const GpuModelEntry& entry) { return entry.key == key; });
  return it == models.end() ? nullptr : &*it;
}

}  // namespace zeus::device
