// zeus_accuracy: the accuracy table of docs/monitor.md ("Accuracy"). Runs the study of
// zeus/monitor/accuracy.hpp on the sensor-faithful simulated GPUs (simulated time on a manual
// clock: deterministic, under a second) and prints one Markdown table per model.
//
//   zeus_accuracy [MODEL...] [--placements N]     (default: h100 h200, 8 placements)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/device/sensor.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/accuracy.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> models;
  int placements = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--placements" && i + 1 < argc) {
      placements = std::atoi(argv[++i]);
    } else if (arg == "-h" || arg == "--help") {
      std::puts("usage: zeus_accuracy [MODEL...] [--placements N]  (default: h100 h200, 8)");
      return 0;
    } else {
      models.push_back(arg);
    }
  }
  if (models.empty()) {
    models = {"h100", "h200"};
  }
  try {
    for (const std::string& key : models) {
      const auto& model = zeus::device::simulated_gpu_model(key);
      const auto parameters = zeus::device::published_sensor_parameters(model.name);
      std::printf(
          "%s (simulated, sensor-faithful): worst |error| against the exact energy over "
          "%d placements\n",
          model.name.c_str(), placements);
      if (parameters) {
        std::printf("sensor: %s\n\n", parameters->source.c_str());
      }
      const auto rows = zeus::monitor::accuracy_study({.model_key = key, .placements = placements});
      std::printf("%s\n", zeus::monitor::accuracy_table_markdown(rows).c_str());
    }
  } catch (const zeus::Error& error) {
    std::fprintf(stderr, "zeus_accuracy: %s\n", error.what());
    return 2;
  }
  return 0;
}
