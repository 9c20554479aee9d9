// HeldSeries (include/zeus/monitor/held_series.hpp): a sampled series in bounded rows whose
// integral over any interval is exact among the kept readings and within the stated bound inside
// a compacted span, against an oracle that keeps every reading.
#include "zeus/monitor/held_series.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using zeus::monitor::HeldIntegral;
using zeus::monitor::HeldPoint;
using zeus::monitor::HeldSeries;
using zeus::monitor::OverflowPolicy;

constexpr std::int64_t kMillisecondNs = 1'000'000;
constexpr std::int64_t kSecondNs = 1'000'000'000;

// Every reading, and the exact integral of the held signal at any time.
class Oracle {
 public:
  void push(std::int64_t time_ns, double value) {
    if (!times_.empty()) {
      integrals_.push_back(integrals_.back() +
                           values_.back() * static_cast<double>(time_ns - times_.back()) * 1e-9);
    } else {
      integrals_.push_back(0.0);
    }
    times_.push_back(time_ns);
    values_.push_back(value);
  }
  double integral_to(std::int64_t time_ns) const {
    const auto after = std::upper_bound(times_.begin(), times_.end(), time_ns);
    const auto i =
        static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, after - times_.begin() - 1));
    return integrals_[i] + values_[i] * static_cast<double>(time_ns - times_[i]) * 1e-9;
  }
  std::int64_t last_ns() const { return times_.back(); }

 private:
  std::vector<std::int64_t> times_;
  std::vector<double> values_;
  std::vector<double> integrals_;
};

// A fixed sequence: std::mt19937_64's output is specified by the standard (its distributions
// are not, hence the modulo).
class Random {
 public:
  std::int64_t between(std::int64_t low, std::int64_t high) {
    return low + static_cast<std::int64_t>(engine_() % static_cast<std::uint64_t>(high - low + 1));
  }

 private:
  std::mt19937_64 engine_{29};
};

constexpr double kLowW = 50.0;
constexpr double kHighW = 400.0;

TEST(HeldSeries, ExactUntilTheBoundThenCompactedWithinTheStatedBound) {
  HeldSeries series(64);
  Oracle oracle;
  Random random;
  std::int64_t now_ns = 0;
  double first_w = 0.0;
  for (int i = 0; i < 10'000; ++i) {
    const double watts = static_cast<double>(random.between(50, 400));
    first_w = i == 0 ? watts : first_w;
    ASSERT_TRUE(series.push(now_ns, watts));
    oracle.push(now_ns, watts);
    ASSERT_LE(series.rows(), 64u);
    if (i == 63) {
      EXPECT_FALSE(series.exact_since_ns().has_value());  // 64 readings: all exact yet
    }
    now_ns += random.between(1, 1000) * kMillisecondNs;
  }
  EXPECT_EQ(series.dropped(), 0u);
  const std::int64_t exact_since = series.exact_since_ns().value();
  const std::int64_t longest = series.longest_span_ns();
  ASSERT_GT(longest, 0);
  const double end_bound = (kHighW - kLowW) * static_cast<double>(longest) * 1e-9 / 4.0;

  // The whole run, from the first reading: exact (both ends fall on row edges).
  const HeldIntegral whole = series.integral(0, now_ns).value();
  EXPECT_EQ(whole.bound, 0.0);
  EXPECT_NEAR(whole.value, oracle.integral_to(now_ns), 1e-9 * whole.value);

  int compacted_ends = 0;
  for (int i = 0; i < 5000; ++i) {
    std::int64_t start = random.between(-kSecondNs, now_ns + kSecondNs);
    std::int64_t end = random.between(-kSecondNs, now_ns + kSecondNs);
    if (end < start) {
      std::swap(start, end);
    }
    const HeldIntegral got = series.integral(start, end).value();
    const double truth = oracle.integral_to(end) - oracle.integral_to(start);
    const double rounding = 1e-9 * std::abs(whole.value);
    EXPECT_LE(std::abs(got.value - truth), got.bound + rounding) << start << " .. " << end;
    EXPECT_LE(got.bound, 2 * end_bound + rounding);
    if (start >= exact_since) {
      EXPECT_EQ(got.bound, 0.0);
    } else {
      ++compacted_ends;
    }
  }
  EXPECT_GT(compacted_ends, 4000);  // most intervals start in the compacted past

  // The rows integrate exactly as a held signal: each compacted span's mean times its length is
  // the integral over it, and spans tile the past up to the first exact reading.
  const std::vector<HeldPoint> rows = series.points(std::nullopt, std::nullopt);
  ASSERT_EQ(rows.size(), series.rows());
  EXPECT_EQ(rows.front().time_ns, 0);
  for (std::size_t i = 0; i + 1 < rows.size() && rows[i].span_ns > 0; ++i) {
    EXPECT_EQ(rows[i].time_ns + rows[i].span_ns, rows[i + 1].time_ns);
    EXPECT_GE(rows[i].value, kLowW);
    EXPECT_LE(rows[i].value, kHighW);
    const double truth =
        oracle.integral_to(rows[i + 1].time_ns) - oracle.integral_to(rows[i].time_ns);
    EXPECT_NEAR(rows[i].value * static_cast<double>(rows[i].span_ns) * 1e-9, truth,
                1e-9 * whole.value);
    const HeldIntegral edge = series.integral(rows[i].time_ns, rows[i + 1].time_ns).value();
    EXPECT_EQ(edge.bound, 0.0);
  }
  EXPECT_EQ(series.at(exact_since)->span_ns, 0);
  EXPECT_GT(series.at(exact_since - 1)->span_ns, 0);
  EXPECT_FALSE(series.at(-1).has_value());
  // Before the first reading, the first reading held backwards (as before compaction).
  EXPECT_NEAR(series.integral_to(-kSecondNs)->value, -first_w, 1e-9);
}

