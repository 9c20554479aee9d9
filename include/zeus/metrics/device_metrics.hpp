// The exporter's device series: a view over the monitor layer's one read path (a PowerSampler
// per GPU for power, temperature and the energy of counter-less GPUs; the energy counters;
// RAPL), refreshed every interval and rendered on scrape (docs/prometheus.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::monitor {
class CarbonIntensityProvider;
class ElectricityPriceProvider;
}  // namespace zeus::monitor

namespace zeus::metrics {

struct DeviceMetricsOptions {
  // Indices into the Gpus given; nullopt = all.
  std::optional<std::vector<int>> gpu_indices;
  // How often the devices are read (>= 1 ms). Counters without a hardware energy counter are
  // integrated from power at this period.
  double interval_s = 1.0;
  std::shared_ptr<Clock> clock;  // the steady clock when null
  // Start the sampling thread. Tests leave it off and call sample_once().
  bool start_thread = true;
  // Carbon emission and electricity cost counters (none when null): at every read, each device's
  // energy since the previous read times the provider's intensity or price over that interval,
  // apportioned to the provider's pieces by time as the carbon and cost monitors do. With the
  // thread started, the providers are called from a pricing thread of their own (a slow web
  // service never holds the reads back: what was read meanwhile is priced in one interval once it
  // answers); without it, by sample_once(); never from a scrape. A failing provider leaves that
  // interval out (counted in zeus_*_failures_total) and never stops the reads.
  std::shared_ptr<monitor::CarbonIntensityProvider> carbon_intensity;
  std::shared_ptr<monitor::ElectricityPriceProvider> electricity_price;
  std::shared_ptr<Clock> wall_clock;  // Unix time for the providers; system_clock() when null
  // A SoC whose power rails are read at the same interval (a Jetson: device::get_soc()); none
  // when null. Its rails are left out of the carbon and cost counters (they overlap).
  std::shared_ptr<const device::JetsonSoc> soc;
};

class CarbonCostCounters;  // metrics/carbon_cost_counters.hpp (internal)
class SocMetrics;          // metrics/soc_metrics.hpp (internal)

// The devices' state, read every interval by a background thread and rendered on scrape (a
// scrape never waits for a device). Families:
//   zeus_gpu_energy_joules_total{index}       counter (hardware counter, or integrated power)
//   power_monitor_gpu_power_watts{index,domain} gauge (domain: device_instant, device_average,
//                                               memory_average, where the GPU supports it)
//   zeus_gpu_power_limit_watts{index}         gauge
//   zeus_gpu_temperature_celsius{index}       gauge
//   zeus_gpu_info{index,name,uuid,power_scope,energy_scope}  gauge, always 1 (scope: gpu, or
//                                             module for a Grace superchip's GPU + CPU + memory)
//   zeus_cpu_energy_joules_total{index}       counter (RAPL package)
//   zeus_dram_energy_joules_total{index}      counter (RAPL DRAM)
//   zeus_cpu_power_watts{index,domain}        gauge (package, dram; from the energy deltas)
//   zeus_device_read_errors_total{device}     counter (a failed read keeps the last value)
// With a SoC: zeus_soc_rail_power_watts{rail,kind}, zeus_soc_rail_energy_joules_total{rail,kind}
// and read errors as device="soc_rail_<rail>" (metrics/soc_metrics.hpp).
// With a carbon intensity provider: zeus_{gpu,cpu,dram}_carbon_emission_grams_total{index},
// zeus_carbon_intensity_gco2eq_per_kwh, zeus_carbon_intensity_failures_total; with a price
// provider: zeus_{gpu,cpu,dram}_energy_cost_total{index,currency}, zeus_electricity_price_per_kwh
// {currency}, zeus_electricity_price_failures_total (currency: only when the provider says it).
class DeviceMetrics {
 public:
  // Throws Error(kInvalidArgument) for a bad GPU index or interval.
  DeviceMetrics(const device::Gpus& gpus, std::vector<std::shared_ptr<device::Cpu>> cpus,
                DeviceMetricsOptions options = {});
  ~DeviceMetrics();
  DeviceMetrics(const DeviceMetrics&) = delete;
  DeviceMetrics& operator=(const DeviceMetrics&) = delete;

  // Stops the reading thread; a carbon or price lookup in flight is cancelled (the providers'
  // cancel()), so that this returns at once whatever a web service does.
  void stop();
  // One read of every device (what the thread does every interval), priced at once when no
  // pricing thread runs (start_thread false).
  void sample_once();
  void render(std::string& out) const;

 private:
  struct GpuState {
    int index = 0;
    std::shared_ptr<device::Gpu> gpu;
    std::string name;
    std::string uuid;
    // What its power and energy figures cover (device::measured_scope_name: gpu, module, unknown).
    std::string power_scope = "unknown";
    std::string energy_scope = "unknown";
    bool has_counter = false;
    std::vector<monitor::PowerDomain> power_domains;  // those the GPU supports (probed once)
    // The monitor layer's sampler of this GPU's power domains and temperature, which also
    // integrates held power into energy for a GPU without a counter (kCountAndHold, driven by
    // this class's thread); null when the GPU reports neither.
    std::unique_ptr<monitor::PowerSampler> sampler;
    std::uint64_t failed_sweeps_seen = 0;          // the reading thread's only
    std::optional<std::uint64_t> counter_base_mj;  // first hardware reading
    double energy_j = 0.0;
    std::vector<std::pair<monitor::PowerDomain, double>> power_w;  // per supported domain
    std::optional<double> power_limit_w;
    std::optional<double> temperature_c;
    std::uint64_t errors = 0;
    double priced_j = 0.0;  // energy_j at the last read given to the carbon/cost counters
  };
  struct CpuState {
    std::shared_ptr<device::Cpu> cpu;
    std::optional<std::uint64_t> package_base_uj, dram_base_uj;
    double package_j = 0.0, dram_j = 0.0;
    std::optional<double> package_w, dram_w;
    std::uint64_t errors = 0;
    std::optional<std::int64_t> last_ns;
    double priced_package_j = 0.0, priced_dram_j = 0.0;  // as GpuState::priced_j
  };
  void run();
  void run_pricer();
  // Prices the energy read since the last call over its interval (the providers may block).
  void price_pending();
  // The energy of each device since the previous call (never negative); under mutex_.
  monitor::Measurement take_energy_since_last_priced();

  std::shared_ptr<Clock> clock_;
  double interval_s_;
  mutable std::mutex mutex_;
  std::vector<GpuState> gpus_;
  std::vector<CpuState> cpus_;
  std::shared_ptr<void> cpu_tracking_;  // RAPL wraparound tracking while the metrics live
  std::shared_ptr<Clock> wall_clock_;
  std::unique_ptr<CarbonCostCounters> carbon_cost_;  // null without a provider
  std::unique_ptr<SocMetrics> soc_;                  // null without a SoC
  std::optional<double> last_read_unix_s_;           // under mutex_
  std::optional<double> last_priced_unix_s_;         // the pricing thread's only
  bool price_apart_ = false;                         // the pricing thread prices, not the reads
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::thread pricer_;
};

}  // namespace zeus::metrics
