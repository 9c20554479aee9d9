// What the hosts (the BSO server, the simulator) ask a batch-size policy instead of branching on
// its name: the threshold rule, the cost of a trial stopped before its first epoch, whether it
// uses epoch costs, its bandit; and the registry's default name.
#include "zeus/optimizer/batch_size_search.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/optimizer/batch_size_policy.hpp"
#include "zeus/optimizer/low_regret_policy.hpp"

namespace {

using zeus::optimizer::BatchSizePolicyConfig;
using zeus::optimizer::BatchSizeSearch;
using zeus::optimizer::Decision;
using zeus::optimizer::ThresholdRule;
using zeus::optimizer::TrialKind;

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

// Issue 27: a job whose runs crash (failed, or abandoned without a word) must not grow the
// policy's saved state. 1,024 batch sizes, 1,500 trials that never report: the state
// stays the size it had after the first few, under both policies and in both stages.
std::size_t state_after_crashes(const std::string& name, bool converge_first, bool abandon) {
  BatchSizePolicyConfig c;
  for (int b = 1; b <= 1024; ++b) {
    c.batch_sizes.push_back(b);
  }
  c.default_batch_size = 512;
  c.seed = 9;
  c.pruning_rounds = 1;
  std::unique_ptr<BatchSizeSearch> policy = zeus::optimizer::make_batch_size_search(name, c);
  if (converge_first) {
    // A few results first, so that later trials are concurrent or bandit runs.
    for (int i = 0; i < 8; ++i) {
      const Decision d = policy->next();
      policy->report(d.trial_id, 10.0 + d.batch_size % 7, true);
    }
  }
  std::size_t largest_early = 0;
  std::size_t largest = 0;
  for (int i = 0; i < 1500; ++i) {
    const Decision d = policy->next();
    if (!abandon) {
      policy->fail(d.trial_id);
    }
    if (i % 50 != 49) {
      continue;
    }
    const std::size_t size = policy->save().size();
    largest = std::max(largest, size);
    if (i < 2 * zeus::optimizer::kMaxRunningTrials) {
      largest_early = largest;
    }
  }
  // Trial ids gain a digit or two: a few hundred bytes.
  EXPECT_LE(largest, largest_early + largest_early / 10) << name << " grows with crashed trials";
  return largest;
}

TEST(BatchSizeSearch, CrashedAndAbandonedTrialsDoNotGrowTheState) {
  for (const std::string& name : zeus::optimizer::batch_size_policy_names()) {
    for (const bool converge_first : {false, true}) {
      SCOPED_TRACE(name + (converge_first ? " after results" : " from the start"));
      // Failed runs leave nothing behind; of abandoned ones, kMaxRunningTrials at most are kept.
      const std::size_t failing = state_after_crashes(name, converge_first, false);
      const std::size_t abandoning = state_after_crashes(name, converge_first, true);
      EXPECT_LT(failing, abandoning);
    }
  }
}

TEST(BatchSizeSearch, PastTheCapTheOldestRunningTrialIsGivenUp) {
  for (const std::string& name : zeus::optimizer::batch_size_policy_names()) {
    SCOPED_TRACE(name);
    std::unique_ptr<BatchSizeSearch> policy =
        zeus::optimizer::make_batch_size_search(name, config());
    std::vector<Decision> dispatched;
    for (int i = 0; i <= zeus::optimizer::kMaxRunningTrials; ++i) {
      dispatched.push_back(policy->next());
    }
    // The first probe was given up: its batch size (b0) is probed again, and a late report or
    // failure of it is refused like one of a failed trial.
    EXPECT_FALSE(policy->running(dispatched.front().trial_id));
    EXPECT_TRUE(policy->running(dispatched[1].trial_id));
    EXPECT_TRUE(policy->running(dispatched.back().trial_id));
    const Decision again = policy->next();
    EXPECT_EQ(again.kind, TrialKind::kExploration);
    EXPECT_EQ(again.batch_size, 32);
    EXPECT_THROW(policy->report(dispatched.front().trial_id, 1.0, true), zeus::Error);
    EXPECT_THROW(policy->fail(dispatched.front().trial_id), zeus::Error);
    // A saved state keeps the cap.
    const auto restored = zeus::optimizer::restore_batch_size_search(policy->save());
    EXPECT_FALSE(restored->running(dispatched.front().trial_id));
    EXPECT_TRUE(restored->running(dispatched.back().trial_id));
  }
}

}  // namespace
