#include "zeus/optimizer/rng.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "zeus/common/error.hpp"

namespace {

using zeus::optimizer::Rng;

TEST(Rng, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const auto value = a.next_u64();
    EXPECT_EQ(value, b.next_u64());
    (void)c;
  }
  EXPECT_NE(Rng(42).next_u64(), Rng(43).next_u64());
}

TEST(Rng, SaveAndRestoreContinueTheStream) {
  Rng rng(7);
  for (int i = 0; i < 10; ++i) {
    rng.normal(0, 1);
  }
  Rng restored = Rng::restore(rng.save());
  EXPECT_EQ(restored, rng);
  EXPECT_EQ(restored.normal(1.0, 2.0), rng.normal(1.0, 2.0));
  EXPECT_THROW(Rng::restore("garbage"), zeus::Error);
  EXPECT_THROW(Rng::restore("xoshiro256**:" + std::string(64, '0')), zeus::Error);
}

TEST(Rng, DistributionsLookRight) {
  Rng rng(1);
  double sum = 0.0, squares = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal(3.0, 2.0);
    sum += x;
    squares += x * x;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(std::sqrt(squares / n - mean * mean), 2.0, 0.02);
  int counts[5] = {};
  for (int i = 0; i < 50000; ++i) {
    ++counts[rng.below(5)];
  }
  for (const int count : counts) {
    EXPECT_NEAR(count, 10000, 400);
  }
  auto order = rng.permutation(10);
  std::sort(order.begin(), order.end());
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(order[i], i);
  }
  EXPECT_EQ(rng.normal(5.0, 0.0), 5.0);
}

}  // namespace
