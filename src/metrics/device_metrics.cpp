// DeviceMetrics: GPU, CPU and DRAM gauges and counters, refreshed on a background thread from
// the monitor layer's read path (a PowerSampler per GPU, the energy counters, RAPL).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/log.hpp"
#include "metrics/carbon_cost_counters.hpp"
#include "metrics/exposition.hpp"
#include "metrics/soc_metrics.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/metrics/device_metrics.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::metrics {

DeviceMetrics::DeviceMetrics(const device::Gpus& gpus,
                             std::vector<std::shared_ptr<device::Cpu>> cpus,
                             DeviceMetricsOptions options)
    : clock_(options.clock ? options.clock : steady_clock()),
      interval_s_(options.interval_s),
      wall_clock_(options.wall_clock ? options.wall_clock : system_clock()) {
  if (!(interval_s_ >= monitor::kMinSamplingPeriodS) ||
      !(interval_s_ <= monitor::kMaxSamplingPeriodS)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("the metrics interval must be at least 1 ms and at most one day "
                            "(86400 s); got {} s",
                            interval_s_));
  }
  std::vector<int> indices;
  if (options.gpu_indices) {
    indices = *options.gpu_indices;
  } else {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      indices.push_back(static_cast<int>(i));
    }
  }
  for (const int index : indices) {
    if (index < 0 || static_cast<std::size_t>(index) >= gpus.size()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("GPU index {} does not exist; this process sees {} GPU(s)", index,
                              gpus.size()));
    }
    GpuState state;
    state.index = index;
    state.gpu = gpus.shared(index);
    try {
      state.name = state.gpu->name();
      state.uuid = state.gpu->uuid();
      state.power_scope = std::string(device::measured_scope_name(state.gpu->power_scope()));
      state.energy_scope = std::string(device::measured_scope_name(state.gpu->energy_scope()));
      state.has_counter = state.gpu->supports_energy_counter();
    } catch (const std::exception& error) {
      log().warn("metrics: GPU {}: {}", index, error.what());
    }
    // What the GPU offers, asked once: a read that fails for another reason than "not
    // supported" keeps the domain (a transient failure: the sampler keeps trying).
    const auto offers = [&](auto probe) {
      try {
        return probe();
      } catch (const std::exception&) {
        return true;
      }
    };
    for (const monitor::PowerDomain domain :
         {monitor::PowerDomain::kDeviceInstant, monitor::PowerDomain::kDeviceAverage,
          monitor::PowerDomain::kMemoryAverage}) {
      if (offers([&] { return monitor::supports_power_domain(*state.gpu, domain); })) {
        state.power_domains.push_back(domain);
      }
    }
    const bool temperature = offers([&] { return monitor::supports_temperature(*state.gpu); });
    if (!state.power_domains.empty() || temperature) {
      monitor::PowerSamplerOptions sampler;
      sampler.gpu_indices = {index};
      sampler.domains = state.power_domains;
      sampler.temperature = temperature;
      sampler.period_s = interval_s_;
      sampler.max_samples_per_series = 2;  // a view needs the latest value, not a timeline
      sampler.read_errors = monitor::ReadErrorPolicy::kCountAndHold;
      sampler.clock = clock_;
      sampler.start_thread = false;  // driven by this class's thread
      try {
        state.sampler = std::make_unique<monitor::PowerSampler>(gpus, std::move(sampler));
      } catch (const std::exception& error) {
        log().warn("metrics: GPU {}: its power and temperature cannot be sampled: {}", index,
                   error.what());
        state.power_domains.clear();
      }
    }
    gpus_.push_back(std::move(state));
  }
  // The interval may be longer than a RAPL counter takes to wrap (docs/rapl.md).
  cpu_tracking_ = device::track_wraparound(cpus);
  for (auto& cpu : cpus) {
    CpuState state;
    state.cpu = std::move(cpu);
    cpus_.push_back(std::move(state));
  }
  if (options.carbon_intensity || options.electricity_price) {
    carbon_cost_ = std::make_unique<CarbonCostCounters>(std::move(options.carbon_intensity),
                                                        std::move(options.electricity_price));
  }
  if (options.soc) {
    soc_ = std::make_unique<SocMetrics>(std::move(options.soc), interval_s_, clock_);
  }
  sample_once();
  if (options.start_thread) {
    price_apart_ = carbon_cost_ != nullptr;
    thread_ = std::thread([this] { run(); });
    if (price_apart_) {
      pricer_ = std::thread([this] { run_pricer(); });
    }
  }
}

