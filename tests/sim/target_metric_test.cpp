// Other target metrics than the paper's (`zeus sim --target-metric`): the built-in models'
// learning curves, the trace files' per-target rows, the errors for unreachable targets, and the
// cell's target_metric and final_expected_cost.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

namespace fs = std::filesystem;
using zeus::ErrorKind;
using zeus::sim::builtin_trace;
using zeus::sim::paper_workload;
using zeus::sim::Workload;
using zeus::sim::WorkloadTrace;
using zeus::testing::expect_error;

Workload with_target(const std::string& dataset, double target) {
  Workload workload = paper_workload(dataset);
  workload.target_metric = target;
  return workload;
}

// An epoch count with "never" as infinity, for comparisons along a learning curve.
double epochs_or_infinity(const std::optional<int>& epoch) {
  return epoch ? *epoch : std::numeric_limits<double>::infinity();
}

double mean_epochs(const zeus::sim::BatchSizeTrace& batch) {
  double sum = 0.0;
  for (const auto& epoch : batch.target_epochs) {
    sum += epochs_or_infinity(epoch);
  }
  return sum / static_cast<double>(batch.target_epochs.size());
}

TEST(BuiltinTargets, ThePapersTargetIsTheCalibratedModel) {
  for (const Workload& workload : zeus::sim::paper_workloads()) {
    SCOPED_TRACE(workload.dataset);
    const WorkloadTrace paper = builtin_trace("v100", workload);
    const WorkloadTrace same =
        builtin_trace("v100", with_target(workload.dataset, workload.target_metric));
    ASSERT_EQ(paper.batch_sizes.size(), same.batch_sizes.size());
    for (std::size_t i = 0; i < paper.batch_sizes.size(); ++i) {
      EXPECT_EQ(paper.batch_sizes[i].target_epochs, same.batch_sizes[i].target_epochs);
    }
  }
}

// Each run follows one learning curve: it reaches an easier target no later, and a harder one no
// sooner, than the paper's.
TEST(BuiltinTargets, EveryRunReachesEasierTargetsFirst) {
  struct Case {
    const char* dataset;
    double easier;
    double harder;
  };
  for (const Case& c : {Case{"librispeech", 45.0, 38.0}, Case{"squad", 83.0, 84.5},
                        Case{"sentiment140", 0.83, 0.845}, Case{"imagenet", 0.6, 0.67},
                        Case{"cifar100", 0.5, 0.605}, Case{"movielens-1m", 0.4, 0.415}}) {
    SCOPED_TRACE(c.dataset);
    const WorkloadTrace paper = builtin_trace("a40", paper_workload(c.dataset));
    const WorkloadTrace easier = builtin_trace("a40", with_target(c.dataset, c.easier));
    const WorkloadTrace harder = builtin_trace("a40", with_target(c.dataset, c.harder));
    EXPECT_EQ(easier.workload.target_metric, c.easier);
    bool some_easier_faster = false;
    bool some_harder_slower = false;
    for (std::size_t i = 0; i < paper.batch_sizes.size(); ++i) {
      for (std::size_t run = 0; run < paper.batch_sizes[i].target_epochs.size(); ++run) {
        const double at_paper = epochs_or_infinity(paper.batch_sizes[i].target_epochs[run]);
        const double at_easier = epochs_or_infinity(easier.batch_sizes[i].target_epochs[run]);
        const double at_harder = epochs_or_infinity(harder.batch_sizes[i].target_epochs[run]);
        EXPECT_LE(at_easier, at_paper);
        EXPECT_GE(at_harder, at_paper);
        some_easier_faster |= at_easier < at_paper;
        some_harder_slower |= at_harder > at_paper;
      }
    }
    EXPECT_TRUE(some_easier_faster);
    EXPECT_TRUE(some_harder_slower);
  }
}

// The documented curve (docs/workload-models.md): cifar100 levels off at 0.68 with exponent 0.9,
// so at 0.5 its best batch size (32) needs (0.08 / 0.18)^0.9 = 0.48 times its 16.5 epochs to 0.6.
TEST(BuiltinTargets, FollowTheDocumentedLearningCurve) {
  const WorkloadTrace trace = builtin_trace("v100", with_target("cifar100", 0.5));
  EXPECT_NEAR(mean_epochs(trace.at_batch_size(32)), 16.5 * std::pow(0.08 / 0.18, 0.9), 0.6);
  // Large batches level off lower (the generalisation gap), so an easy target discounts their
  // epochs more than those of the best batch size.
  const WorkloadTrace paper = builtin_trace("v100", paper_workload("cifar100"));
  const double best_ratio =
      mean_epochs(trace.at_batch_size(32)) / mean_epochs(paper.at_batch_size(32));
  const double large_ratio =
      mean_epochs(trace.at_batch_size(2048)) / mean_epochs(paper.at_batch_size(2048));
  EXPECT_LT(large_ratio, best_ratio);
}