TEST(HeldSeries, AConstantSignalCompactsWithNoError) {
  HeldSeries series(8);
  for (int i = 0; i < 1000; ++i) {
    series.push(i * kSecondNs, 100.0);
  }
  EXPECT_LE(series.rows(), 8u);
  const HeldIntegral inside = series.integral(kSecondNs / 3, 500 * kSecondNs + 7).value();
  EXPECT_EQ(inside.bound, 0.0);
  EXPECT_NEAR(inside.value, 100.0 * (500.0 + 7e-9 - 1.0 / 3.0), 1e-6);
}

TEST(HeldSeries, HostileInputsStayBoundedAndAnswer) {
  // Every reading at one instant (a clock that does not move): zero-length spans, no NaN.
  HeldSeries frozen(8);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(frozen.push(0, static_cast<double>(i % 7)));
  }
  EXPECT_LE(frozen.rows(), 8u);
  EXPECT_EQ(frozen.integral(0, 0)->value, 0.0);
  EXPECT_EQ(frozen.integral(0, kSecondNs)->value, 5.0);  // the last reading, 999 % 7, held
  for (const HeldPoint& row : frozen.points(std::nullopt, std::nullopt)) {
    EXPECT_FALSE(std::isnan(row.value));
  }
  // A reading older than the last is refused; the series stays ordered.
  EXPECT_FALSE(frozen.push(-1, 3.0));
  EXPECT_EQ(frozen.integral(-1, 0)->bound, 0.0);

  // One row cannot compact: the oldest is dropped, and what it covered cannot be answered.
  HeldSeries single(1);
  single.push(0, 10.0);
  single.push(kSecondNs, 20.0);
  EXPECT_EQ(single.dropped(), 1u);
  EXPECT_EQ(single.rows(), 1u);
  EXPECT_FALSE(single.integral(0, 2 * kSecondNs).has_value());
  EXPECT_DOUBLE_EQ(single.integral_to(2 * kSecondNs)->value, 10.0 + 20.0);

  // Two rows: one span and the latest reading, the whole run still exact at its ends.
  HeldSeries two(2);
  for (int i = 0; i < 100; ++i) {
    two.push(i * kSecondNs, i % 2 == 0 ? 10.0 : 30.0);
  }
  EXPECT_EQ(two.rows(), 2u);
  EXPECT_EQ(two.dropped(), 0u);
  EXPECT_DOUBLE_EQ(two.integral(0, 100 * kSecondNs)->value, 50 * 10.0 + 50 * 30.0);

  HeldSeries strict(2, OverflowPolicy::kError);
  EXPECT_TRUE(strict.push(0, 1.0));
  EXPECT_TRUE(strict.push(1, 1.0));
  EXPECT_TRUE(strict.full());
  EXPECT_FALSE(strict.push(2, 1.0));
  EXPECT_EQ(strict.rows(), 2u);
}

}  // namespace
