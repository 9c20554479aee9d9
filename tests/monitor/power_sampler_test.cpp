#include "zeus/monitor/power_sampler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/fault_injecting_gpu.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::ErrorKind;
using zeus::monitor::PowerDomain;
using zeus::monitor::PowerSampler;
using zeus::monitor::PowerSamplerOptions;
using zeus::testing::SimulatedRig;

PowerSamplerOptions manual(const SimulatedRig& rig) {
  PowerSamplerOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  options.period_s = 0.01;
  return options;
}

constexpr std::int64_t kSecondNs = 1'000'000'000;

TEST(PowerSampler, TimelinePowerAndHeldEnergy) {
  SimulatedRig rig(2, "a100");  // idle 55 W, full 400 W
  PowerSampler sampler(rig.set, manual(rig));
  sampler.sample_once();  // t = 0: 55 W
  rig.clock->advance_s(1.0);
  rig.gpus[1]->set_utilization(1.0);
  sampler.sample_once();  // t = 1: 400 W on GPU 1
  rig.clock->advance_s(1.0);
  sampler.sample_once();  // t = 2

  const auto timeline = sampler.timeline(PowerDomain::kDeviceInstant, 1);
  ASSERT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline[1].time_ns, kSecondNs);
  EXPECT_DOUBLE_EQ(timeline[1].power_w, 400.0);
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 1, kSecondNs, kSecondNs).size(), 1u);

  EXPECT_DOUBLE_EQ(*sampler.power_w(PowerDomain::kDeviceInstant, 1), 400.0);
  EXPECT_DOUBLE_EQ(*sampler.power_w(PowerDomain::kDeviceInstant, 1, kSecondNs / 2), 55.0);
  EXPECT_FALSE(sampler.power_w(PowerDomain::kDeviceInstant, 1, -1).has_value());

  // [0.5 s, 1.5 s]: 0.5 s at 55 W then 0.5 s at 400 W, edges included exactly.
  EXPECT_DOUBLE_EQ(
      *sampler.energy_j(PowerDomain::kDeviceInstant, 1, kSecondNs / 2, 3 * kSecondNs / 2),
      0.5 * 55.0 + 0.5 * 400.0);
  // The held value extends past the last sample.
  EXPECT_DOUBLE_EQ(*sampler.cumulative_energy_j(PowerDomain::kDeviceInstant, 1, 3 * kSecondNs),
                   55.0 + 400.0 * 2.0);
  EXPECT_DOUBLE_EQ(*sampler.energy_j(PowerDomain::kDeviceInstant, 0, 0, 2 * kSecondNs), 110.0);
}

TEST(PowerSampler, SeveralDomains) {
  SimulatedRig rig(1, "h100");
  PowerSamplerOptions options = manual(rig);
  options.domains = {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage,
                     PowerDomain::kMemoryAverage, PowerDomain::kDeviceInstant};
  PowerSampler sampler(rig.set, options);
  EXPECT_EQ(sampler.domains().size(), 3u);
  sampler.sample_once();
  EXPECT_TRUE(sampler.power_w(PowerDomain::kMemoryAverage, 0).has_value());
  EXPECT_DOUBLE_EQ(*sampler.power_w(PowerDomain::kDeviceAverage, 0), 70.0);
}

TEST(PowerSampler, UnsupportedDomainIsAClearError) {
  SimulatedRig rig(1, "h100");
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  gpu->set_hook([](std::string_view method) {
    if (method == "average_memory_power_mw") {
      throw zeus::Error(ErrorKind::kNotSupported, "no memory power here");
    }
  });
  zeus::device::Gpus gpus({gpu}, {0});
  PowerSamplerOptions options = manual(rig);
  options.domains = {PowerDomain::kMemoryAverage};
  try {
    PowerSampler sampler(gpus, options);
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kNotSupported);
    EXPECT_NE(std::string(error.what()).find("memory_average"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("GPU 0"), std::string::npos);
  }
}