DeviceMetrics::~DeviceMetrics() {
  stop();
}

void DeviceMetrics::stop() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (carbon_cost_ && pricer_.joinable()) {
    carbon_cost_->cancel();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  if (pricer_.joinable()) {
    pricer_.join();
  }
}

void DeviceMetrics::run() {
  const auto period = std::chrono::duration<double>(interval_s_);
  std::unique_lock lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    sample_once();
    lock.lock();
  }
}

void DeviceMetrics::run_pricer() {
  const auto period = std::chrono::duration<double>(interval_s_);
  std::unique_lock lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    price_pending();
    lock.lock();
  }
}

void DeviceMetrics::sample_once() {
  // Read outside the lock; a scrape only waits for the copy into the state.
  struct GpuReading {
    std::optional<std::uint64_t> counter_mj;
    std::optional<double> sampled_energy_j;  // held power integrated by the sampler
    std::vector<std::pair<monitor::PowerDomain, double>> power_w;
    std::optional<double> limit_w;
    std::optional<double> temperature_c;
    bool failed = false;
  };
  std::vector<GpuReading> readings(gpus_.size());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& state = gpus_[i];
    if (state.sampler) {
      state.sampler->sample_once();
    }
  }
  if (soc_) {
    soc_->sample_once();  // its own lock: a scrape waits only for its copy
  }
  const std::int64_t now_ns = clock_->now_ns();
  const double now_unix_s = wall_clock_->now_s();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& state = gpus_[i];
    device::Gpu& gpu = *state.gpu;
    GpuReading& reading = readings[i];
    const auto attempt = [&](auto read) {
      try {
        read();
      } catch (const Error& error) {
        if (error.kind() != ErrorKind::kNotSupported) {
          reading.failed = true;
        }
      } catch (const std::exception&) {
        reading.failed = true;
      }
    };
    if (state.has_counter) {
      attempt([&] { reading.counter_mj = gpu.total_energy_mj(); });
    }
    if (const monitor::PowerSampler* sampler = state.sampler.get()) {
      const std::uint64_t failed_sweeps = sampler->failed_sweeps(state.index);
      reading.failed = failed_sweeps != state.failed_sweeps_seen;
      state.failed_sweeps_seen = failed_sweeps;
      for (const monitor::PowerDomain domain : state.power_domains) {
        if (const std::optional<double> watts = sampler->power_w(domain, state.index)) {
          reading.power_w.emplace_back(domain, *watts);
        }
      }
      if (sampler->samples_temperature()) {
        reading.temperature_c = sampler->temperature_c(state.index);
      }
      if (!state.has_counter && !state.power_domains.empty()) {
        reading.sampled_energy_j =
            sampler->cumulative_energy_j(state.power_domains.front(), state.index, now_ns);
      }
    }
    attempt([&] { reading.limit_w = units::watts_from_milliwatts(gpu.power_limit_mw()); });
  }
  struct CpuReading {
    std::optional<std::uint64_t> package_uj, dram_uj;
    bool failed = false;
  };
  std::vector<CpuReading> cpu_readings(cpus_.size());
  for (std::size_t i = 0; i < cpus_.size(); ++i) {
    try {
      cpu_readings[i].package_uj = cpus_[i].cpu->package_energy_uj();
      if (cpus_[i].cpu->has_dram()) {
        cpu_readings[i].dram_uj = cpus_[i].cpu->dram_energy_uj();
      }
    } catch (const std::exception&) {
      cpu_readings[i].failed = true;
    }
  }

  std::unique_lock lock(mutex_);
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& state = gpus_[i];
    GpuReading& reading = readings[i];
    if (reading.failed) {
      ++state.errors;
    }
    if (!reading.power_w.empty()) {
      state.power_w = std::move(reading.power_w);
    }
    if (reading.limit_w) {
      state.power_limit_w = reading.limit_w;
    }
    if (reading.temperature_c) {
      state.temperature_c = reading.temperature_c;
    }
    if (reading.counter_mj) {
      if (!state.counter_base_mj) {
        state.counter_base_mj = reading.counter_mj;
      }
      if (*reading.counter_mj >= *state.counter_base_mj) {
        state.energy_j = units::joules_from_millijoules(
            static_cast<double>(*reading.counter_mj - *state.counter_base_mj));
      }
    } else if (reading.sampled_energy_j) {
      state.energy_j = *reading.sampled_energy_j;
    }
  }
  for (std::size_t i = 0; i < cpus_.size(); ++i) {
    CpuState& state = cpus_[i];
    const CpuReading& reading = cpu_readings[i];
    if (reading.failed) {
      ++state.errors;
      continue;
    }
    const double elapsed_s =
        state.last_ns ? units::seconds_from_nanoseconds(now_ns - *state.last_ns) : 0.0;
    const auto update = [&](std::optional<std::uint64_t> value, std::optional<std::uint64_t>& base,
                            double& joules, std::optional<double>& watts) {
      if (!value) {
        return;
      }
      if (!base) {
        base = value;
      }
      const double now_j =
          units::joules_from_microjoules(static_cast<double>(*value - std::min(*value, *base)));
      if (elapsed_s > 0.0) {
        watts = (now_j - joules) / elapsed_s;
      }
      joules = now_j;
    };
    update(reading.package_uj, state.package_base_uj, state.package_j, state.package_w);
    update(reading.dram_uj, state.dram_base_uj, state.dram_j, state.dram_w);
    state.last_ns = now_ns;
  }
  last_read_unix_s_ = now_unix_s;
  if (!carbon_cost_ || price_apart_) {
    return;
  }
  lock.unlock();
  price_pending();
}

