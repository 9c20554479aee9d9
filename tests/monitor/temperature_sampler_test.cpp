// The power sampler's temperature channel (what TemperatureMonitor and `zeus monitor
// --timeline` read): only changes are kept, lookups hold the last change, memory is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <thread>

#include "support/fault_injecting_gpu.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace {

using zeus::ErrorKind;
using zeus::monitor::OverflowPolicy;
using zeus::monitor::PowerDomain;
using zeus::monitor::PowerSampler;
using zeus::monitor::PowerSamplerOptions;
using zeus::monitor::TemperatureSample;
using zeus::testing::SimulatedRig;

constexpr std::int64_t kSecondNs = 1'000'000'000;

PowerSamplerOptions temperature_only(const SimulatedRig& rig) {
  PowerSamplerOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  options.domains.clear();
  options.temperature = true;
  return options;
}

TEST(TemperatureSampler, KeepsOnlyChangesAndHoldsTheLastOne) {
  SimulatedRig rig(2, "a100");
  PowerSampler sampler(rig.set, temperature_only(rig));
  EXPECT_DOUBLE_EQ(sampler.period_s(), zeus::monitor::kDefaultTemperaturePeriodS);
  EXPECT_TRUE(sampler.samples_temperature());
  EXPECT_FALSE(sampler.temperature_c(0).has_value());  // nothing read yet

  sampler.sample_once();  // t = 0: idle
  rig.clock->advance_s(1.0);
  sampler.sample_once();  // t = 1: the same temperature, not kept again
  rig.clock->advance_s(1.0);
  rig.gpus[1]->set_utilization(1.0);
  sampler.sample_once();  // t = 2: GPU 1 is hotter
  rig.clock->advance_s(1.0);
  sampler.sample_once();  // t = 3: unchanged

  const std::vector<TemperatureSample> idle = sampler.temperature_timeline(0);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].time_ns, 0);
  EXPECT_EQ(idle[0].gpu_index, 0);

  const std::vector<TemperatureSample> busy = sampler.temperature_timeline(1);
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_EQ(busy[1].time_ns, 2 * kSecondNs);
  EXPECT_GT(busy[1].temperature_c, busy[0].temperature_c);
  EXPECT_EQ(busy[1].temperature_c, rig.gpus[1]->temperature_c());

  EXPECT_EQ(sampler.temperature_c(1), busy[1].temperature_c);                 // latest
  EXPECT_EQ(sampler.temperature_c(1, kSecondNs), busy[0].temperature_c);      // held
  EXPECT_EQ(sampler.temperature_c(1, 5 * kSecondNs), busy[1].temperature_c);  // held on
  EXPECT_FALSE(sampler.temperature_c(1, -1).has_value());                     // before any
  EXPECT_EQ(sampler.temperature_timeline(1, kSecondNs, 2 * kSecondNs).size(), 1u);
  EXPECT_TRUE(sampler.temperature_timeline(1, 3 * kSecondNs).empty());
}

TEST(TemperatureSampler, RidesAlongThePowerSweepAndStreamsChanges) {
  SimulatedRig rig(2, "v100");
  PowerSamplerOptions options = temperature_only(rig);
  options.domains = {PowerDomain::kDeviceInstant};
  options.period_s = 0.01;
  std::vector<std::vector<TemperatureSample>> changes;
  int power_sweeps = 0;
  options.on_sweep = [&](const auto&) { ++power_sweeps; };
  options.on_temperature_change = [&](const std::vector<TemperatureSample>& sweep) {
    changes.push_back(sweep);
  };
  PowerSampler sampler(rig.set, options);
  sampler.sample_once();
  rig.clock->advance_s(0.01);
  sampler.sample_once();  // nothing changed: no temperature callback
  rig.gpus[0]->set_utilization(1.0);
  rig.clock->advance_s(0.01);
  sampler.sample_once();
  EXPECT_EQ(power_sweeps, 3);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].size(), 2u);  // the first readings of both GPUs
  ASSERT_EQ(changes[1].size(), 1u);  // only GPU 0 changed
  EXPECT_EQ(changes[1][0].gpu_index, 0);
  EXPECT_EQ(sampler.timeline(PowerDomain::kDeviceInstant, 0).size(), 3u);
}

