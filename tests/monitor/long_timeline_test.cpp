// A PowerSampler over a run of days (issue 29, item 2): three days at 10 Hz on a manual clock,
// driven sweep by sweep (no sleeps), in the default bounded rows. The energy over any interval
// answers: exact among the kept samples, within the stated bound in the compacted past, against
// the simulated GPU's own exact energy counter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace {

using zeus::monitor::HeldIntegral;
using zeus::monitor::PowerDomain;
using zeus::monitor::PowerSample;
using zeus::monitor::PowerSampler;
using zeus::monitor::PowerSamplerOptions;
using zeus::monitor::TemperatureSample;
using zeus::monitor::TimelineResolution;
using zeus::testing::SimulatedRig;

constexpr std::int64_t kSecondNs = 1'000'000'000;
constexpr std::int64_t kPeriodNs = kSecondNs / 10;
constexpr std::int64_t kDayNs = 86'400 * kSecondNs;

// The a100 draws 55 W idle and 400 W busy, linearly: these loads give whole milliwatts, so the
// sampled readings are the draw itself and the held signal is the truth.
constexpr double kLoads[] = {0.0, 0.2, 0.4, 0.6, 0.8, 1.0};
constexpr double kIdleW = 55.0;
constexpr double kBusyW = 400.0;

// The load in force from `time_ns`: it changes every 7 to 97 s, on a sweep.
double load_at(std::int64_t time_ns) {
  const std::int64_t slot = time_ns / (7 * kSecondNs);
  const auto mixed = static_cast<std::uint64_t>(slot) * 2654435761ULL;
  return kLoads[(mixed >> 7) % 6];
}

struct Checkpoint {
  std::int64_t time_ns;
  double energy_j;  // the simulated GPU's exact energy counter
};

TEST(LongTimeline, ThreeDaysAtTenHertzAnswerEveryIntervalInBoundedRows) {
  SimulatedRig rig(1, "a100");
  PowerSamplerOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  options.period_s = 0.1;
  PowerSampler sampler(rig.set, options);  // the default bound and policy: what users get

  std::vector<Checkpoint> checkpoints;
  const double start_j = rig.gpus[0]->exact_energy_j();
  for (std::int64_t now_ns = 0; now_ns <= 3 * kDayNs; now_ns += kPeriodNs) {
    rig.gpus[0]->set_utilization(load_at(now_ns));
    sampler.sample_once();
    // Every 613 s, a time that falls anywhere inside a span (not on a sweep's edge).
    if (now_ns % (613 * kSecondNs) == 0) {
      rig.clock->advance_ns(kPeriodNs / 3);
      checkpoints.push_back({rig.clock->now_ns(), rig.gpus[0]->exact_energy_j() - start_j});
      rig.clock->advance_ns(kPeriodNs - kPeriodNs / 3);
    } else {
      rig.clock->advance_ns(kPeriodNs);
    }
  }
  ASSERT_NO_THROW(sampler.rethrow_if_failed());
  EXPECT_EQ(sampler.dropped_samples(), 0u);

  const TimelineResolution resolution = sampler.resolution(PowerDomain::kDeviceInstant, 0);
  EXPECT_LE(resolution.rows, zeus::monitor::kDefaultMaxSamplesPerSeries);
  ASSERT_TRUE(resolution.exact_since_ns.has_value());
  // At least half the rows are exact samples: the last 55 minutes at 10 Hz.
  EXPECT_LE(*resolution.exact_since_ns,
            3 * kDayNs - static_cast<std::int64_t>(zeus::monitor::kDefaultMaxSamplesPerSeries / 2) *
                             kPeriodNs);
  // Three days in at most 32,768 spans: each well under a minute.
  EXPECT_GT(resolution.longest_span_ns, 0);
  EXPECT_LT(resolution.longest_span_ns, 60 * kSecondNs);
  const double end_bound_j =
      (kBusyW - kIdleW) * static_cast<double>(resolution.longest_span_ns) * 1e-9 / 4.0;

  // The whole run, from the first sample: exact.
  const HeldIntegral whole =
      *sampler.energy_with_bound_j(PowerDomain::kDeviceInstant, 0, 0, checkpoints.back().time_ns);
  EXPECT_EQ(whole.bound, 0.0);
  EXPECT_NEAR(whole.value, checkpoints.back().energy_j, 1e-9 * whole.value);

  // Every interval between checkpoints (a few hundred thousand of them would be slow; every
  // 7th start against every end covers the run).
  int exact = 0;
  int compacted = 0;
  for (std::size_t i = 0; i < checkpoints.size(); i += 7) {
    for (std::size_t j = i; j < checkpoints.size(); ++j) {
      const HeldIntegral got = *sampler.energy_with_bound_j(
          PowerDomain::kDeviceInstant, 0, checkpoints[i].time_ns, checkpoints[j].time_ns);
      const double truth = checkpoints[j].energy_j - checkpoints[i].energy_j;
      const double rounding = 1e-6 + 1e-12 * checkpoints[j].energy_j;
      ASSERT_LE(std::abs(got.value - truth), got.bound + rounding) << i << " .. " << j;
      ASSERT_LE(got.bound, 2 * end_bound_j);
      if (checkpoints[i].time_ns >= *resolution.exact_since_ns) {
        ASSERT_EQ(got.bound, 0.0);
        ++exact;
      } else {
        ++compacted;
      }
    }
  }
  EXPECT_GT(exact, 0);
  EXPECT_GT(compacted, exact);

  // The timeline says which rows are compacted, and they cover the past without a gap.
  const std::vector<PowerSample> rows = sampler.timeline(PowerDomain::kDeviceInstant, 0);
  ASSERT_EQ(rows.size(), resolution.rows);
  EXPECT_EQ(rows.front().time_ns, 0);
  std::size_t spans = 0;
  for (std::size_t i = 0; i + 1 < rows.size() && rows[i].span_ns > 0; ++i, ++spans) {
    ASSERT_EQ(rows[i].time_ns + rows[i].span_ns, rows[i + 1].time_ns);
    ASSERT_GE(rows[i].power_w, kIdleW - 1e-6);
    ASSERT_LE(rows[i].power_w, kBusyW + 1e-6);
  }
  EXPECT_EQ(rows[spans].time_ns, *resolution.exact_since_ns);
  EXPECT_EQ(rows[spans].span_ns, 0);
  EXPECT_LE(spans, zeus::monitor::kDefaultMaxSamplesPerSeries / 2);
  // Power in the compacted past is a span's mean; in the exact past, the sample.
  EXPECT_TRUE(sampler.power_w(PowerDomain::kDeviceInstant, 0, kDayNs).has_value());
  EXPECT_DOUBLE_EQ(*sampler.power_w(PowerDomain::kDeviceInstant, 0, 3 * kDayNs),
                   kIdleW + (kBusyW - kIdleW) * load_at(3 * kDayNs));
}

