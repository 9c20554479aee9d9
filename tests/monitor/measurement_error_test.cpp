// Error bounds of ZeusMonitor's GPU figures and the counter-against-power check (issue 29):
// the bound holds on a counter that refreshes late and in steps, the short-window warning is said
// once, and the check says which reading to trust.
#include "zeus/monitor/measurement_error.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>

#include "support/log_capture.hpp"
#include "test_support.hpp"
#include "zeus/device/forwarding_gpu.hpp"
#include "zeus/device/gpu_provider.hpp"
#include "zeus/device/sensor_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

using zeus::ManualClock;
using zeus::device::SensorParameters;
using zeus::monitor::CounterPowerCheck;
using zeus::monitor::ZeusMonitor;
using zeus::monitor::ZeusMonitorOptions;
using zeus::testing::LogCapture;
using zeus::testing::SimulatedRig;

constexpr double kPeakW = 700.0;

// A GPU whose draw is a square wave (low_w for the first half of each period, then high_w) on a
// manual clock, and whose energy counter behaves as a real sensor's: it shows the energy drawn up
// to its last refresh (every refresh_s, reading_delay_s late), floored to resolution_mj. The
// truth is exact.
// The rest of the board is a simulated H100 that is never read.
class SensorLikeGpu final : public zeus::device::ForwardingGpu {
 public:
  enum class Counter { kSensor, kStuck, kBackwards, kRunaway };

  SensorLikeGpu(std::shared_ptr<ManualClock> clock, SensorParameters sensor)
      : ForwardingGpu(std::make_shared<zeus::device::SimulatedGpu>(
            zeus::device::simulated_gpu_model("h100"), 0, clock)),
        clock_(std::move(clock)),
        sensor_(std::move(sensor)) {}

  void square_wave(double low_w, double high_w, double period_s) {
    low_w_ = low_w;
    high_w_ = high_w;
    period_s_ = period_s;
  }
  void steady(double watts) { square_wave(watts, watts, 1.0); }
  void set_counter(Counter counter) { counter_ = counter; }
  // The power reading is this fraction of the draw (a reading that averages or lags).
  void set_power_scale(double scale) { power_scale_ = scale; }

  double truth_j(double at_s) const {
    const double half_s = period_s_ / 2.0;
    const double periods = std::floor(at_s / period_s_);
    const double into_s = at_s - periods * period_s_;
    return periods * (low_w_ + high_w_) * half_s + low_w_ * std::min(into_s, half_s) +
           high_w_ * std::max(0.0, into_s - half_s);
  }
  double now_s() const { return static_cast<double>(clock_->now_ns()) * 1e-9; }

  std::uint64_t total_energy_mj() override {
    const double seen_s = std::max(0.0, now_s() - sensor_.reading_delay_s);
    const double refreshed_s =
        std::floor(seen_s / sensor_.counter_refresh_s) * sensor_.counter_refresh_s;
    const double steps = std::floor(truth_j(refreshed_s) * 1000.0 / sensor_.counter_resolution_mj);
    const auto mj = static_cast<std::uint64_t>(steps * sensor_.counter_resolution_mj);
    switch (counter_) {
      case Counter::kStuck:
        return 5000;
      case Counter::kBackwards:
        return 1'000'000'000 - mj;
      case Counter::kRunaway:
        return mj * 10;
      case Counter::kSensor:
        break;
    }
    return mj;
  }
  std::uint32_t instant_power_mw() override {
    const double into_s = now_s() - std::floor(now_s() / period_s_) * period_s_;
    const double watts = into_s < period_s_ / 2.0 ? low_w_ : high_w_;
    return static_cast<std::uint32_t>(watts * power_scale_ * 1000.0);
  }
  zeus::device::PowerLimitConstraints power_limit_constraints_mw() override {
    return {100'000, static_cast<std::uint32_t>(kPeakW * 1000)};
  }
  bool supports_energy_counter() override { return true; }

  std::uint32_t average_power_mw() override { return instant_power_mw(); }
  std::uint32_t average_memory_power_mw() override { return 0; }
  int temperature_c() override { return 50; }

 private:
  std::shared_ptr<ManualClock> clock_;
  SensorParameters sensor_;
  double low_w_ = 0.0;
  double high_w_ = 0.0;
  double period_s_ = 1.0;
  Counter counter_ = Counter::kSensor;
  double power_scale_ = 1.0;
};

SensorParameters sensor(double refresh_s, double resolution_mj, double delay_s = 0.0) {
  SensorParameters parameters;
  parameters.counter_refresh_s = refresh_s;
  parameters.counter_resolution_mj = resolution_mj;
  parameters.reading_delay_s = delay_s;
  parameters.source = "test";
  return parameters;
}

struct SensorRig {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<SensorLikeGpu> gpu;
  zeus::device::Gpus gpus;
  std::unique_ptr<ZeusMonitor> monitor;

