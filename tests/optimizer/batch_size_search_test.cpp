// What the hosts (the BSO server, the simulator) ask a batch-size policy instead of branching on
// its name: the threshold rule, the cost of a trial stopped before its first epoch, whether it
// uses epoch costs, its bandit; and the registry's default name.
#include "zeus/optimizer/batch_size_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "zeus/optimizer/batch_size_policy.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace {

using zeus::optimizer::BatchSizePolicyConfig;
using zeus::optimizer::BatchSizeSearch;
using zeus::optimizer::Decision;
using zeus::optimizer::ThresholdRule;

BatchSizePolicyConfig config() {
  BatchSizePolicyConfig c;
  c.batch_sizes = {16, 32, 64};
  c.default_batch_size = 32;
  c.seed = 3;
  return c;
}

TEST(BatchSizeSearch, TheDefaultPolicyIsThePapers) {
  const std::string& name = zeus::optimizer::default_batch_size_policy_name();
  EXPECT_EQ(name, "zeus");
  const auto& names = zeus::optimizer::batch_size_policy_names();
  EXPECT_NE(std::find(names.begin(), names.end(), name), names.end());
  // A state saved before there were two policies names none: the default's.
  std::string saved = zeus::optimizer::make_batch_size_search(name, config())->save();
  const auto at = saved.find("\"policy\":\"zeus\",");
  ASSERT_NE(at, std::string::npos);
  saved.erase(at, std::string("\"policy\":\"zeus\",").size());
  EXPECT_EQ(zeus::optimizer::restore_batch_size_search(saved)->policy_name(), name);
}

TEST(BatchSizeSearch, ThePapersThresholdIsSharedBetaTimesMinCost) {
  const auto policy = zeus::optimizer::make_batch_size_search("zeus", config());
  EXPECT_EQ(policy->threshold_rule(), ThresholdRule::kBetaTimesMinCost);
  EXPECT_FALSE(policy->uses_epoch_costs());
  const Decision first = policy->next();
  EXPECT_FALSE(policy->shared_cost_threshold().has_value());
  EXPECT_DOUBLE_EQ(policy->unstarted_trial_cost(first.trial_id), 100.0 * 2.0 * 1.0);
  policy->report(first.trial_id, 10.0, true);
  const Decision second = policy->next();
  EXPECT_EQ(policy->shared_cost_threshold(), 20.0);
  EXPECT_EQ(policy->cost_threshold(second.trial_id), 20.0);
  EXPECT_DOUBLE_EQ(policy->unstarted_trial_cost(second.trial_id), 100.0 * 2.0 * 10.0);
  // Its bandit exists once pruning is over.
  EXPECT_EQ(policy->bandit(), nullptr);
  policy->report(second.trial_id, 8.0, true);
  for (int i = 0; i < 20 && policy->exploring(); ++i) {
    const Decision next = policy->next();
    policy->report(next.trial_id, 9.0, true);
  }
  ASSERT_FALSE(policy->exploring());
  const auto& paper = dynamic_cast<const zeus::optimizer::BatchSizePolicy&>(*policy);
  EXPECT_NE(policy->bandit(), nullptr);
  EXPECT_EQ(policy->bandit(), paper.mab());

  BatchSizePolicyConfig no_beta = config();
  no_beta.beta.reset();
  const auto unbounded = zeus::optimizer::make_batch_size_search("zeus", no_beta);
  const Decision run = unbounded->next();
  unbounded->report(run.trial_id, 10.0, true);
  EXPECT_FALSE(unbounded->shared_cost_threshold().has_value());
}

TEST(BatchSizeSearch, LowRegretThresholdsArePerTrial) {
  const auto policy = zeus::optimizer::make_batch_size_search("low-regret", config());
  EXPECT_EQ(policy->threshold_rule(), ThresholdRule::kPerTrial);
  EXPECT_TRUE(policy->uses_epoch_costs());
  EXPECT_EQ(policy->bandit(), nullptr);
  int capped = 0;
  for (int i = 0; i < 12; ++i) {
    const Decision decision = policy->next();
    if (const std::optional<double> threshold = policy->cost_threshold(decision.trial_id)) {
      // What a trial stopped before its first epoch costs: at least its threshold.
      EXPECT_EQ(policy->unstarted_trial_cost(decision.trial_id), *threshold);
      ++capped;
    }
    policy->report(decision.trial_id, decision.batch_size == 16 ? 8.0 : 10.0, true);
    EXPECT_FALSE(policy->shared_cost_threshold().has_value());
  }
  EXPECT_GT(capped, 0);
  ASSERT_TRUE(policy->min_cost().has_value());
  // No threshold (an unknown trial): a prohibitive cost, as the paper's.
  EXPECT_DOUBLE_EQ(policy->unstarted_trial_cost(999), 100.0 * 2.0 * *policy->min_cost());
}

}  // namespace