void DeviceMetrics::price_pending() {
  std::unique_lock lock(mutex_);
  if (!last_read_unix_s_) {
    return;
  }
  const double now_unix_s = *last_read_unix_s_;
  if (last_priced_unix_s_ && *last_priced_unix_s_ == now_unix_s) {
    return;  // nothing read since
  }
  const monitor::Measurement energy = take_energy_since_last_priced();
  lock.unlock();
  // The providers may block on HTTP: asked outside the lock, so that scrapes and reads go on.
  if (!last_priced_unix_s_) {
    carbon_cost_->track(energy);
  } else {
    // A wall clock set back gives a zero-length interval rather than an invalid one.
    carbon_cost_->add(energy, std::min(*last_priced_unix_s_, now_unix_s), now_unix_s);
  }
  last_priced_unix_s_ = now_unix_s;
}

monitor::Measurement DeviceMetrics::take_energy_since_last_priced() {
  // A counter that went down (a GPU counter reset) prices nothing, and the baseline follows it.
  const auto take = [](double now_j, double& priced_j) {
    const double delta_j = std::max(0.0, now_j - priced_j);
    priced_j = now_j;
    return delta_j;
  };
  monitor::Measurement energy;
  for (GpuState& gpu : gpus_) {
    energy.gpu_energy_j.set(gpu.index, take(gpu.energy_j, gpu.priced_j));
  }
  for (CpuState& cpu : cpus_) {
    if (cpu.package_base_uj) {
      energy.cpu_energy_j.set(cpu.cpu->index(), take(cpu.package_j, cpu.priced_package_j));
    }
    if (cpu.dram_base_uj) {
      energy.dram_energy_j.set(cpu.cpu->index(), take(cpu.dram_j, cpu.priced_dram_j));
    }
  }
  return energy;
}

