#include "zeus/monitor/zeus_monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "support/fault_injecting_gpu.hpp"
#include "support/log_capture.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/monitor/replay_monitor.hpp"

// Counts heap allocations made by the test thread while counting is on. The replacement pairs
// malloc with free; GCC's -Wmismatched-new-delete cannot see that once operator new is inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
thread_local bool g_counting = false;
thread_local long g_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting) {
    ++g_allocations;
  }
  if (void* memory = std::malloc(size == 0 ? 1 : size)) {
    return memory;
  }
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  std::free(memory);
}

namespace {

using zeus::ErrorKind;
using zeus::monitor::Measurement;
using zeus::monitor::ZeusMonitor;
using zeus::monitor::ZeusMonitorOptions;
using zeus::testing::SimulatedRig;
using zeus::testing::TempDir;

ZeusMonitorOptions manual(const SimulatedRig& rig) {
  ZeusMonitorOptions options;
  options.clock = rig.clock;
  options.start_sampler_thread = false;
  return options;
}

std::string error_message(const std::function<void()>& fn, ErrorKind expected) {
  try {
    fn();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), expected) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ZeusMonitor, WindowEnergyEqualsTheModelledIntegral) {
  SimulatedRig rig(2, "a100");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  rig.clock->advance_s(3.0);
  monitor.begin_window("train");
  rig.gpus[0]->set_utilization(1.0);  // 400 W
  rig.gpus[1]->set_utilization(0.5);  // 227.5 W
  rig.clock->advance_s(10.0);
  rig.gpus[0]->set_power_limit_mw(200'000);
  rig.clock->advance_s(5.123);
  const Measurement result = monitor.end_window("train");
  EXPECT_DOUBLE_EQ(result.time_s, 15.123);
  const double expected0 = 400.0 * 10.0 + 200.0 * 5.123;
  const double expected1 = 227.5 * 15.123;
  EXPECT_NEAR(result.gpu_energy_j.at(0), expected0, expected0 * 1e-3);
  EXPECT_NEAR(result.gpu_energy_j.at(1), expected1, expected1 * 1e-3);
  EXPECT_NEAR(result.total_energy_j(), expected0 + expected1, 1e-3 * (expected0 + expected1));
  EXPECT_TRUE(result.cpu_energy_j.empty());
  EXPECT_TRUE(result.dram_energy_j.empty());
}

TEST(ZeusMonitor, NestedAndOverlappingWindows) {
  SimulatedRig rig(1, "v100");  // idle 25 W
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  monitor.begin_window("outer");
  rig.clock->advance_s(1.0);
  monitor.begin_window("inner");
  rig.clock->advance_s(2.0);
  monitor.begin_window("overlap");
  rig.clock->advance_s(3.0);
  const Measurement inner = monitor.end_window("inner");
  rig.clock->advance_s(4.0);
  const Measurement outer = monitor.end_window("outer");
  rig.clock->advance_s(5.0);
  const Measurement overlap = monitor.end_window("overlap");
  EXPECT_DOUBLE_EQ(inner.time_s, 5.0);
  EXPECT_DOUBLE_EQ(outer.time_s, 10.0);
  EXPECT_DOUBLE_EQ(overlap.time_s, 12.0);
  EXPECT_DOUBLE_EQ(inner.gpu_energy_j.at(0), 125.0);
  EXPECT_DOUBLE_EQ(outer.gpu_energy_j.at(0), 250.0);
  EXPECT_DOUBLE_EQ(overlap.gpu_energy_j.at(0), 300.0);
  EXPECT_TRUE(monitor.open_windows().empty());
}

TEST(ZeusMonitor, DuplicateBeginNeedsRestart) {
  SimulatedRig rig(1, "v100");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  monitor.begin_window("step");
  rig.clock->advance_s(2.0);
  const std::string message =
      error_message([&] { monitor.begin_window("step"); }, ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("'step' is already open"), std::string::npos);
  monitor.begin_window("step", {.restart = true});
  rig.clock->advance_s(1.0);
  EXPECT_DOUBLE_EQ(monitor.end_window("step").time_s, 1.0);
}

TEST(ZeusMonitor, UnknownWindowListsTheOpenOnes) {
  SimulatedRig rig(1, "v100");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  monitor.begin_window("b");
  monitor.begin_window("a");
  const std::string message =
      error_message([&] { monitor.end_window("c"); }, ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("no open window named 'c' (open windows: 'a', 'b')"), std::string::npos);
}

TEST(ZeusMonitor, CancelReturnsZerosAndClosesTheWindow) {
  SimulatedRig rig(2, "v100");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  monitor.begin_window("w");
  rig.clock->advance_s(1.0);
  const Measurement result = monitor.end_window("w", {.cancel = true});
  EXPECT_EQ(result.time_s, 0.0);
  EXPECT_EQ(result.gpu_energy_j.size(), 2u);
  EXPECT_EQ(result.gpu_energy_j.at(1), 0.0);
  EXPECT_THROW(monitor.end_window("w"), zeus::Error);
}

TEST(ZeusMonitor, ResetWindowsDropsEverything) {
  SimulatedRig rig(1, "v100");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  monitor.begin_window("a");
  monitor.begin_window("b");
  monitor.reset_windows();
  EXPECT_TRUE(monitor.open_windows().empty());
  monitor.begin_window("a");  // no duplicate error
}

TEST(ZeusMonitor, SyncHookRunsBeforeReadsWhenAsked) {
  SimulatedRig rig(3, "v100");
  ZeusMonitorOptions options = manual(rig);
  options.gpu_indices = std::vector<int>{2, 0};
  std::vector<std::vector<int>> calls;
  options.sync = [&](const std::vector<int>& indices) { calls.push_back(indices); };
  ZeusMonitor monitor(rig.set, {}, options);
  monitor.begin_window("a");
  monitor.end_window("a");
  monitor.begin_window("b", {.sync_execution = false});
  monitor.end_window("b", {.sync_execution = false});
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], (std::vector<int>{2, 0}));
  EXPECT_EQ(monitor.gpu_indices(), (std::vector<int>{2, 0}));
}

