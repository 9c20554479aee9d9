#include "zeus/optimizer/batch_size_policy.hpp"

#include <gtest/gtest.h>

#include <map>

#include "zeus/common/error.hpp"

namespace {

using zeus::optimizer::BatchSizePolicy;
using zeus::optimizer::BatchSizePolicyConfig;
using zeus::optimizer::Decision;
using zeus::optimizer::TrialKind;

BatchSizePolicyConfig config(std::vector<int> sizes = {8, 16, 32, 64, 128}, int b0 = 32) {
  BatchSizePolicyConfig c;
  c.batch_sizes = std::move(sizes);
  c.default_batch_size = b0;
  c.seed = 11;
  return c;
}

// Runs decisions sequentially against a fixed cost table (nullopt = does not converge).
std::vector<int> run(BatchSizePolicy& policy, const std::map<int, std::optional<double>>& costs,
                     int count) {
  std::vector<int> chosen;
  for (int i = 0; i < count; ++i) {
    const Decision decision = policy.next();
    chosen.push_back(decision.batch_size);
    const auto cost = costs.at(decision.batch_size);
    policy.report(decision.trial_id, cost.value_or(1000.0), cost.has_value());
  }
  return chosen;
}

TEST(BatchSizePolicy, PrunesDownThenUpTwiceThenBandits) {
  BatchSizePolicy policy(config());
  const std::map<int, std::optional<double>> costs = {
      {8, 50.0}, {16, 30.0}, {32, 40.0}, {64, 60.0}, {128, std::nullopt}};
  // Round 1 from b0 = 32: down 32, 16, 8; up 64, 128 (fails). Round 2 from the best (16) over
  // the survivors: down 16, 8; up 32, 64.
  EXPECT_EQ(run(policy, costs, 9), (std::vector<int>{32, 16, 8, 64, 128, 16, 8, 32, 64}));
  EXPECT_FALSE(policy.in_mab_stage());
  EXPECT_EQ(policy.next().kind, TrialKind::kMab);
  ASSERT_TRUE(policy.in_mab_stage());
  EXPECT_EQ(policy.mab()->arms().size(), 4u);  // 128 was pruned
  EXPECT_EQ(policy.mab()->arms().at(16).observations, 2);
}

TEST(BatchSizePolicy, AFailureStopsThatSide) {
  BatchSizePolicy policy(config());
  const std::map<int, std::optional<double>> costs = {
      {8, 5.0}, {16, std::nullopt}, {32, 40.0}, {64, 60.0}, {128, 70.0}};
  // 16 fails, so 8 is never tried, even though it would be the best.
  const std::vector<int> chosen = run(policy, costs, 5);
  EXPECT_EQ(chosen, (std::vector<int>{32, 16, 64, 128, 32}));
}

TEST(BatchSizePolicy, ThresholdComesFromConvergedRunsOnly) {
  BatchSizePolicy policy(config());
  EXPECT_FALSE(policy.cost_threshold().has_value());
  Decision first = policy.next();
  policy.report(first.trial_id, 10.0, false);  // did not converge: no effect on min cost
  EXPECT_FALSE(policy.cost_threshold().has_value());
  Decision second = policy.next();
  policy.report(second.trial_id, 40.0, true);
  EXPECT_DOUBLE_EQ(*policy.cost_threshold(), 80.0);
  EXPECT_EQ(policy.best_batch_size(), second.batch_size);
}

TEST(BatchSizePolicy, ConcurrentSubmissionsRunTheBestKnownAndResultsMayArriveLate) {
  BatchSizePolicy policy(config());
  const Decision a = policy.next();  // exploration of 32
  EXPECT_EQ(a.kind, TrialKind::kExploration);
  const Decision b = policy.next();  // pruning waits for a: run the best known
  EXPECT_EQ(b.kind, TrialKind::kConcurrent);
  EXPECT_EQ(b.batch_size, 32);
  policy.report(b.trial_id, 33.0, true);  // arrives first
  EXPECT_EQ(policy.next().kind, TrialKind::kConcurrent);
  policy.report(a.trial_id, 35.0, true);
  const Decision c = policy.next();
  EXPECT_EQ(c.kind, TrialKind::kExploration);
  EXPECT_EQ(c.batch_size, 16);
  EXPECT_DOUBLE_EQ(*policy.min_cost(), 33.0);
}

TEST(BatchSizePolicy, ACrashedTrialIsExploredAgain) {
  BatchSizePolicy policy(config());
  const Decision a = policy.next();
  policy.fail(a.trial_id);
  const Decision b = policy.next();
  EXPECT_EQ(b.batch_size, a.batch_size);
  EXPECT_EQ(b.kind, TrialKind::kExploration);
  EXPECT_THROW(policy.fail(a.trial_id), zeus::Error);
  EXPECT_THROW(policy.report(999, 1.0, true), zeus::Error);
  EXPECT_THROW(policy.report(b.trial_id, -1.0, true), zeus::Error);
}

TEST(BatchSizePolicy, NothingConvergingIsAClearError) {
  BatchSizePolicy policy(config({8, 16}, 8));
  const std::map<int, std::optional<double>> costs = {{8, std::nullopt}, {16, std::nullopt}};
  run(policy, costs, 2);
  try {
    policy.next();
    FAIL();
  } catch (const zeus::Error& error) {
    EXPECT_NE(std::string(error.what()).find("no batch size reached the target"),
              std::string::npos);
  }
}

TEST(BatchSizePolicy, BanditFollowsDriftWithAWindow) {
  BatchSizePolicyConfig c = config({16, 32}, 32);
  c.mab.window_size = 4;
  BatchSizePolicy policy(c);
  std::map<int, std::optional<double>> costs = {{16, 30.0}, {32, 60.0}};
  // Small noise so that precisions stay finite.
  int calls = 0;
  auto noisy_run = [&](int count) {
    std::map<int, int> picks;
    for (int i = 0; i < count; ++i) {
      const Decision d = policy.next();
      ++picks[d.batch_size];
      const double noise = (++calls % 2 == 0) ? 1.0 : -1.0;
      policy.report(d.trial_id, *costs.at(d.batch_size) + noise, true);
    }
    return picks;
  };
  noisy_run(4);  // pruning
  EXPECT_GT(noisy_run(40)[16], 35);
  costs[16] = 200.0;  // the data drifted: 16 became expensive
  EXPECT_GT(noisy_run(60)[32], 40);
}

TEST(BatchSizePolicy, SaveAndRestoreReproduceTheFuture) {
  BatchSizePolicy policy(config());
  const std::map<int, std::optional<double>> costs = {
      {8, 50.0}, {16, 30.0}, {32, 40.0}, {64, 60.0}, {128, std::nullopt}};
  int step = 0;
  auto drive = [&](BatchSizePolicy& p, int count) {
    std::vector<int> chosen;
    for (int i = 0; i < count; ++i) {
      const Decision d = p.next();
      chosen.push_back(d.batch_size);
      const double jitter = ((step++ * 7919) % 13) * 0.5;
      p.report(d.trial_id, costs.at(d.batch_size).value_or(1000.0) + jitter,
               costs.at(d.batch_size).has_value());
    }
    return chosen;
  };
  drive(policy, 14);
  const Decision in_flight = policy.next();  // a dispatched trial is part of the state
  const std::string saved = policy.save();
  BatchSizePolicy restored = BatchSizePolicy::restore(saved);
  EXPECT_EQ(restored.save(), saved);
  const int step_at_save = step;
  policy.report(in_flight.trial_id, 31.0, true);
  const std::vector<int> original = drive(policy, 20);
  step = step_at_save;
  restored.report(in_flight.trial_id, 31.0, true);
  EXPECT_EQ(drive(restored, 20), original);
  EXPECT_THROW(BatchSizePolicy::restore("{}"), zeus::Error);
  EXPECT_THROW(BatchSizePolicy::restore("not json"), zeus::Error);
}

TEST(BatchSizePolicy, BadConfigurationsAreRejected) {
  EXPECT_THROW(BatchSizePolicy(config({}, 8)), zeus::Error);
  EXPECT_THROW(BatchSizePolicy(config({8, 8}, 8)), zeus::Error);
  EXPECT_THROW(BatchSizePolicy(config({8, 16}, 32)), zeus::Error);
  BatchSizePolicyConfig c = config();
  c.pruning_rounds = 0;
  EXPECT_THROW(BatchSizePolicy{c}, zeus::Error);
  c = config();
  c.beta = 0.0;
  EXPECT_THROW(BatchSizePolicy{c}, zeus::Error);
  c = config();
  c.mab.num_explorations = -1;
  EXPECT_THROW(BatchSizePolicy{c}, zeus::Error);
  c = config();
  c.mab.num_explorations = 0;  // no forced exploration: Thompson draws from the start
  EXPECT_NO_THROW(BatchSizePolicy{c});
}

}  // namespace
