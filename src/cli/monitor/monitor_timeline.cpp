// `zeus monitor --timeline`: the sampler whose sweeps stream to the timeline file
// (monitor_command.hpp; the file's format is monitor/timeline_csv.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "cli/monitor/monitor_command.hpp"
#include "zeus/common/error.hpp"

namespace zeus::cli::monitor_command {
namespace {

// Whether every GPU of `indices` reports its temperature (the monitor layer's probe: other
// errors than kNotSupported propagate).
bool temperature_supported(const device::Gpus& gpus, const std::vector<int>& indices) {
  return std::all_of(indices.begin(), indices.end(),
                     [&](int index) { return monitor::supports_temperature(gpus.at(index)); });
}

// Whether every GPU of `indices` can read `domain` (the same probe).
bool domain_supported(const device::Gpus& gpus, const std::vector<int>& indices,
                      monitor::PowerDomain domain) {
  return std::all_of(indices.begin(), indices.end(), [&](int index) {
    return monitor::supports_power_domain(gpus.at(index), domain);
  });
}

}  // namespace

TimelineRecording::TimelineRecording(OutputFile file, const device::Gpus& gpus,
                                     const std::vector<int>& gpu_indices,
                                     std::optional<double> interval_s) {
  const std::shared_ptr<Clock> clock = steady_clock();
  writer_ = std::make_unique<monitor::timeline_csv::Writer>(std::move(file), clock->now_ns());
  if (gpu_indices.empty()) {
    return;
  }
  monitor::PowerSamplerOptions sampler_options;
  sampler_options.gpu_indices = gpu_indices;
  sampler_options.domains.clear();
  for (const monitor::PowerDomain domain :
       {monitor::PowerDomain::kDeviceInstant, monitor::PowerDomain::kDeviceAverage,
        monitor::PowerDomain::kMemoryAverage}) {
    if (domain_supported(gpus, gpu_indices, domain)) {
      sampler_options.domains.push_back(domain);
    }
  }
  if (sampler_options.domains.empty()) {
    throw Error(ErrorKind::kNotSupported,
                "--timeline: the monitored GPUs support no power reading in common");
  }
  sampler_options.period_s = interval_s;
  sampler_options.clock = clock;
  sampler_options.on_sweep = [writer =
                                  writer_.get()](const std::vector<monitor::PowerSample>& sweep) {
    writer->write(sweep);
  };
  // Temperature rows when every monitored GPU reports one (changes only).
  sampler_options.temperature = temperature_supported(gpus, gpu_indices);
  sampler_options.on_temperature_change =
      [writer = writer_.get()](const std::vector<monitor::TemperatureSample>& changes) {
        writer->write(changes);
      };
  sampler_ = std::make_unique<monitor::PowerSampler>(gpus, std::move(sampler_options));
}

TimelineRecording::~TimelineRecording() = default;

void TimelineRecording::finish(const std::string& path, std::vector<std::string>& errors) {
  if (sampler_) {
    sampler_->stop();
    try {
      sampler_->rethrow_if_failed();
    } catch (const std::exception& error) {
      errors.push_back(fmt::format("the power timeline stopped early: {}", error.what()));
    }
  }
  if (!writer_->finish()) {
    errors.push_back(fmt::format("writing the power timeline to \"{}\" failed", path));
  }
}

}  // namespace zeus::cli::monitor_command