TEST(ZeusMonitor, InvalidGpuIndexListsTheValidOnes) {
  SimulatedRig rig(2, "v100");
  ZeusMonitorOptions options = manual(rig);
  options.gpu_indices = std::vector<int>{0, 5};
  const std::string message =
      error_message([&] { ZeusMonitor(rig.set, {}, options); }, ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("valid indices are 0..1"), std::string::npos);
  options.gpu_indices = std::vector<int>{1, 1};
  error_message([&] { ZeusMonitor(rig.set, {}, options); }, ErrorKind::kInvalidArgument);
}

TEST(ZeusMonitor, CounterlessGpuIntegratesTheHeldPowerExactly) {
  SimulatedRig rig(1, "p100");  // idle 26 W, no energy counter
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  ASSERT_NE(monitor.sampler(), nullptr);
  monitor.begin_window("w");  // t = 0
  rig.clock->advance_s(1.0);
  rig.gpus[0]->set_utilization(1.0);  // 250 W from t = 1
  monitor.sampler()->sample_once();
  rig.clock->advance_s(2.0);
  const Measurement result = monitor.end_window("w");
  EXPECT_NEAR(result.gpu_energy_j.at(0), 26.0 * 1.0 + 250.0 * 2.0, 1e-9);
}

TEST(ZeusMonitor, ConstantPowerWithoutSamplesInTheWindowIsNotZero) {
  // The reference's deduplicated trapezoid returns 0 J here; the held signal does not.
  SimulatedRig rig(1, "p100");
  rig.gpus[0]->set_utilization(1.0);
  ZeusMonitor monitor(rig.set, {}, manual(rig));  // samples 250 W at t = 0
  rig.clock->advance_s(10.0);
  monitor.begin_window("w");
  rig.clock->advance_s(2.0);
  EXPECT_NEAR(monitor.end_window("w").gpu_energy_j.at(0), 500.0, 1e-9);
}

TEST(ZeusMonitor, ApproxInstantEnergyFillsWindowsShorterThanTheCounterStep) {
  SimulatedRig rig(1, "a100");  // idle 55 W: 1 µs is 0.055 mJ, below the counter's 1 mJ step
  ZeusMonitorOptions options = manual(rig);
  ZeusMonitor plain(rig.set, {}, options);
  options.approx_instant_energy = true;
  ZeusMonitor approx(rig.set, {}, options);
  rig.clock->advance_s(0.5);  // leave the counter mid-millijoule
  plain.begin_window("w");
  approx.begin_window("w");
  rig.clock->advance_ns(1000);
  EXPECT_EQ(plain.end_window("w").gpu_energy_j.at(0), 0.0);
  EXPECT_NEAR(approx.end_window("w").gpu_energy_j.at(0), 55.0 * 1e-6, 1e-12);
}