TEST(TemperatureSampler, MemoryIsBounded) {
  SimulatedRig rig(1, "a100");
  PowerSamplerOptions options = temperature_only(rig);
  options.max_samples_per_series = 2;
  options.overflow = OverflowPolicy::kDropOldest;  // the default compacts (long_timeline_test)
  PowerSampler sampler(rig.set, options);
  for (const double utilization : {0.0, 0.5, 1.0, 0.25}) {
    rig.gpus[0]->set_utilization(utilization);
    sampler.sample_once();
    rig.clock->advance_s(1.0);
  }
  const auto kept = sampler.temperature_timeline(0);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.back().time_ns, 3 * kSecondNs);
  EXPECT_EQ(sampler.dropped_samples(), 2u);

  options.overflow = OverflowPolicy::kError;
  PowerSampler strict(rig.set, options);
  for (const double utilization : {0.0, 0.5, 1.0}) {
    rig.gpus[0]->set_utilization(utilization);
    strict.sample_once();
  }
  try {
    strict.rethrow_if_failed();
    FAIL() << "no overflow error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kMemory);
    EXPECT_NE(std::string(error.what()).find("temperature timeline of GPU 0 is full at 2"),
              std::string::npos)
        << error.what();
  }
}

TEST(TemperatureSampler, ErrorsNameWhatIsWrong) {
  SimulatedRig rig(1, "a100");
  PowerSamplerOptions neither = temperature_only(rig);
  neither.temperature = false;
  EXPECT_THROW(PowerSampler(rig.set, neither), zeus::Error);

  PowerSamplerOptions power_only = temperature_only(rig);
  power_only.temperature = false;
  power_only.domains = {PowerDomain::kDeviceInstant};
  power_only.period_s = 0.01;
  PowerSampler without(rig.set, power_only);
  EXPECT_FALSE(without.samples_temperature());
  try {
    (void)without.temperature_timeline(0);
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("does not sample the temperature of GPU 0"),
              std::string::npos);
  }
  PowerSampler with(rig.set, temperature_only(rig));
  EXPECT_THROW((void)with.temperature_c(7), zeus::Error);
  // Periods beyond a day (and infinity) would overflow the clock arithmetic: refused.
  for (const double period_s : {86400.5, 1e12, std::numeric_limits<double>::infinity()}) {
    PowerSamplerOptions too_long = temperature_only(rig);
    too_long.period_s = period_s;
    try {
      PowerSampler sampler(rig.set, too_long);
      FAIL() << period_s;
    } catch (const zeus::Error& error) {
      EXPECT_NE(std::string(error.what()).find("above the maximum of 86400 s"), std::string::npos)
          << error.what();
    }
  }
}

TEST(TemperatureSampler, AGpuThatStopsAnsweringIsASurfacedError) {
  SimulatedRig rig(1, "v100");
  auto gpu = std::make_shared<zeus::device::FaultInjectingGpu>(rig.gpus[0]);
  zeus::device::Gpus gpus({gpu}, {0});
  PowerSampler sampler(gpus, temperature_only(rig));
  sampler.sample_once();
  gpu->fail_after(gpu->calls());
  sampler.sample_once();
  try {
    sampler.rethrow_if_failed();
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("reading the temperature of GPU 0 failed"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(sampler.temperature_timeline(0).size(), 1u);  // what was read before stays
}

TEST(TemperatureSamplerThread, SamplesInTheBackgroundAndStopsPromptly) {
  SimulatedRig rig(1, "a100");
  PowerSamplerOptions options;
  options.domains.clear();
  options.temperature = true;
  options.period_s = 0.005;
  PowerSampler sampler(rig.set, options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!sampler.temperature_c(0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(sampler.temperature_c(0).has_value());
  const auto before_stop = std::chrono::steady_clock::now();
  sampler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before_stop, std::chrono::seconds(1));
}

}  // namespace