TEST(PowerSampler, BadOptionsAreRejected) {
  SimulatedRig rig(1, "v100");
  PowerSamplerOptions options = manual(rig);
  options.period_s = 0.0005;
  EXPECT_THROW(PowerSampler(rig.set, options), zeus::Error);
  options.period_s = 0.001;
  EXPECT_NO_THROW(PowerSampler(rig.set, options));
  options.domains.clear();
  EXPECT_THROW(PowerSampler(rig.set, options), zeus::Error);
  options = manual(rig);
  options.gpu_indices = {3};
  EXPECT_THROW(PowerSampler(rig.set, options), zeus::Error);
  EXPECT_THROW(zeus::monitor::parse_power_domain("bogus"), zeus::Error);
  EXPECT_EQ(zeus::monitor::parse_power_domain("memory"), PowerDomain::kMemoryAverage);
}

TEST(PowerSampler, OverflowDropsOldestWithoutChangingEnergy) {
  SimulatedRig rig(1, "v100");
  PowerSamplerOptions options = manual(rig);
  options.max_samples_per_series = 4;
  options.overflow = zeus::monitor::OverflowPolicy::kDropOldest;  // the default compacts
  PowerSampler sampler(rig.set, options);
  for (int i = 0; i < 10; ++i) {
    sampler.sample_once();
    rig.clock->advance_s(1.0);
  }
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 0).size(), 4u);
  EXPECT_EQ(sampler.dropped_samples(), 6u);
  EXPECT_DOUBLE_EQ(*sampler.cumulative_energy_j(PowerDomain::kDeviceInstant, 0, 9 * kSecondNs),
                   25.0 * 9);
  // An interval reaching back before the kept timeline cannot be answered from it.
  EXPECT_FALSE(sampler.energy_j(PowerDomain::kDeviceInstant, 0, 0, 9 * kSecondNs).has_value());
  EXPECT_NO_THROW(sampler.rethrow_if_failed());
}

TEST(PowerSampler, OverflowWithTheErrorPolicySurfaces) {
  SimulatedRig rig(1, "v100");
  PowerSamplerOptions options = manual(rig);
  options.max_samples_per_series = 2;
  options.overflow = zeus::monitor::OverflowPolicy::kError;
  PowerSampler sampler(rig.set, options);
  sampler.sample_once();
  sampler.sample_once();
  EXPECT_NO_THROW(sampler.rethrow_if_failed());
  sampler.sample_once();
  try {
    sampler.rethrow_if_failed();
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kMemory);
    EXPECT_NE(std::string(error.what()).find("full at 2 samples"), std::string::npos);
  }
}

TEST(PowerSampler, DeviceErrorsAreRethrownInTheCaller) {
  SimulatedRig rig(1, "v100");
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  zeus::device::Gpus gpus({gpu}, {0});
  PowerSampler sampler(gpus, manual(rig));
  sampler.sample_once();
  gpu->fail_after(gpu->calls());
  sampler.sample_once();
  EXPECT_THROW(sampler.rethrow_if_failed(), zeus::Error);
  EXPECT_THROW(sampler.rethrow_if_failed(), zeus::Error);  // sticky: readings are now stale
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 0).size(), 1u);
}

TEST(PowerSampler, CountAndHoldKeepsSamplingThroughFailedReads) {
  SimulatedRig rig(2, "v100");
  auto flaky = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[1]);
  zeus::device::Gpus gpus({rig.gpus[0], flaky}, {0, 1});
  PowerSamplerOptions options = manual(rig);
  options.temperature = true;
  options.read_errors = zeus::monitor::ReadErrorPolicy::kCountAndHold;
  PowerSampler sampler(gpus, options);
  sampler.sample_once();
  const double held_w = *sampler.power_w(PowerDomain::kDeviceInstant, 1);
  bool failing = true;
  flaky->set_hook([&](std::string_view) {
    if (failing) {
      throw zeus::Error(ErrorKind::kUnknown, "a bad second");
    }
  });
  rig.gpus[1]->set_utilization(1.0);  // unseen while its reads fail
  for (int sweep = 0; sweep < 3; ++sweep) {
    rig.clock->advance_s(1.0);
    sampler.sample_once();
  }
  EXPECT_NO_THROW(sampler.rethrow_if_failed());
  EXPECT_EQ(sampler.failed_sweeps(1), 3u);  // one per sweep, however many reads failed in it
  EXPECT_EQ(sampler.failed_sweeps(0), 0u);
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 0).size(), 4u);
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 1).size(), 1u);
  // The held value goes on: its energy grows at the last power seen.
  EXPECT_DOUBLE_EQ(
      *sampler.cumulative_energy_j(PowerDomain::kDeviceInstant, 1, rig.clock->now_ns()),
      held_w * 3.0);
  failing = false;
  rig.clock->advance_s(1.0);
  sampler.sample_once();
  EXPECT_GT(*sampler.power_w(PowerDomain::kDeviceInstant, 1), held_w);
  EXPECT_EQ(sampler.failed_sweeps(1), 3u);
  EXPECT_THROW(sampler.failed_sweeps(7), zeus::Error);
}

