// Providers of simulated GPUs and the ZEUS_SIMULATED_GPUS specification.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/text.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/sensor_gpu.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::device {
namespace {

class SimulatedProvider final : public GpuProvider {
 public:
  SimulatedProvider(int count, const SimulatedGpuModel& model, std::shared_ptr<Clock> clock) {
    for (int i = 0; i < count; ++i) {
      auto gpu = std::make_shared<SimulatedGpu>(model, i, clock);
      if (model.sensor_faithful) {
        gpus_.push_back(std::make_shared<SensorGpu>(gpu));
      } else {
        gpus_.push_back(std::move(gpu));
      }
    }
  }
  GpuBackend backend() const override { return GpuBackend::kSimulated; }
  std::string library_path() const override { return ""; }
  std::string driver_version() override { return "simulated"; }
  std::string library_version() override { return "simulated"; }
  int device_count() override { return static_cast<int>(gpus_.size()); }
  std::string device_uuid(int physical_index) override { return at(physical_index)->uuid(); }
  std::shared_ptr<Gpu> open_gpu(int physical_index) override { return at(physical_index); }

 private:
  std::shared_ptr<Gpu> at(int physical_index) const {
    if (physical_index < 0 || physical_index >= static_cast<int>(gpus_.size())) {
      throw Error(ErrorKind::kNotFound,
                  "no simulated GPU with index " + std::to_string(physical_index),
                  ErrorSubject::kGpu);
    }
    return gpus_[static_cast<std::size_t>(physical_index)];
  }
  std::vector<std::shared_ptr<Gpu>> gpus_;
};

}  // namespace

std::shared_ptr<GpuProvider> make_simulated_provider(int count, const SimulatedGpuModel& model,
                                                     std::shared_ptr<Clock> clock) {
  return std::make_shared<SimulatedProvider>(count, model, std::move(clock));
}

SimulatedGpuModel SimulatedGpusSpec::model() const {
  SimulatedGpuModel result = simulated_gpu_model(model_key);
  result.thermal_enabled = thermal;
  result.sensor_faithful = sensor;
  result.scope = module ? MeasuredScope::kModule : MeasuredScope::kGpu;
  return result;
}

SimulatedGpusSpec parse_simulated_gpus_spec(const std::string& value) {
  const std::string quoted = "ZEUS_SIMULATED_GPUS=\"" + value + "\"";
  const std::size_t colon = value.find(':');
  const std::string count_text = value.substr(0, colon);
  SimulatedGpusSpec spec;
  if (count_text.empty() || count_text.size() > 4 ||
      count_text.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                quoted + " is malformed: expected <count>[:<model>[:<option>...]], e.g. \"4:h200\"",
                ErrorSubject::kGpu);
  }
  spec.count = std::stoi(count_text);
  if (spec.count < 1 || spec.count > 1024) {
    throw Error(ErrorKind::kInvalidArgument, quoted + ": the GPU count must be between 1 and 1024",
                ErrorSubject::kGpu);
  }
  if (colon == std::string::npos) {
    return spec;
  }
  const std::vector<std::string_view> parts =
      text::split(std::string_view(value).substr(colon + 1), ':');
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string option = text::ascii_lower(parts[i]);
    bool* flag = option == "thermal"  ? &spec.thermal
                 : option == "sensor" ? &spec.sensor
                 : option == "module" ? &spec.module
                                      : nullptr;
    if (flag == nullptr || *flag) {
      throw Error(ErrorKind::kInvalidArgument,
                  quoted +
                      " is malformed: the options after the model are \"thermal\", "
                      "\"sensor\" and \"module\", each at most once, e.g. \"2:h200:thermal\" "
                      "or \"2:h200:sensor:thermal\"",
                  ErrorSubject::kGpu);
    }
    *flag = true;
  }
  spec.model_key = text::ascii_lower(parts[0]);
  try {
    const SimulatedGpuModel& model = simulated_gpu_model(spec.model_key);
    if (spec.sensor && !published_sensor_parameters(model.name)) {
      throw Error(
          ErrorKind::kInvalidArgument,
          "\"sensor\" needs a model with published sensor parameters; " + model.key + " has none",
          ErrorSubject::kGpu);
    }
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, quoted + ": " + error.what(), ErrorSubject::kGpu);
  }
  return spec;
}

}  // namespace zeus::device
