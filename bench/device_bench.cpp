// Cost of one energy read: on the simulated GPU, and through the real NVML code path (dlopen'ed
// fake libnvidia-ml); and of one sweep of the RAPL wraparound tracker over N fake zones.
// Run: ./build/release/bench/zeus_device_bench
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <fstream>
#include <memory>
#include <string>

#include "common/temp_dir.hpp"
#include "zeus/device/gpu_provider.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/rapl_tracker.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace {

void BM_SimulatedTotalEnergy(benchmark::State& state) {
  zeus::device::SimulatedGpu gpu(zeus::device::simulated_gpu_model("h200"), 0,
                                 zeus::steady_clock());
  gpu.set_utilization(0.8);
  for (auto _ : state) {
    benchmark::DoNotOptimize(gpu.total_energy_mj());
  }
}
BENCHMARK(BM_SimulatedTotalEnergy);

void BM_SimulatedInstantPower(benchmark::State& state) {
  zeus::device::SimulatedGpu gpu(zeus::device::simulated_gpu_model("h200"), 0,
                                 zeus::steady_clock());
  for (auto _ : state) {
    benchmark::DoNotOptimize(gpu.instant_power_mw());
  }
}
BENCHMARK(BM_SimulatedInstantPower);

std::shared_ptr<zeus::device::Gpu> fake_nvml_gpu(benchmark::State& state, void*& handle) {
  const char* path = ZEUS_FAKE_NVML_PATH;
  handle = path[0] == '\0' ? nullptr : dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    state.SkipWithError("fake NVML not built (configure with tests enabled)");
    return nullptr;
  }
  auto configure = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_nvml_configure"));
  configure(R"({"devices":[{"name":"NVIDIA H200","uuid":"GPU-b","architecture":9,
      "power_limit_min_mw":200000,"power_limit_max_mw":700000,"power_limit_default_mw":700000,
      "power_limit_mw":700000,"power_usage_mw":300000,"power_fields":{"186:0":310000},
      "energy_mj":1000,"energy_step_mj":7}]})");
  return zeus::device::open_nvml(path)->open_gpu(0);
}

void BM_FakeNvmlTotalEnergy(benchmark::State& state) {
  void* handle = nullptr;
  auto gpu = fake_nvml_gpu(state, handle);
  if (gpu) {
    gpu->total_energy_mj();  // probes the architecture once
    for (auto _ : state) {
      benchmark::DoNotOptimize(gpu->total_energy_mj());
    }
  }
  gpu.reset();
  if (handle != nullptr) {
    dlclose(handle);
  }
}
BENCHMARK(BM_FakeNvmlTotalEnergy);

void BM_FakeNvmlInstantPower(benchmark::State& state) {
  void* handle = nullptr;
  auto gpu = fake_nvml_gpu(state, handle);
  if (gpu) {
    gpu->instant_power_mw();  // probes the power field scope once
    for (auto _ : state) {
      benchmark::DoNotOptimize(gpu->instant_power_mw());
    }
  }
  gpu.reset();
  if (handle != nullptr) {
    dlclose(handle);
  }
}
BENCHMARK(BM_FakeNvmlInstantPower);

// One tracker sweep over state.range(0) zones (packages without DRAM) in a fake powercap tree on
// the temporary folder's file system: what the tracker's thread does once a period.
void BM_RaplTrackerSweep(benchmark::State& state) {
  const zeus::TempDir dir("zeus-bench-rapl");
  for (int i = 0; i < state.range(0); ++i) {
    const std::filesystem::path zone = dir.path() / ("intel-rapl:" + std::to_string(i));
    std::filesystem::create_directories(zone);
    std::ofstream(zone / "name") << "package-" << i << "\n";
    std::ofstream(zone / "energy_uj") << "123456789\n";
    std::ofstream(zone / "max_energy_range_uj") << "262143328850\n";
    std::ofstream(zone / "constraint_0_max_power_uw") << "250000000\n";
  }
  const auto tracker = std::make_shared<zeus::device::RaplTracker>(
      zeus::device::RaplTrackerOptions{zeus::steady_clock(), /*start_thread=*/false});
  const zeus::device::CpuDiscovery cpus = zeus::device::discover_rapl_cpus(dir.path(), tracker);
  const std::shared_ptr<void> tracking = zeus::device::track_wraparound(cpus.cpus);
  for (auto _ : state) {
    tracker->sweep();
  }
  state.counters["zones"] = static_cast<double>(tracker->tracked_zones());
}
BENCHMARK(BM_RaplTrackerSweep)->Arg(1)->Arg(4)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