TEST(BuiltinTargets, UnreachableOrInvalidTargetsAreRefused) {
  expect_error([] { builtin_trace("v100", with_target("cifar100", 0.7)); },
               ErrorKind::kInvalidArgument, {"no batch size", "0.7", "level off at 0.68"});
  expect_error([] { builtin_trace("v100", with_target("librispeech", 27.0)); },
               ErrorKind::kInvalidArgument, {"no batch size", "27", "level off at 28"});
  // Some batch size reaches it, b0 does not.
  expect_error([] { builtin_trace("v100", with_target("cifar100", 0.65)); },
               ErrorKind::kInvalidArgument, {"default batch size 1024", "0.65"});
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    expect_error([&] { builtin_trace("v100", with_target("cifar100", bad)); },
                 ErrorKind::kInvalidArgument, {"finite"});
  }
  Workload flipped = paper_workload("librispeech");
  flipped.higher_is_better = true;
  expect_error([&] { builtin_trace("v100", flipped); }, ErrorKind::kInvalidArgument,
               {"lower-is-better"});
}

// ---- Trace files: the rows at the requested target ----

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

class TraceTargets : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_.path() / "summary_train.csv",
               "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
               "toy,net,8,sgd,1e-3,1,0.5,2\n"
               "toy,net,8,sgd,1e-3,1,0.6,5\n"
               "toy,net,8,sgd,1e-3,1,0.7,nan\n"
               "toy,net,8,sgd,1e-3,1,0.8,nan\n"
               "toy,net,16,sgd,1e-3,1,0.5,3\n"
               "toy,net,16,sgd,1e-3,1,0.6,4\n"
               "toy,net,16,sgd,1e-3,1,0.7,9\n"
               "toy,net,16,sgd,1e-3,1,0.8,nan\n");
    write_file(dir_.path() / "summary_power_v100.csv",
               "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
               "toy,net,8,sgd,200,10.0,150.0\n"
               "toy,net,16,sgd,200,6.0,180.0\n");
  }
  WorkloadTrace load(double target) const {
    return zeus::sim::load_trace(dir_.path(), "v100", {"toy", "net", "sgd", target, 10, 8, true});
  }
  zeus::testing::TempDir dir_;
};

TEST_F(TraceTargets, TheRowsAtTheTargetAreUsed) {
  EXPECT_EQ(load(0.5).at_batch_size(8).target_epochs, std::vector<std::optional<int>>{2});
  EXPECT_EQ(load(0.6).at_batch_size(16).target_epochs, std::vector<std::optional<int>>{4});
}

TEST_F(TraceTargets, UnreachableTargetsNameWhatToDo) {
  // b0 (8) never reaches 0.7; 16 does.
  expect_error([&] { load(0.7); }, ErrorKind::kInvalidArgument, {"default batch size 8", "0.7"});
  // Nothing reaches 0.8: the hardest target reached is named.
  expect_error([&] { load(0.8); }, ErrorKind::kInvalidArgument,
               {"no batch size", "0.8", "hardest target some run reaches is 0.7"});
  // A target the file does not record: the recorded ones are listed.
  expect_error([&] { load(0.65); }, ErrorKind::kInvalidArgument,
               {"no rows at target_metric 0.65", "0.5 0.6 0.7 0.8"});
}

// ---- The cell reports the target and what its final configuration costs ----

TEST(CellTargets, ReportTheTargetAndTheFinalConfigurationsExpectedCost) {
  const WorkloadTrace trace = builtin_trace("v100", with_target("squad", 83.5));
  zeus::sim::SimulationConfig config;
  const auto cell = zeus::sim::run_cell(trace, zeus::sim::PolicyKind::kZeus, config, {1, 2, 3}, 1);
  EXPECT_EQ(cell.target_metric, 83.5);
  const zeus::sim::Oracle final_config =
      zeus::sim::expected_fixed(trace, cell.final_batch_size, cell.final_power_limit_w, config.eta);
  EXPECT_DOUBLE_EQ(cell.final_expected_cost, final_config.expected_cost);
  const zeus::sim::Oracle oracle = zeus::sim::compute_oracle(trace, config.eta);
  EXPECT_GE(cell.final_expected_cost, oracle.expected_cost);
  EXPECT_GE(cell.final_expected_cost_mean, oracle.expected_cost * (1.0 - 1e-12));
  const auto oracle_cell =
      zeus::sim::run_cell(trace, zeus::sim::PolicyKind::kOracle, config, {1, 2}, 1);
  EXPECT_DOUBLE_EQ(oracle_cell.final_expected_cost, oracle.expected_cost);
  EXPECT_DOUBLE_EQ(oracle_cell.final_expected_cost_mean, oracle.expected_cost);
}

}  // namespace