// A Grace superchip's GPU energy is module energy: each Measurement says so, and the monitor
// warns once that CPU figures of the same window are already part of it.
TEST(ZeusMonitor, ModuleScopeGpuEnergyIsLabelledAndWarnedAboutOnce) {
  TempDir dir;
  zeus::testing::make_powercap_tree(dir.path(), 1, true);
  const zeus::device::CpuDiscovery cpus = zeus::device::discover_rapl_cpus(dir.path());
  ASSERT_TRUE(cpus.available) << cpus.message;
  SimulatedRig rig(1, "h200");
  zeus::device::SimulatedGpuModel module_model = zeus::device::simulated_gpu_model("h200");
  module_model.scope = zeus::device::MeasuredScope::kModule;
  const auto module_gpu = std::make_shared<zeus::device::SimulatedGpu>(module_model, 1, rig.clock);
  const zeus::device::Gpus gpus({rig.gpus[0], module_gpu}, {0, 1});
  zeus::testing::LogCapture log;
  ZeusMonitor monitor(gpus, cpus.cpus, manual(rig));
  const std::string warning = "measure their whole module";
  EXPECT_EQ(log.count(warning), 1) << log.text();
  EXPECT_EQ(monitor.gpu_energy_scopes(),
            (zeus::monitor::GpuEnergyScopes{{0, zeus::device::MeasuredScope::kGpu},
                                            {1, zeus::device::MeasuredScope::kModule}}));
  for (int i = 0; i < 2; ++i) {
    monitor.begin_window("w");
    rig.clock->advance_s(1.0);
    const Measurement result = monitor.end_window("w");
    EXPECT_EQ(result.gpu_energy_scope(0), zeus::device::MeasuredScope::kGpu);
    EXPECT_EQ(result.gpu_energy_scope(1), zeus::device::MeasuredScope::kModule);
    EXPECT_EQ(result.gpu_energy_scope(7), zeus::device::MeasuredScope::kUnknown);
    EXPECT_TRUE(result.gpu_energy_includes_cpu());
    // total_energy stays the GPUs' sum, as the reference's.
    EXPECT_DOUBLE_EQ(result.total_energy_j(), result.gpu_energy_j.sum());
  }
  EXPECT_EQ(log.count(warning), 1);

  // Only the discrete GPU: nothing to warn about; without CPUs, nothing to warn about either.
  ZeusMonitorOptions discrete = manual(rig);
  discrete.gpu_indices = std::vector<int>{0};
  ZeusMonitor plain(gpus, cpus.cpus, discrete);
  plain.begin_window("w");
  EXPECT_FALSE(plain.end_window("w").gpu_energy_includes_cpu());
  ZeusMonitorOptions no_cpus = manual(rig);
  no_cpus.cpu_indices = std::vector<int>{};
  ZeusMonitor module_only(gpus, cpus.cpus, no_cpus);
  EXPECT_EQ(log.count(warning), 1);
  // A measurement made by hand knows no scope.
  EXPECT_FALSE(Measurement{}.gpu_energy_includes_cpu());
}

TEST(ZeusMonitor, CpuPackagesAndDramFromRapl) {
  TempDir dir;
  zeus::testing::make_powercap_tree(dir.path(), 2, true);
  const zeus::device::CpuDiscovery cpus = zeus::device::discover_rapl_cpus(dir.path());
  ASSERT_TRUE(cpus.available) << cpus.message;
  SimulatedRig rig(1, "v100");
  ZeusMonitor monitor(rig.set, cpus.cpus, manual(rig));
  EXPECT_EQ(monitor.cpu_indices(), (std::vector<int>{0, 1}));
  monitor.begin_window("w");
  zeus::testing::write_file(dir.path() / "intel-rapl:0" / "energy_uj", "31000000");  // +30 J
  zeus::testing::write_file(dir.path() / "intel-rapl:1" / "energy_uj", "6000000");   // +5 J
  zeus::testing::write_file(dir.path() / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj",
                            "2500000");  // +2 J
  rig.clock->advance_s(1.0);
  const Measurement result = monitor.end_window("w");
  EXPECT_DOUBLE_EQ(result.cpu_energy_j.at(0), 30.0);
  EXPECT_DOUBLE_EQ(result.cpu_energy_j.at(1), 5.0);
  EXPECT_DOUBLE_EQ(result.dram_energy_j.at(0), 2.0);
  EXPECT_DOUBLE_EQ(result.dram_energy_j.at(1), 0.0);

  ZeusMonitorOptions only_one = manual(rig);
  only_one.cpu_indices = std::vector<int>{1};
  ZeusMonitor second(rig.set, cpus.cpus, only_one);
  EXPECT_EQ(second.cpu_indices(), (std::vector<int>{1}));
  only_one.cpu_indices = std::vector<int>{4};
  const std::string message = error_message([&] { ZeusMonitor(rig.set, cpus.cpus, only_one); },
                                            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("available packages are 0, 1"), std::string::npos);
}

