// BsoService without HTTP: its refusals carry domain kinds (the HTTP layer alone picks the
// status), its timestamps come from the injected clock, and job_state is a plain struct.
#include "server/service.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/store.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/optimizer/batch_size_search.hpp"

namespace {

using zeus::ErrorKind;
using zeus::server::BsoService;
using zeus::server::ServiceError;

zeus::bso::JobSpec job(const std::string& id) {
  zeus::bso::JobSpec spec;
  spec.job_id = id;
  spec.job_id_prefix = "svc";
  spec.max_power_w = 700.0;
  spec.number_of_gpus = 1;
  spec.gpu_model = "h100";
  spec.batch_sizes = {32, 64, 128};
  spec.default_batch_size = 64;
  spec.mab_seed = 7;
  return spec;
}

template <typename Call>
ErrorKind kind_of(Call call) {
  try {
    call();
  } catch (const ServiceError& error) {
    return error.kind();
  }
  ADD_FAILURE() << "no ServiceError";
  return ErrorKind::kUnknown;
}

struct Fixture {
  // 2023-11-14T22:13:20Z, in nanoseconds since the Unix epoch.
  std::shared_ptr<zeus::ManualClock> clock =
      std::make_shared<zeus::ManualClock>(1'700'000'000'000'000'000);
  std::unique_ptr<zeus::server::Store> store = zeus::server::open_store("sqlite://:memory:");
  BsoService service{*store, clock};
};

TEST(BsoService, RefusalsCarryDomainKinds) {
  Fixture f;
  f.service.register_job(job("svc-1"));
  zeus::bso::JobSpec other = job("svc-1");
  other.max_epochs = 7;
  EXPECT_EQ(kind_of([&] { f.service.register_job(other); }), ErrorKind::kAlreadyExists);
  EXPECT_EQ(kind_of([&] { f.service.next_batch_size("nope"); }), ErrorKind::kNotFound);
  zeus::bso::TrainingResult unknown;
  unknown.trial = {"svc-1", 64, 99};
  unknown.time_s = 1.0;
  unknown.energy_j = 1.0;
  unknown.current_epoch = 1;
  EXPECT_EQ(kind_of([&] { f.service.report(unknown); }), ErrorKind::kNotFound);
  EXPECT_EQ(kind_of([&] { f.service.end_trial({"svc-1", 64, 99}); }), ErrorKind::kNotFound);

  // A trial that ended without a report takes no more reports: a conflict with its state.
  const zeus::bso::TrialId trial = f.service.next_batch_size("svc-1");
  f.service.end_trial(trial);
  zeus::bso::TrainingResult late;
  late.trial = trial;
  late.time_s = 1.0;
  late.energy_j = 1.0;
  late.current_epoch = 1;
  EXPECT_EQ(kind_of([&] { f.service.report(late); }), ErrorKind::kConflict);
}

TEST(BsoService, TimestampsComeFromTheInjectedClock) {
  Fixture f;
  f.service.register_job(job("svc-2"));
  f.clock->advance_s(2.5);
  const zeus::bso::TrialId trial = f.service.next_batch_size("svc-2");
  f.clock->advance_s(1.0);
  f.service.end_trial(trial);

  const auto state = f.service.job_state("svc-2");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->job_id, "svc-2");
  EXPECT_EQ(state->created_ms, 1'700'000'000'000);
  ASSERT_EQ(state->trials.size(), 1u);
  EXPECT_EQ(state->trials[0].record.start_ms, 1'700'000'002'500);
  EXPECT_EQ(state->trials[0].record.end_ms, 1'700'000'003'500);
  EXPECT_EQ(state->trials[0].record.status, "Failed");
  EXPECT_FALSE(state->trials[0].cost.has_value());
  EXPECT_FALSE(f.service.job_state("nope").has_value());
}

// Issue 27: trials whose clients crashed without a word are given up past
// optimizer::kMaxRunningTrials; their rows are marked failed when their clients come back.
TEST(BsoService, TrialsGivenUpAsAbandonedAreMarkedFailedWhenTheirClientsComeBack) {
  Fixture f;
  f.service.register_job(job("svc-3"));
  std::vector<zeus::bso::TrialId> trials;
  for (int i = 0; i < zeus::optimizer::kMaxRunningTrials + 2; ++i) {
    trials.push_back(f.service.next_batch_size("svc-3"));
  }
  zeus::bso::TrainingResult late;
  late.trial = trials[0];
  late.time_s = 1.0;
  late.energy_j = 1.0;
  late.metric = 1.0;
  late.current_epoch = 1;
  EXPECT_EQ(kind_of([&] { f.service.report(late); }), ErrorKind::kConflict);
  f.service.end_trial(trials[1]);
  EXPECT_EQ(kind_of([&] { f.service.report(late); }), ErrorKind::kConflict);
  const auto state = f.service.job_state("svc-3");
  ASSERT_TRUE(state.has_value());
  ASSERT_EQ(state->trials.size(), trials.size());
  EXPECT_EQ(state->trials[0].record.status, "Failed");
  EXPECT_EQ(state->trials[1].record.status, "Failed");
  EXPECT_EQ(state->trials[2].record.status, "Dispatched");
  // The trials still running take their reports as before.
  late.trial = trials.back();
  EXPECT_NO_THROW(f.service.report(late));
}

}  // namespace