TEST(PowerSampler, CountAndHoldStillRefusesWhatTheGpuCannotDo) {
  SimulatedRig rig(1, "v100");
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  zeus::device::Gpus gpus({gpu}, {0});
  PowerSamplerOptions options = manual(rig);
  options.read_errors = zeus::monitor::ReadErrorPolicy::kCountAndHold;
  gpu->fail_after(0, ErrorKind::kUnknown);  // a transient failure at start: sampled anyway
  EXPECT_NO_THROW(PowerSampler(gpus, options));
  gpu->fail_after(0, ErrorKind::kNotSupported);
  EXPECT_THROW(PowerSampler(gpus, options), zeus::Error);
}

TEST(PowerDomainProbe, NotSupportedIsNoAndOtherFailuresPropagate) {
  SimulatedRig rig(1, "v100");
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  EXPECT_TRUE(zeus::monitor::supports_power_domain(*gpu, PowerDomain::kDeviceInstant));
  EXPECT_TRUE(zeus::monitor::supports_temperature(*gpu));
  gpu->fail_after(gpu->calls(), ErrorKind::kNotSupported);
  EXPECT_FALSE(zeus::monitor::supports_power_domain(*gpu, PowerDomain::kMemoryAverage));
  EXPECT_FALSE(zeus::monitor::supports_temperature(*gpu));
  gpu->fail_after(gpu->calls(), ErrorKind::kGpuLost);
  EXPECT_THROW(zeus::monitor::supports_power_domain(*gpu, PowerDomain::kDeviceInstant),
               zeus::Error);
}

TEST(PowerSampler, OnSweepStreamsEachSweep) {
  SimulatedRig rig(3, "v100");
  PowerSamplerOptions options = manual(rig);
  std::vector<std::size_t> sizes;
  options.on_sweep = [&](const std::vector<zeus::monitor::PowerSample>& sweep) {
    sizes.push_back(sweep.size());
  };
  PowerSampler sampler(rig.set, options);
  sampler.sample_once();
  sampler.sample_once();
  EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 3}));
}

TEST(PowerSampler, InfersThePeriodFromReadingChanges) {
  SimulatedRig rig(1, "v100");
  // Constant power: never changes, so the default 100 ms.
  EXPECT_DOUBLE_EQ(zeus::monitor::infer_power_update_period_s(
                       *rig.gpus[0], PowerDomain::kDeviceInstant, *rig.clock),
                   0.1);
  // A reading that changes every 20 ms of clock time: half of it.
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  int reads = 0;
  gpu->set_hook([&](std::string_view) {
    rig.clock->advance_ns(1'000'000);  // each read takes 1 ms
    if (++reads % 20 == 0) {
      rig.gpus[0]->set_utilization(reads % 40 == 0 ? 0.0 : 1.0);
    }
  });
  EXPECT_NEAR(
      zeus::monitor::infer_power_update_period_s(*gpu, PowerDomain::kDeviceInstant, *rig.clock),
      0.010, 1e-9);
}

// The one test with a real thread and real time (label: unit; it takes about 60 ms).
TEST(PowerSamplerThread, SamplesInTheBackgroundAndStopsPromptly) {
  SimulatedRig rig(2, "v100");
  PowerSamplerOptions options;
  options.period_s = 0.005;
  PowerSampler sampler(rig.set, options);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto start = std::chrono::steady_clock::now();
  sampler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_GE(sampler.timeline(PowerDomain::kDeviceInstant, 1).size(), 3u);
  sampler.stop();  // idempotent
}

}  // namespace