void DeviceMetrics::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  const auto line = [&out](std::string_view name, const std::string& labels, double value) {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, format_value(value));
  };
  const auto index_label = [](int index) { return fmt::format("index=\"{}\"", index); };

  write_family_header(out, "zeus_gpu_info", "gauge",
                      "Always 1; the GPU's name, UUID and what its power and energy figures cover "
                      "(gpu; module: a Grace superchip's GPU + CPU + memory) as labels");
  for (const GpuState& gpu : gpus_) {
    line("zeus_gpu_info",
         fmt::format(R"(index="{}",name="{}",uuid="{}",power_scope="{}",energy_scope="{}")",
                     gpu.index, escape_label_value(gpu.name), escape_label_value(gpu.uuid),
                     gpu.power_scope, gpu.energy_scope),
         1);
  }
  write_family_header(out, "zeus_gpu_energy_joules_total", "counter",
                      "GPU energy since the exporter started, in joules");
  for (const GpuState& gpu : gpus_) {
    line("zeus_gpu_energy_joules_total", index_label(gpu.index), gpu.energy_j);
  }
  write_family_header(out, "power_monitor_gpu_power_watts", "gauge",
                      "GPU power draw per domain, in watts");
  for (const GpuState& gpu : gpus_) {
    for (const auto& [domain, watts] : gpu.power_w) {
      line("power_monitor_gpu_power_watts",
           fmt::format("index=\"{}\",domain=\"{}\"", gpu.index, monitor::power_domain_name(domain)),
           watts);
    }
  }
  write_family_header(out, "zeus_gpu_power_limit_watts", "gauge", "GPU power limit, in watts");
  for (const GpuState& gpu : gpus_) {
    if (gpu.power_limit_w) {
      line("zeus_gpu_power_limit_watts", index_label(gpu.index), *gpu.power_limit_w);
    }
  }
  write_family_header(out, "zeus_gpu_temperature_celsius", "gauge",
                      "GPU temperature, in degrees Celsius");
  for (const GpuState& gpu : gpus_) {
    if (gpu.temperature_c) {
      line("zeus_gpu_temperature_celsius", index_label(gpu.index), *gpu.temperature_c);
    }
  }
  write_family_header(out, "zeus_cpu_energy_joules_total", "counter",
                      "CPU package energy (RAPL) since the exporter started, in joules");
  for (const CpuState& cpu : cpus_) {
    if (cpu.package_base_uj) {
      line("zeus_cpu_energy_joules_total", index_label(cpu.cpu->index()), cpu.package_j);
    }
  }
  write_family_header(out, "zeus_dram_energy_joules_total", "counter",
                      "DRAM energy (RAPL) since the exporter started, in joules");
  for (const CpuState& cpu : cpus_) {
    if (cpu.dram_base_uj) {
      line("zeus_dram_energy_joules_total", index_label(cpu.cpu->index()), cpu.dram_j);
    }
  }
  write_family_header(out, "zeus_cpu_power_watts", "gauge",
                      "CPU package and DRAM power over the last interval, in watts");
  for (const CpuState& cpu : cpus_) {
    if (cpu.package_w) {
      line("zeus_cpu_power_watts", fmt::format("index=\"{}\",domain=\"package\"", cpu.cpu->index()),
           *cpu.package_w);
    }
    if (cpu.dram_w) {
      line("zeus_cpu_power_watts", fmt::format("index=\"{}\",domain=\"dram\"", cpu.cpu->index()),
           *cpu.dram_w);
    }
  }
  write_family_header(out, "zeus_device_read_errors_total", "counter",
                      "Device reads that failed (the last good value is kept)");
  for (const GpuState& gpu : gpus_) {
    line("zeus_device_read_errors_total", fmt::format("device=\"gpu{}\"", gpu.index),
         static_cast<double>(gpu.errors));
  }
  for (const CpuState& cpu : cpus_) {
    line("zeus_device_read_errors_total", fmt::format("device=\"cpu{}\"", cpu.cpu->index()),
         static_cast<double>(cpu.errors));
  }
  if (soc_) {
    soc_->render_read_errors(out);
    soc_->render(out);
  }
  if (carbon_cost_) {
    carbon_cost_->render(out);
  }
}

}  // namespace zeus::metrics
