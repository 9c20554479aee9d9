// The SoC's rails on the one PowerSampler (zeus/monitor/soc_sampler.hpp).
#include "zeus/monitor/soc_sampler.hpp"

#include <utility>

#include "monitor/soc_rail_gpu.hpp"
#include "zeus/common/error.hpp"

namespace zeus::monitor {

namespace {

constexpr PowerDomain kRailDomain = PowerDomain::kDeviceInstant;

device::Gpus rail_gpus(const std::shared_ptr<const device::JetsonSoc>& soc) {
  if (!soc || soc->rails().empty()) {
    throw Error(ErrorKind::kInvalidArgument, "the SoC sampler needs a SoC with power rails");
  }
  std::vector<std::shared_ptr<device::Gpu>> gpus;
  std::vector<int> indices;
  for (std::size_t i = 0; i < soc->rails().size(); ++i) {
    gpus.push_back(std::make_shared<SocRailGpu>(soc, i));
    indices.push_back(static_cast<int>(i));
  }
  return device::Gpus(std::move(gpus), std::move(indices));
}

}  // namespace

SocSampler::SocSampler(std::shared_ptr<const device::JetsonSoc> soc, SocSamplerOptions options)
    : soc_(std::move(soc)),
      rails_(rail_gpus(soc_)),
      clock_(options.clock ? options.clock : steady_clock()) {
  PowerSamplerOptions sampler_options;
  sampler_options.domains = {kRailDomain};
  sampler_options.period_s = options.period_s;
  sampler_options.max_samples_per_series = options.max_samples_per_series;
  sampler_options.read_errors = ReadErrorPolicy::kCountAndHold;  // a bad read must not end a run
  sampler_options.clock = clock_;
  sampler_options.start_thread = options.start_thread;
  sampler_ = std::make_unique<PowerSampler>(rails_, std::move(sampler_options));
  sampler_->sample_once();
}

void SocSampler::read(std::int64_t time_ns, SocReading& reading) const {
  const std::size_t count = soc_->rails().size();
  reading.energy_j.resize(count);
  reading.skipped = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const int index = static_cast<int>(i);
    // A rail never read yet counts from 0 (its first good read starts its series).
    reading.energy_j[i] = sampler_->cumulative_energy_j(kRailDomain, index, time_ns).value_or(0.0);
    reading.skipped += sampler_->failed_sweeps(index);
  }
}

SocReading SocSampler::read_now() const {
  SocReading reading;
  read(clock_->now_ns(), reading);
  return reading;
}

SocEnergy SocSampler::energy_between(const SocReading& start, const SocReading& end) const {
  SocEnergy energy;
  energy.rails.reserve(soc_->rails().size());
  for (std::size_t i = 0; i < soc_->rails().size(); ++i) {
    const device::PowerRail& rail = soc_->rails()[i];
    const double start_j = i < start.energy_j.size() ? start.energy_j[i] : 0.0;
    const double end_j = i < end.energy_j.size() ? end.energy_j[i] : 0.0;
    energy.rails.push_back({rail.name, rail.kind, end_j - start_j});
  }
  energy.skipped_reads = end.skipped - start.skipped;
  return energy;
}

std::optional<double> SocSampler::power_w(std::size_t rail) const {
  return sampler_->power_w(kRailDomain, static_cast<int>(rail));
}

double SocSampler::energy_j(std::size_t rail) const {
  return sampler_->cumulative_energy_j(kRailDomain, static_cast<int>(rail), clock_->now_ns())
      .value_or(0.0);
}

std::uint64_t SocSampler::skipped(std::size_t rail) const {
  return sampler_->failed_sweeps(static_cast<int>(rail));
}

}  // namespace zeus::monitor
