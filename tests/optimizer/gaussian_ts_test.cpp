#include "zeus/optimizer/gaussian_ts.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "zeus/common/error.hpp"

namespace {

using zeus::optimizer::GaussianTs;
using zeus::optimizer::GaussianTsConfig;
using zeus::optimizer::Rng;

TEST(GaussianTs, LearnsPrecisionFromObservations) {
  GaussianTs ts({}, {{32, {-10.0, -12.0}}, {64, {-5.0, -5.0}}});
  const auto& arm = ts.arms().at(32);
  EXPECT_DOUBLE_EQ(arm.reward_precision, 1.0);  // population variance 1
  EXPECT_DOUBLE_EQ(arm.param_precision, 2.0);
  EXPECT_DOUBLE_EQ(arm.param_mean, -11.0);
  EXPECT_TRUE(std::isinf(ts.arms().at(64).param_precision));  // identical rewards
  EXPECT_DOUBLE_EQ(ts.arms().at(64).param_mean, -5.0);
}

TEST(GaussianTs, PriorsEnterThePosterior) {
  GaussianTsConfig config;
  config.prior_mean = -20.0;
  config.prior_precision = 2.0;
  GaussianTs ts(config, {{8, {-10.0, -12.0}}});
  // precision 2 + 2 * 1 = 4; mean (2 * -20 + 1 * -22) / 4
  EXPECT_DOUBLE_EQ(ts.arms().at(8).param_precision, 4.0);
  EXPECT_DOUBLE_EQ(ts.arms().at(8).param_mean, (-40.0 - 22.0) / 4.0);
}

TEST(GaussianTs, WindowKeepsOnlyRecentObservations) {
  GaussianTsConfig config;
  config.window_size = 2;
  GaussianTs ts(config, {{8, {-1.0, -2.0, -3.0}}});
  EXPECT_EQ(ts.arms().at(8).rewards.size(), 2u);
  ts.observe(8, -100.0);
  EXPECT_EQ(ts.arms().at(8).rewards.front(), -3.0);
  EXPECT_DOUBLE_EQ(ts.arms().at(8).param_mean, -51.5);
  EXPECT_THROW(ts.observe(9, 1.0), zeus::Error);
}

TEST(GaussianTs, PicksTheBetterArmAndExploresUnderObservedOnesFirst) {
  GaussianTsConfig config;
  config.num_explorations = 2;
  GaussianTs ts(config, {{8, {-100.0, -101.0}}, {16, {-10.0, -11.0}}, {32, {-50.0}}});
  Rng rng(3);
  EXPECT_EQ(ts.predict(rng), 32);  // only one observation: explored first
  ts.observe(32, -52.0);
  std::map<int, int> picks;
  for (int i = 0; i < 200; ++i) {
    ++picks[ts.predict(rng)];
  }
  EXPECT_GT(picks[16], 190);
}

}  // namespace