  explicit SensorRig(const SensorParameters& parameters)
      : gpu(std::make_shared<SensorLikeGpu>(clock, parameters)), gpus({gpu}, {0}) {
    ZeusMonitorOptions options;
    options.clock = clock;
    options.sensor_parameters = [parameters](zeus::device::Gpu&) { return parameters; };
    monitor = std::make_unique<ZeusMonitor>(gpus, std::vector<std::shared_ptr<zeus::device::Cpu>>{},
                                            std::move(options));
  }
};

TEST(ErrorBound, CounterBoundIsRefreshPlusDelayAtPeakPlusOneStep) {
  const auto bound = zeus::monitor::counter_error_bound(sensor(0.05, 250.0, 0.01), kPeakW);
  EXPECT_DOUBLE_EQ(bound.at(0.0), 0.06 * kPeakW + 0.25);
  EXPECT_DOUBLE_EQ(bound.at(100.0), bound.at(0.0));  // the ends only, whatever the length
  const auto polled = zeus::monitor::polled_error_bound(kPeakW);
  EXPECT_DOUBLE_EQ(polled.at(2.0), 2.0 * kPeakW);
}

TEST(ErrorBound, HoldsOnSquareWavesForWindowsOfEveryPhaseAndLength) {
  // A counter refreshing every 100 ms in 250 mJ steps, 20 ms late; square waves of 60 W / 700 W
  // faster (70 ms) and slower (400 ms) than the refresh; windows from 1 ms to 3 s.
  for (const double period_s : {0.07, 0.4}) {
    SensorRig rig(sensor(0.1, 250.0, 0.02));
    rig.gpu->square_wave(60.0, kPeakW, period_s);
    const double bound_j = rig.monitor->gpu_error_bounds().front().second.at(0.0);
    EXPECT_DOUBLE_EQ(bound_j, 0.12 * kPeakW + 0.25);
    std::mt19937 random(29);
    std::uniform_int_distribution<std::int64_t> gap_ns(1, 200'000'000);
    std::uniform_int_distribution<std::int64_t> length_ns(1'000'000, 3'000'000'000);
    rig.clock->advance_s(1.0);
    double worst_j = 0.0;
    for (int window = 0; window < 3000; ++window) {
      rig.clock->advance_ns(gap_ns(random));
      const double begin_s = rig.gpu->now_s();
      rig.monitor->begin_window("w");
      rig.clock->advance_ns(length_ns(random));
      const zeus::monitor::Measurement measured = rig.monitor->end_window("w");
      const double truth_j = rig.gpu->truth_j(rig.gpu->now_s()) - rig.gpu->truth_j(begin_s);
      const double error_j = std::abs(measured.gpu_energy_j.at(0) - truth_j);
      ASSERT_LE(error_j, measured.gpu_energy_error_j().at(0) + 1e-9)
          << "period " << period_s << " s, window at " << begin_s << " s for " << measured.time_s
          << " s";
      worst_j = std::max(worst_j, error_j);
    }
    if (period_s > 0.12) {  // whole stale spans at the peak happen: the bound is nearly reached
      EXPECT_GT(worst_j, 0.8 * bound_j) << "period " << period_s;
    }
  }
}

TEST(ErrorBound, TheSimulatedGpuIsAnIdealSensorAndPolledGpusAreBoundedByTheirWindow) {
  SimulatedRig rig(2, "h200");
  SimulatedRig old(1, "p100");  // no energy counter: polled power
  ZeusMonitorOptions options;
  options.clock = rig.clock;
  options.start_sampler_thread = false;
  const zeus::device::Gpu* known = rig.gpus[1].get();
  options.sensor_parameters = [known](zeus::device::Gpu& gpu) -> std::optional<SensorParameters> {
    if (&gpu == known) {
      return sensor(0.02, 1.0);
    }
    return std::nullopt;
  };
  ZeusMonitor monitor(rig.set, {}, options);
  rig.clock->advance_s(1.0);
  monitor.begin_window("w");
  rig.clock->advance_s(2.0);
  const zeus::monitor::Measurement measured = monitor.end_window("w");
  const zeus::monitor::EnergyByIndex errors = measured.gpu_energy_error_j();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_DOUBLE_EQ(errors.at(0), 0.001);  // the simulated GPU's sensor: exact, in whole mJ
  EXPECT_DOUBLE_EQ(errors.at(1), 0.02 * 700.0 + 0.001);  // as the source says, at 700 W
  EXPECT_EQ(monitor.sensor_parameters()[0].counter_refresh_s, 0.0);
  EXPECT_EQ(monitor.short_window_s(), 5 * 0.02);

  ZeusMonitorOptions polled_options;
  polled_options.clock = old.clock;
  polled_options.start_sampler_thread = false;
  ZeusMonitor polled(old.set, {}, polled_options);
  polled.begin_window("w");
  old.clock->advance_s(3.0);
  const double peak_w = old.gpus[0]->power_limit_constraints_mw().max_mw / 1000.0;
  EXPECT_DOUBLE_EQ(polled.end_window("w").gpu_energy_error_j().at(0), 3.0 * peak_w);
}

TEST(ErrorBound, ASensorFaithfulGpuAndAKnownModelAreBoundedByTheirSensor) {
  // The sensor-faithful simulated H200 reads like the real one measured (100 ms refresh, 14 ms
  // delay): its bound is (0.1 + 0.014) s at 700 W plus one step, from its own parameters.
  auto clock = std::make_shared<ManualClock>();
  auto truth = std::make_shared<zeus::device::SimulatedGpu>(
      zeus::device::simulated_gpu_model("h200"), 0, clock);
  const zeus::device::Gpus gpus({std::make_shared<zeus::device::SensorGpu>(truth)}, {0});
  ZeusMonitorOptions options;
  options.clock = clock;
  options.start_sampler_thread = false;
  ZeusMonitor monitor(gpus, {}, options);
  truth->set_utilization(0.5);
  monitor.begin_window("w");
  clock->advance_s(5.0);
  const zeus::monitor::Measurement measured = monitor.end_window("w");
  EXPECT_NEAR(measured.gpu_energy_error_j().at(0), 0.114 * 700.0 + 0.001, 1e-9);
  const double error_j = std::abs(measured.gpu_energy_j.at(0) - truth->exact_energy_j());
  EXPECT_LE(error_j, measured.gpu_energy_error_j().at(0));
  // A real GPU of a characterised model gets its published parameters by name.
  const auto h200 = zeus::device::published_sensor_parameters("NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_EQ(zeus::monitor::default_sensor_parameters(gpus.at(0)).source, h200->source);
}

TEST(ErrorBound, MeasurementsMadeOtherwiseHaveNoBoundAndCancelledOnesNone) {
  EXPECT_TRUE(zeus::testing::energies(1.0, {{0, 5.0}}).gpu_energy_error_j().empty());
  SimulatedRig rig(1, "h200");
  ZeusMonitorOptions options;
  options.clock = rig.clock;
  ZeusMonitor monitor(rig.set, {}, options);
  monitor.begin_window("w");
  EXPECT_TRUE(monitor.end_window("w", {.cancel = true}).gpu_energy_error_j().empty());
}

TEST(ErrorBound, ShortWindowsAreWarnedOncePerMonitor) {
  LogCapture log;
  SensorRig rig(sensor(0.1, 1.0));
  rig.gpu->steady(300.0);
  rig.clock->advance_s(1.0);
  for (int i = 0; i < 3; ++i) {
    rig.monitor->begin_window("step");
    rig.clock->advance_s(0.3);  // under 5 x 100 ms
    rig.monitor->end_window("step");
  }
  EXPECT_EQ(log.count("under 5 refresh periods"), 1) << log.text();
  SensorRig other(sensor(0.1, 1.0));
  other.monitor->begin_window("long");
  other.clock->advance_s(0.5);  // 5 periods: not short
  other.monitor->end_window("long");
  other.monitor->begin_window("short");
  other.clock->advance_s(0.1);
  other.monitor->end_window("short");
  EXPECT_EQ(log.count("under 5 refresh periods"), 2) << log.text();
  EXPECT_NE(log.text().find("window 'short' lasted 0.100000 s"), std::string::npos);

  const auto parameters = sensor(0.1, 1.0);
  auto clock = std::make_shared<ManualClock>();
  const zeus::device::Gpus gpus({std::make_shared<SensorLikeGpu>(clock, parameters)}, {0});
  ZeusMonitorOptions quiet;
  quiet.clock = clock;
  quiet.sensor_parameters = [parameters](zeus::device::Gpu&) { return parameters; };
  quiet.warn_short_windows = false;
  ZeusMonitor monitor(gpus, {}, quiet);
  monitor.begin_window("short");
  clock->advance_s(0.1);
  monitor.end_window("short");
  EXPECT_EQ(log.count("under 5 refresh periods"), 2) << log.text();
}

// ---- Counter against power -----------------------------------------------------------------

CounterPowerCheck check_one(SensorRig& rig, double duration_s = 1.0) {
  const auto checks = rig.monitor->cross_check({.duration_s = duration_s, .poll_period_s = 0.01});
  EXPECT_EQ(checks.size(), 1u);
  return checks.at(0);
}

TEST(CrossCheck, CounterAndPowerAgreeOnASteadyLoad) {
  SensorRig rig(sensor(0.02, 1.0));
  rig.gpu->steady(400.0);
  rig.clock->advance_s(1.0);
  const CounterPowerCheck check = check_one(rig);
  EXPECT_DOUBLE_EQ(check.duration_s, 1.0);  // the manual clock moved by the sleeps only
  EXPECT_NEAR(check.power_energy_j, 400.0, 1e-6);
  EXPECT_NEAR(check.counter_energy_j, 400.0, 0.02 * kPeakW);
  EXPECT_FALSE(check.disagrees);
  EXPECT_EQ(check.trust, CounterPowerCheck::Trust::kCounter);
  EXPECT_EQ(check.power_samples, 101);
}

TEST(CrossCheck, AveragingPowerDisagreesAndTheCounterIsTrusted) {
  LogCapture log;
  SensorRig rig(sensor(0.02, 1.0));
  rig.gpu->steady(400.0);
  rig.gpu->set_power_scale(0.5);
  rig.clock->advance_s(1.0);
  const CounterPowerCheck check = check_one(rig);
  EXPECT_TRUE(check.disagrees);
  EXPECT_NEAR(check.difference, 0.5, 0.05);
  EXPECT_EQ(check.trust, CounterPowerCheck::Trust::kCounter);
  EXPECT_NE(check.reason.find("sums every power sample"), std::string::npos) << check.reason;
  EXPECT_NE(log.text().find("trust the counter"), std::string::npos) << log.text();
}

TEST(CrossCheck, ABrokenCounterMakesThePowerTheOneToTrust) {
  struct Case {
    SensorLikeGpu::Counter counter;
    const char* reason;
  };
  for (const Case& c :
       {Case{SensorLikeGpu::Counter::kStuck, "did not advance"},
        Case{SensorLikeGpu::Counter::kBackwards, "went backwards"},
        Case{SensorLikeGpu::Counter::kRunaway, "above the most this GPU can draw"}}) {
    SensorRig rig(sensor(0.02, 1.0));
    rig.gpu->steady(300.0);
    rig.clock->advance_s(1.0);
    rig.gpu->set_counter(c.counter);
    const CounterPowerCheck check = check_one(rig);
    EXPECT_TRUE(check.disagrees) << c.reason;
    EXPECT_EQ(check.trust, CounterPowerCheck::Trust::kPower) << c.reason;
    EXPECT_NE(check.reason.find(c.reason), std::string::npos) << check.reason;
  }
}

TEST(CrossCheck, AShortCheckSaysWhenTheDifferenceIsWithinTheCounterBound) {
  SensorRig rig(sensor(0.1, 1.0));
  rig.gpu->steady(300.0);
  rig.clock->advance_s(1.05);
  const CounterPowerCheck check = check_one(rig, 0.05);  // half a refresh period
  EXPECT_TRUE(check.disagrees);
  EXPECT_EQ(check.trust, CounterPowerCheck::Trust::kCounter);
  EXPECT_NE(check.reason.find("check for longer"), std::string::npos) << check.reason;
}

TEST(CrossCheck, RefusesAMeaninglessDurationOrPeriod) {
  SensorRig rig(sensor(0.1, 1.0));
  for (const auto& [duration_s, period_s] :
       {std::pair{0.0, 0.01}, std::pair{1.0, 0.0}, std::pair{1.0, 2.0},
        std::pair{std::nan(""), 0.01}, std::pair{1.0, 1e-6}}) {
    EXPECT_THROW(rig.monitor->cross_check({.duration_s = duration_s, .poll_period_s = period_s}),
                 zeus::Error);
  }
}

// ---- Through NVML (the fake libnvidia-ml) --------------------------------------------------

TEST(ErrorBoundNvml, AConstantCounterReadsZeroWithTheBoundAndTheCheckTrustsThePower) {
  void* handle = dlopen(ZEUS_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto configure = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_nvml_configure"));
  const nlohmann::json device = {{"name", "NVIDIA H100 80GB HBM3"},
                                 {"uuid", "GPU-0"},
                                 {"architecture", 9},
                                 {"power_limit_min_mw", 200000},
                                 {"power_limit_max_mw", 700000},
                                 {"power_limit_default_mw", 700000},
                                 {"power_limit_mw", 700000},
                                 {"power_usage_mw", 123000},
                                 {"power_fields", {{"186:0", 600000}, {"185:0", 590000}}},
                                 {"energy_mj", 5000},
                                 {"energy_step_mj", 0}};
  ASSERT_EQ(configure(nlohmann::json{{"devices", {device}}}.dump().c_str()), 0);
  auto nvml = zeus::device::open_nvml(ZEUS_FAKE_NVML_PATH);
  const zeus::device::Gpus gpus({nvml->open_gpu(0)}, {0});
  ZeusMonitor monitor(gpus, {}, {});
  monitor.begin_window("w");
  const zeus::monitor::Measurement measured = monitor.end_window("w");
  EXPECT_EQ(measured.gpu_energy_j.at(0), 0.0);
  EXPECT_DOUBLE_EQ(measured.gpu_energy_error_j().at(0), 0.1 * 700.0 + 0.001);
  // Long enough that 600 W shows more than the bound: a counter refreshing every 100 ms at worst
  // would have moved.
  const auto checks = monitor.cross_check({.duration_s = 0.3, .poll_period_s = 0.01});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].trust, CounterPowerCheck::Trust::kPower);
  EXPECT_GT(checks[0].power_energy_j, 0.0);
  EXPECT_NE(checks[0].reason.find("did not advance"), std::string::npos) << checks[0].reason;
  dlclose(handle);
}

}  // namespace