TEST(ZeusMonitor, DeviceLostMidWindowIsNamedAndTheWindowCloses) {
  SimulatedRig rig(2, "v100");
  auto flaky = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[1]);
  zeus::device::Gpus gpus({rig.gpus[0], flaky}, {0, 1});
  ZeusMonitor monitor(gpus, {}, manual(rig));
  monitor.begin_window("w");
  flaky->fail_after(flaky->calls());
  const std::string message = error_message([&] { monitor.end_window("w"); }, ErrorKind::kGpuLost);
  EXPECT_NE(message.find("GPU 1"), std::string::npos);
  EXPECT_NE(message.find("window 'w'"), std::string::npos);
  EXPECT_TRUE(monitor.open_windows().empty());
  EXPECT_THROW(monitor.begin_window("x"), zeus::Error);  // still lost
}

TEST(ZeusMonitor, SamplerErrorsSurfaceAtEndWindow) {
  SimulatedRig rig(1, "p100");
  auto flaky = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  zeus::device::Gpus gpus({flaky}, {0});
  ZeusMonitor monitor(gpus, {}, manual(rig));
  monitor.begin_window("w");
  flaky->fail_after(flaky->calls());
  monitor.sampler()->sample_once();  // the sampler thread would do this
  const std::string message = error_message([&] { monitor.end_window("w"); }, ErrorKind::kGpuLost);
  EXPECT_NE(message.find("power sampler"), std::string::npos);
}

TEST(ZeusMonitor, LogRoundTripsThroughTheReplayMonitor) {
  TempDir dir;
  const auto log_file = dir.path() / "nested" / "log.csv";
  SimulatedRig rig(2, "h100");
  ZeusMonitorOptions options = manual(rig);
  options.log_file = log_file;
  std::vector<std::pair<std::string, Measurement>> recorded;
  {
    ZeusMonitor monitor(rig.set, {}, options);
    for (int i = 0; i < 3; ++i) {
      const std::string name = "__PowerLimit_" + std::to_string(700 - 100 * i);
      monitor.begin_window(name);
      rig.gpus[0]->set_utilization(0.3 * i);
      rig.clock->advance_s(1.5 + i);
      recorded.emplace_back(name, monitor.end_window(name));
    }
    monitor.begin_window("cancelled");
    monitor.end_window("cancelled", {.cancel = true});
    EXPECT_THROW(monitor.begin_window("a,b"), zeus::Error);
  }
  zeus::monitor::ReplayMonitor replay(log_file);
  EXPECT_EQ(replay.gpu_indices(), (std::vector<int>{0, 1}));
  ASSERT_EQ(replay.rows_left(), 3u);
  for (const auto& [name, measurement] : recorded) {
    replay.begin_window(name);
    const Measurement replayed = replay.end_window(name);
    EXPECT_EQ(replayed.time_s, measurement.time_s);
    EXPECT_EQ(replayed.gpu_energy_j, measurement.gpu_energy_j);
  }
}

TEST(ZeusMonitor, BeginAndEndAllocateNothingAfterWarmUpBeyondTheResult) {
  SimulatedRig rig(8, "h200");
  ZeusMonitor monitor(rig.set, {}, manual(rig));
  for (int i = 0; i < 3; ++i) {  // warm up: window storage and hash buckets
    monitor.begin_window("step");
    monitor.begin_window("iteration");
    monitor.end_window("iteration");
    monitor.end_window("step");
  }
  g_allocations = 0;
  g_counting = true;
  monitor.begin_window("step");
  const long begin_allocations = g_allocations;
  const Measurement result = monitor.end_window("step");
  g_counting = false;
  EXPECT_EQ(begin_allocations, 0);
  EXPECT_LE(g_allocations, 1);  // the result's GPU energy vector
  EXPECT_EQ(result.gpu_energy_j.size(), 8u);
}

}  // namespace
