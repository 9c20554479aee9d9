// The sensor probe's estimators against traces whose sensor is known: a draw we define, read
// through a model of a counter that refreshes every 100 ms and of a power reading that averages
// 25 ms of every 100 ms (what a real H200 showed, docs/monitor.md).
#include "zeus/device/sensor_probe.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <random>

#include "zeus/common/error.hpp"
#include "zeus/device/forwarding_gpu.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::device {
namespace {

constexpr double kIdleW = 100.0;
constexpr double kBusyW = 700.0;

// A draw of idle power with bursts of busy power.
struct Draw {
  std::vector<LoadSpan> bursts;
  double watts(double t) const {
    const auto after =
        std::upper_bound(bursts.begin(), bursts.end(), t,
                         [](double at, const LoadSpan& b) { return at < b.start_s; });
    return after != bursts.begin() && t < std::prev(after)->end_s ? kBusyW : kIdleW;
  }
  // Exact energy over [a, b] in joules (1 ms steps are exact: bursts start and end on them).
  double energy_j(double a, double b) const {
    double energy = 0.0;
    for (double t = a; t < b - 1e-12; t += 1e-4) {
      energy += watts(t + 5e-5) * 1e-4;
    }
    return energy;
  }
};

Draw random_bursts(int count, double length_s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gap(0.35, 0.6);
  Draw draw;
  double t = 1.0;
  for (int i = 0; i < count; ++i) {
    t += gap(rng);
    t = std::round(t * 1e4) / 1e4;
    draw.bursts.push_back({"burst", t, t + length_s, 0.0});
    t += length_s;
  }
  return draw;
}

// Polls every millisecond: a counter updated every `refresh_s` with the energy up to the update,
// and a power reading updated every `period_s` with the mean draw of the `window_s` before it.
struct Traces {
  std::vector<TimedValue> energy_mj, power_mw;
};
Traces read_through_sensor(const Draw& draw, double end_s, double refresh_s, double period_s,
                           double window_s) {
  Traces traces;
  double counter_mj = 0.0, counted_to_s = 0.0, reading_mw = kIdleW * 1e3;
  double next_refresh_s = refresh_s, next_sample_s = period_s;
  for (double t = 0.0; t < end_s; t += 1e-3) {
    if (t >= next_refresh_s) {
      counter_mj += draw.energy_j(counted_to_s, next_refresh_s) * 1e3;
      counted_to_s = next_refresh_s;
      next_refresh_s += refresh_s;
    }
    if (t >= next_sample_s) {
      reading_mw = draw.energy_j(next_sample_s - window_s, next_sample_s) / window_s * 1e3;
      next_sample_s += period_s;
    }
    traces.energy_mj.push_back({t, std::floor(counter_mj)});
    traces.power_mw.push_back({t, std::round(reading_mw)});
  }
  return traces;
}

TEST(SensorProbe, UpdateStatsFindsThePeriodAndTheStep) {
  const Draw draw = random_bursts(0, 0.02, 1);
  const Traces traces = read_through_sensor(draw, 3.0, 0.1, 0.1, 0.025);
  const UpdateStats stats = update_stats(traces.energy_mj);
  ASSERT_TRUE(stats.period_s.has_value());
  EXPECT_NEAR(*stats.period_s, 0.1, 0.0015);
  EXPECT_NEAR(stats.smallest_step.value(), kIdleW * 0.1 * 1e3, 1.0);
  EXPECT_FALSE(stats.changed_every_poll);
  EXPECT_EQ(stats.samples, traces.energy_mj.size());
}

TEST(SensorProbe, TooFewChangesGiveNoPeriod) {
  const std::vector<TimedValue> trace = {{0.0, 1.0}, {0.1, 1.0}, {0.2, 2.0}, {0.3, 3.0}};
  const UpdateStats stats = update_stats(trace);
  EXPECT_EQ(stats.changes, 2u);
  EXPECT_FALSE(stats.period_s.has_value());
  EXPECT_FALSE(update_stats({}).period_s.has_value());
}

TEST(SensorProbe, TheCounterSeesEveryBurstButThePowerReadingOnlySomeOfThem) {
  const Draw draw = random_bursts(600, 0.02, 29);
  const double end_s = draw.bursts.back().end_s + 1.0;
  const Traces traces = read_through_sensor(draw, end_s, 0.1, 0.1, 0.025);
  const BurstAnalysis counter =
      analyze_bursts(traces.energy_mj, draw.bursts, 0.1, kIdleW, kBusyW, 0.1);
  EXPECT_EQ(counter.bursts, 600u);
  EXPECT_EQ(counter.missed, 0u);
  EXPECT_NEAR(counter.mean_seen_j, (kBusyW - kIdleW) * 0.02, 0.05 * (kBusyW - kIdleW) * 0.02);
  EXPECT_FALSE(counter.sampling_window_s.has_value());

  const ReadingBurstAnalysis reading =
      analyze_reading_bursts(traces.power_mw, draw.bursts, kIdleW, kBusyW, 0.1, 0.3);
  EXPECT_EQ(reading.bursts, 600u);
  // A 20 ms burst shows a tenth of the rise when it overlaps a 25 ms window of every 100 ms by
  // 2.5 ms or more: with probability (25 + 20 - 2 x 2.5) / 100 = 0.4.
  EXPECT_NEAR(static_cast<double>(reading.missed) / 600.0, 0.6, 0.06);
  ASSERT_TRUE(reading.sampling_window_s.has_value());
  EXPECT_NEAR(*reading.sampling_window_s, 0.025, 0.007);
  ASSERT_TRUE(reading.min_lag_s.has_value());
  EXPECT_LT(*reading.min_lag_s, 0.03);
}

TEST(SensorProbe, ABurstLongerThanThePeriodIsNeverMissed) {
  const Draw draw = random_bursts(50, 0.15, 3);
  const Traces traces = read_through_sensor(draw, draw.bursts.back().end_s + 1.0, 0.1, 0.1, 0.025);
  const ReadingBurstAnalysis reading =
      analyze_reading_bursts(traces.power_mw, draw.bursts, kIdleW, kBusyW, 0.1, 0.3);
  EXPECT_EQ(reading.missed, 0u);
  EXPECT_FALSE(reading.sampling_window_s.has_value());
}

TEST(SensorProbe, IntegrationAndANaivePoller) {
  // A 100 ms square wave read every millisecond as it is: exact; every 100 ms: always one phase.
  std::vector<TimedValue> power;
  for (int ms = 0; ms < 2000; ++ms) {
    power.push_back({ms * 1e-3, (ms % 100) < 50 ? 700e3 : 100e3});
  }
  EXPECT_NEAR(integrate_power_j(power, 0.0, 2.0), 800.0, 1.0);
  EXPECT_NEAR(integrate_power_j(power, 0.0, 2.0, 0.1), 1400.0, 15.0);
  EXPECT_NEAR(integrate_power_j(power, 0.5, 1.0), 200.0, 1.0);
  EXPECT_EQ(integrate_power_j({}, 0.0, 1.0), 0.0);
}

TEST(SensorProbe, CounterMeanPowerAndValueAt) {
  std::vector<TimedValue> energy;
  for (int i = 0; i <= 50; ++i) {
    energy.push_back({i * 0.1, i * 0.1 * 250e3});  // 250 W, one update every 100 ms
  }
  EXPECT_NEAR(counter_mean_power_w(energy, 0.05, 4.95).value(), 250.0, 1e-9);
  EXPECT_FALSE(counter_mean_power_w(energy, 4.95, 5.0).has_value());
  EXPECT_FALSE(value_at(energy, -1.0).has_value());
  EXPECT_DOUBLE_EQ(value_at(energy, 0.15).value(), 0.1 * 250e3);
}

TEST(SensorProbe, StepResponseOfAOneSecondAverage) {
  std::vector<TimedValue> average;
  for (int ms = 0; ms < 4000; ++ms) {
    const double t = ms * 1e-3;
    const double busy_fraction = std::clamp(t - 1.0, 0.0, 1.0);  // a 1 s boxcar after a step at 1 s
    average.push_back({t, (kIdleW + busy_fraction * (kBusyW - kIdleW)) * 1e3});
  }
  const StepResponse response = step_response(average, 1.0, 4.0, kIdleW, kBusyW);
  EXPECT_NEAR(response.delay_s.value(), 0.1, 0.002);
  EXPECT_NEAR(response.rise_s.value(), 0.8, 0.002);
  const StepResponse never = step_response(average, 1.0, 1.05, kIdleW, kBusyW);
  EXPECT_FALSE(never.rise_s.has_value());
}

// A GPU whose counter never moves: the probe says so after its time is up, never hangs.
class FrozenCounterGpu final : public ForwardingGpu {
 public:
  using ForwardingGpu::ForwardingGpu;
  std::uint64_t total_energy_mj() override { return 42; }
};

TEST(SensorProbe, ProbeOfAnIdealAFrozenAndANoCounterGpu) {
  auto clock = std::make_shared<ManualClock>();
  auto ideal =
      std::make_shared<SimulatedGpu>(simulated_gpu_model("h200"), 0, std::shared_ptr<Clock>(clock));
  const CounterProbe fast = probe_energy_counter(*ideal, *clock);
  EXPECT_TRUE(fast.counter.changed_every_poll);
  EXPECT_NE(describe_counter_probe(fast).find("every read"), std::string::npos);

  FrozenCounterGpu frozen(ideal);
  const CounterProbe stuck = probe_energy_counter(frozen, *clock, 1.5);
  EXPECT_EQ(stuck.counter.changes, 0u);
  EXPECT_GE(stuck.duration_s, 1.5);
  EXPECT_NE(describe_counter_probe(stuck).find("did not change in 1.5 s"), std::string::npos);

  SimulatedGpu old(simulated_gpu_model("p100"), 0, clock);
  EXPECT_THROW(probe_energy_counter(old, *clock), Error);
}

TEST(SensorProbe, ReadCostIsTimedWithinItsTimeBudget) {
  ManualClock clock;
  int reads = 0;
  // A read of 4 ms (a real H200's energy counter): a 1 s budget stops after 250, not 2000.
  const double cost_s = mean_read_cost_s(clock, 2000, 1.0, [&] {
    ++reads;
    clock.advance_ns(4'000'000);
  });
  EXPECT_EQ(reads, 250);
  EXPECT_NEAR(cost_s, 0.004, 1e-12);
  reads = 0;
  EXPECT_NEAR(mean_read_cost_s(clock, 10, 1.0, [&] { ++reads; }), 0.0, 1e-12);
  EXPECT_EQ(reads, 10);
  EXPECT_EQ(mean_read_cost_s(clock, 0, 1.0, [&] { ++reads; }), 0.0);
}

TEST(SensorProbe, RecordingStopsOnRequestAndRefusesABadInterval) {
  auto clock = std::make_shared<ManualClock>();
  SimulatedGpu gpu(simulated_gpu_model("a100"), 0, clock);
  int polls = 0;
  const SensorTrace trace =
      record_sensor_trace(gpu, *clock, 60.0, 0.01, [&] { return ++polls > 100; });
  EXPECT_EQ(trace.instant_power_mw.size(), 100u);
  EXPECT_EQ(trace.energy_mj.size(), 100u);
  EXPECT_THROW(record_sensor_trace(gpu, *clock, 1.0, 0.0), Error);
  EXPECT_THROW(record_sensor_trace(gpu, *clock, -1.0, 0.01), Error);
}

}  // namespace
}  // namespace zeus::device
