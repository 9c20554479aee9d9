// The monitor's own overhead: a begin+end window pair on zero-cost GPUs (also through the carbon
// and cost monitors, against the plain pair as baseline), and the sampler thread's CPU cost.
// Run: ./build/release/bench/zeus_monitor_bench
#include <benchmark/benchmark.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/power_sampler.hpp"
#include "zeus/monitor/price.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

// A GPU whose every reading costs nothing: what is left is zeus's own overhead.
class ZeroCostGpu final : public zeus::device::Gpu {
 public:
  zeus::device::GpuBackend backend() const override { return zeus::device::GpuBackend::kSimulated; }
  std::string name() override { return "zero-cost"; }
  std::string uuid() override { return "GPU-0"; }
  std::string pci_bus_id() override { return "00000000:00:00.0"; }
  std::string architecture() override { return "hopper"; }
  zeus::device::PowerLimitConstraints power_limit_constraints_mw() override { return {100, 200}; }
  std::uint32_t default_power_limit_mw() override { return 200; }
  std::uint32_t power_limit_mw() override { return 200; }
  std::uint32_t enforced_power_limit_mw() override { return 200; }
  void set_power_limit_mw(std::uint32_t) override {}
  void reset_power_limit() override {}
  bool persistence_mode() override { return false; }
  void set_persistence_mode(bool) override {}
  std::vector<std::uint32_t> supported_memory_clocks_mhz() override { return {}; }
  std::vector<std::uint32_t> supported_graphics_clocks_mhz(std::optional<std::uint32_t>) override {
    return {};
  }
  void set_gpu_locked_clocks_mhz(std::uint32_t, std::uint32_t) override {}
  void reset_gpu_locked_clocks() override {}
  void set_memory_locked_clocks_mhz(std::uint32_t, std::uint32_t) override {}
  void reset_memory_locked_clocks() override {}
  std::uint32_t instant_power_mw() override { return 100'000; }
  std::uint32_t average_power_mw() override { return 100'000; }
  std::uint32_t average_memory_power_mw() override { return 10'000; }
  bool supports_energy_counter() override { return counter_; }
  std::uint64_t total_energy_mj() override { return energy_mj_ += step_mj_; }
  zeus::device::MeasuredScope power_scope() override { return zeus::device::MeasuredScope::kGpu; }
  zeus::device::MeasuredScope energy_scope() override { return zeus::device::MeasuredScope::kGpu; }
  int temperature_c() override { return 40; }

  // step_mj: how far the counter moves on each read (0: a counter that has not refreshed).
  explicit ZeroCostGpu(bool counter = true, std::uint64_t step_mj = 7)
      : counter_(counter), step_mj_(step_mj) {}

 private:
  bool counter_;
  std::uint64_t step_mj_;
  std::uint64_t energy_mj_ = 0;
};

zeus::device::Gpus zero_cost_gpus(int count, bool counter = true, std::uint64_t step_mj = 7) {
  std::vector<std::shared_ptr<zeus::device::Gpu>> gpus;
  std::vector<int> physical;
  for (int i = 0; i < count; ++i) {
    gpus.push_back(std::make_shared<ZeroCostGpu>(counter, step_mj));
    physical.push_back(i);
  }
  return zeus::device::Gpus(gpus, physical);
}

void BM_WindowPairZeroCost(benchmark::State& state) {
  const zeus::device::Gpus gpus = zero_cost_gpus(static_cast<int>(state.range(0)));
  zeus::monitor::ZeusMonitor monitor(gpus, {}, {});
  for (auto _ : state) {
    monitor.begin_window("step", {.sync_execution = false});
    benchmark::DoNotOptimize(monitor.end_window("step", {.sync_execution = false}));
  }
}
BENCHMARK(BM_WindowPairZeroCost)->Arg(1)->Arg(8);

double thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

// Windows shorter than the counter's refresh period read 0 J on real GPUs (training steps of
// tens of milliseconds do), so the zero-energy path (the warning, said once) is a hot path too.
// Both paths on zero-cost GPUs, interleaved in blocks of 1000 pairs and timed on this thread's
// CPU clock, so that their ratio holds on a loaded machine: counters zero_pair_ns,
// energy_pair_ns and zero_over_energy. Arg: GPUs.
void BM_ZeroEnergyWindowPair(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  zeus::monitor::ZeusMonitor with_energy(zero_cost_gpus(count), {}, {});
  zeus::monitor::ZeusMonitor zero_energy(zero_cost_gpus(count, true, 0), {}, {});
  const auto pairs = [](zeus::monitor::ZeusMonitor& monitor) {
    const double start_ns = thread_cpu_ns();
    for (int i = 0; i < 1000; ++i) {
      monitor.begin_window("step", {.sync_execution = false});
      benchmark::DoNotOptimize(monitor.end_window("step", {.sync_execution = false}));
    }
    return (thread_cpu_ns() - start_ns) / 1000.0;
  };
  pairs(zero_energy);  // the once-only warning, out of the timing
  double zero_ns = 0.0;
  double energy_ns = 0.0;
  for (auto _ : state) {
    zero_ns += pairs(zero_energy);
    energy_ns += pairs(with_energy);
  }
  const auto blocks = static_cast<double>(state.iterations());
  state.counters["zero_pair_ns"] = zero_ns / blocks;
  state.counters["energy_pair_ns"] = energy_ns / blocks;
  state.counters["zero_over_energy"] = zero_ns / energy_ns;
}
BENCHMARK(BM_ZeroEnergyWindowPair)->Arg(1)->Arg(8);

// The carbon and cost monitors' own work on top of the window pair (BM_WindowPairZeroCost/8 is
// the baseline): the wall-clock bookkeeping, the provider's pieces and the apportioning, for 8
// zero-cost GPUs. Arg 0: a constant provider; 1: an offline hourly series over a day (carbon) or
// a two-period time-of-use tariff (cost).
std::shared_ptr<zeus::monitor::WindowMonitor> zero_cost_monitor(int gpus) {
  return std::make_shared<zeus::monitor::ZeusMonitor>(
      zero_cost_gpus(gpus), std::vector<std::shared_ptr<zeus::device::Cpu>>{},
      zeus::monitor::ZeusMonitorOptions{});
}

void BM_CarbonWindowPair(benchmark::State& state) {
  std::shared_ptr<zeus::monitor::CarbonIntensityProvider> provider;
  if (state.range(0) == 0) {
    provider = std::make_shared<zeus::monitor::ConstantCarbonIntensity>(400.0);
  } else {
    const double now_s = zeus::system_clock()->now_s();
    std::vector<zeus::monitor::OfflineCarbonIntensity::Point> points;
    for (int hour = -23; hour <= 1; ++hour) {
      points.push_back({now_s + hour * 3600.0, 300.0 + 5.0 * hour});
    }
    provider = std::make_shared<zeus::monitor::OfflineCarbonIntensity>(points);
  }
  zeus::monitor::CarbonEmissionMonitor monitor(zero_cost_monitor(8), provider);
  for (auto _ : state) {
    monitor.begin_window("step", {.sync_execution = false});
    benchmark::DoNotOptimize(monitor.end_window("step", {.sync_execution = false}));
  }
}
BENCHMARK(BM_CarbonWindowPair)->Arg(0)->Arg(1);

void BM_CostWindowPair(benchmark::State& state) {
  std::shared_ptr<zeus::monitor::ElectricityPriceProvider> provider;
  if (state.range(0) == 0) {
    provider = std::make_shared<zeus::monitor::ConstantElectricityPrice>(0.15, "USD");
  } else {
    provider = std::make_shared<zeus::monitor::TariffElectricityPrice>(
        std::vector<zeus::monitor::TariffElectricityPrice::Period>{
            {.weekdays = 0x1f, .start_s = 16 * 3600, .end_s = 21 * 3600, .price_per_kwh = 0.32},
            {.weekdays = 0x60, .start_s = 0, .end_s = 86400, .price_per_kwh = 0.09}},
        0.12, -5.0, "USD");
  }
  zeus::monitor::EnergyCostMonitor monitor(zero_cost_monitor(8), provider);
  for (auto _ : state) {
    monitor.begin_window("step", {.sync_execution = false});
    benchmark::DoNotOptimize(monitor.end_window("step", {.sync_execution = false}));
  }
}
BENCHMARK(BM_CostWindowPair)->Arg(0)->Arg(1);

void BM_WindowPairSimulatedH200(benchmark::State& state) {
  std::vector<std::shared_ptr<zeus::device::Gpu>> gpus;
  std::vector<int> physical;
  for (int i = 0; i < state.range(0); ++i) {
    gpus.push_back(std::make_shared<zeus::device::SimulatedGpu>(
        zeus::device::simulated_gpu_model("h200"), i, zeus::steady_clock()));
    physical.push_back(i);
  }
  zeus::monitor::ZeusMonitor monitor(zeus::device::Gpus(gpus, physical), {}, {});
  for (auto _ : state) {
    monitor.begin_window("step", {.sync_execution = false});
    benchmark::DoNotOptimize(monitor.end_window("step", {.sync_execution = false}));
  }
}
BENCHMARK(BM_WindowPairSimulatedH200)->Arg(1)->Arg(8);

double process_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct IdleWindow {
  double cpu_s;  // CPU used by the whole process meanwhile
  double wall_s;
};

// Sleeps the calling thread for 2 s and reports what the process's other threads used.
IdleWindow sleep_and_measure_cpu() {
  const double cpu_start_s = process_cpu_s();
  const auto wall_start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  return {process_cpu_s() - cpu_start_s,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
}

// CPU used by the sampler thread while the main thread sleeps, as % of one core.
void BM_SamplerCpuCost(benchmark::State& state) {
  const zeus::device::Gpus gpus = zero_cost_gpus(8);
  const double period_s = 1.0 / static_cast<double>(state.range(0));
  for (auto _ : state) {
    zeus::monitor::PowerSamplerOptions options;
    options.period_s = period_s;
    options.domains = {zeus::monitor::PowerDomain::kDeviceInstant};
    zeus::monitor::PowerSampler sampler(gpus, options);
    const IdleWindow window = sleep_and_measure_cpu();
    sampler.stop();
    state.SetIterationTime(window.wall_s);
    state.counters["cpu_percent_of_one_core"] = 100.0 * window.cpu_s / window.wall_s;
    state.counters["samples"] =
        static_cast<double>(sampler.timeline(zeus::monitor::PowerDomain::kDeviceInstant, 0).size());
  }
}
BENCHMARK(BM_SamplerCpuCost)
    ->Arg(100)
    ->Arg(1000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

// The floor: a thread that only wakes up at the same rate (clock_nanosleep, as the sampler does
// for short periods) and does nothing else. What BM_SamplerCpuCost adds on top is zeus's work.
void BM_EmptyWakeLoopCpuCost(benchmark::State& state) {
  const auto period = std::chrono::nanoseconds(1'000'000'000 / state.range(0));
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    std::thread waker([&] {
      auto next = std::chrono::steady_clock::now();
      while (!stop.load()) {
        next += period;
        const auto since_epoch = next.time_since_epoch();
        timespec until{};
        until.tv_sec = static_cast<time_t>(
            std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count());
        until.tv_nsec =
            static_cast<long>((since_epoch - std::chrono::seconds(until.tv_sec)).count());
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
      }
    });
    const IdleWindow window = sleep_and_measure_cpu();
    stop = true;
    waker.join();
    state.SetIterationTime(window.wall_s);
    state.counters["cpu_percent_of_one_core"] = 100.0 * window.cpu_s / window.wall_s;
  }
}
BENCHMARK(BM_EmptyWakeLoopCpuCost)
    ->Arg(100)
    ->Arg(1000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
