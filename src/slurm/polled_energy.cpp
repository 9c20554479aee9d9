// Energy of GPUs without a counter, polled through zeusd (polled_energy.hpp).
#include "slurm/polled_energy.hpp"

#include <vector>

#include "device/zeusd_connection.hpp"
#include "device/zeusd_power_gpu.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::slurm {

PolledEnergy::PolledEnergy(const device::ZeusdConfig& zeusd, const std::vector<int>& gpus,
                           double period_s) {
  auto daemon = std::make_shared<device::ZeusdConnection>(zeusd);
  std::vector<std::shared_ptr<device::Gpu>> list;
  std::vector<int> indices;
  for (const int index : gpus) {
    sampler_index_[index] = static_cast<int>(list.size());
    list.push_back(std::make_shared<device::ZeusdPowerGpu>(daemon, index, ""));
    indices.push_back(index);
  }
  monitor::PowerSamplerOptions options;
  options.domains = {monitor::PowerDomain::kDeviceInstant};
  options.period_s = period_s;
  // A bad second (zeusd busy) holds the last reading rather than ending the measurement.
  options.read_errors = monitor::ReadErrorPolicy::kCountAndHold;
  // The integral is kept whatever the timeline keeps: a few samples are enough.
  options.max_samples_per_series = 16;
  options.clock = steady_clock();
  sampler_ = std::make_unique<monitor::PowerSampler>(device::Gpus(list, indices), options);
}

PolledEnergy::~PolledEnergy() {
  if (sampler_) {
    sampler_->stop();
  }
}

std::map<int, double> PolledEnergy::finish() {
  sampler_->stop();
  return so_far();
}

std::map<int, double> PolledEnergy::so_far() const {
  const std::int64_t now = steady_clock()->now_ns();
  std::map<int, double> energy;
  for (const auto& [index, position] : sampler_index_) {
    if (const auto joules =
            sampler_->cumulative_energy_j(monitor::PowerDomain::kDeviceInstant, position, now)) {
      energy[index] = *joules;
    }
  }
  return energy;
}

}  // namespace zeus::slurm