TEST(LongTimeline, TemperatureOverDaysKeepsItsWholeRunInBoundedRows) {
  SimulatedRig rig(1, "a100");
  PowerSamplerOptions options;
  options.clock = rig.clock;
  options.start_thread = false;
  options.domains.clear();
  options.temperature = true;
  options.max_samples_per_series = 64;
  PowerSampler sampler(rig.set, options);  // 1 Hz: the temperature-only default
  std::vector<int> truth;                  // the temperature in force in each second
  for (std::int64_t now_ns = 0; now_ns < 2 * kDayNs; now_ns += kSecondNs) {
    rig.gpus[0]->set_utilization(load_at(now_ns));
    sampler.sample_once();
    truth.push_back(rig.gpus[0]->temperature_c());
    rig.clock->advance_ns(kSecondNs);
  }
  EXPECT_EQ(sampler.dropped_samples(), 0u);
  const TimelineResolution resolution = sampler.temperature_resolution(0);
  EXPECT_LE(resolution.rows, 64u);
  ASSERT_TRUE(resolution.exact_since_ns.has_value());
  const std::vector<TemperatureSample> rows = sampler.temperature_timeline(0);
  ASSERT_EQ(rows.size(), resolution.rows);
  EXPECT_EQ(rows.front().time_ns, 0);  // the run's start is still there
  EXPECT_GT(rows.front().span_ns, 0);
  const auto [low, high] = std::minmax_element(truth.begin(), truth.end());
  for (const TemperatureSample& row : rows) {
    EXPECT_GE(row.temperature_c, *low);
    EXPECT_LE(row.temperature_c, *high);
  }
  // The latest reading is exact.
  EXPECT_EQ(sampler.temperature_c(0), truth.back());
  EXPECT_EQ(rows.back().span_ns, 0);
  EXPECT_EQ(sampler.temperature_c(0, rows.back().time_ns), truth.back());
}

}  // namespace
