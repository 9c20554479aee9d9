#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/trace.hpp"

namespace {

using zeus::ErrorKind;
using zeus::sim::builtin_trace;
using zeus::sim::paper_workloads;
using zeus::sim::trace_gpus;
using zeus::sim::Workload;
using zeus::sim::WorkloadTrace;

using zeus::testing::expect_error;

// Expected Zeus cost (eta = 0.5) of running `batch_size` at `point` every time, over the runs that
// reach the target within max_epochs; infinity when some run does not.
struct Expectation {
  double cost = std::numeric_limits<double>::infinity();
  double energy_j = 0.0;
};

Expectation expect(const WorkloadTrace& trace, const zeus::sim::BatchSizeTrace& entry,
                   const zeus::sim::PowerPoint& point) {
  double epochs = 0.0;
  for (const auto& epoch : entry.target_epochs) {
    if (!epoch || *epoch > trace.workload.max_epochs) {
      return {};
    }
    epochs += *epoch;
  }
  epochs /= static_cast<double>(entry.target_epochs.size());
  const double eta = 0.5;
  return {epochs * (eta * point.energy_per_epoch_j() +
                    (1.0 - eta) * trace.max_power_w * point.time_per_epoch_s),
          epochs * point.energy_per_epoch_j()};
}

TEST(BuiltinTrace, IsDeterministic) {
  for (const std::string& gpu : trace_gpus()) {
    for (const Workload& workload : paper_workloads()) {
      const WorkloadTrace a = builtin_trace(gpu, workload);
      const WorkloadTrace b = builtin_trace(gpu, workload);
      ASSERT_EQ(a.batch_sizes.size(), b.batch_sizes.size());
      EXPECT_EQ(a.power_limits_w, b.power_limits_w);
      EXPECT_EQ(a.notes, b.notes);
      for (std::size_t i = 0; i < a.batch_sizes.size(); ++i) {
        EXPECT_EQ(a.batch_sizes[i].batch_size, b.batch_sizes[i].batch_size);
        EXPECT_EQ(a.batch_sizes[i].target_epochs, b.batch_sizes[i].target_epochs);
        ASSERT_EQ(a.batch_sizes[i].power.size(), b.batch_sizes[i].power.size());
        for (std::size_t j = 0; j < a.batch_sizes[i].power.size(); ++j) {
          EXPECT_EQ(a.batch_sizes[i].power[j].power_limit_w,
                    b.batch_sizes[i].power[j].power_limit_w);
          EXPECT_EQ(a.batch_sizes[i].power[j].time_per_epoch_s,
                    b.batch_sizes[i].power[j].time_per_epoch_s);
          EXPECT_EQ(a.batch_sizes[i].power[j].average_power_w,
                    b.batch_sizes[i].power[j].average_power_w);
        }
      }
    }
  }
}

TEST(BuiltinTrace, CoversEveryWorkloadOnEveryGpu) {
  const std::map<std::string, std::vector<int>> limits_w = {
      {"v100", {100, 125, 150, 175, 200, 225, 250}},
      {"a40", {100, 125, 150, 175, 200, 225, 250, 275, 300}},
      {"rtx6000", {100, 125, 150, 175, 200, 225, 250, 260}},
      {"p100", {125, 150, 175, 200, 225, 250}},
  };
  for (const std::string& gpu : trace_gpus()) {
    for (const Workload& workload : paper_workloads()) {
      SCOPED_TRACE(workload.dataset + " on " + gpu);
      const WorkloadTrace trace = builtin_trace(gpu, workload);
      EXPECT_EQ(trace.source, "builtin");
      EXPECT_EQ(trace.gpu, gpu);
      EXPECT_EQ(trace.workload.dataset, workload.dataset);
      EXPECT_EQ(trace.power_limits_w, limits_w.at(gpu));
      EXPECT_EQ(trace.max_power_w, limits_w.at(gpu).back());
      EXPECT_TRUE(trace.notes.empty());
      ASSERT_GE(trace.batch_sizes.size(), 5u);
      for (std::size_t i = 0; i < trace.batch_sizes.size(); ++i) {
        const auto& entry = trace.batch_sizes[i];
        if (i > 0) {
          EXPECT_LT(trace.batch_sizes[i - 1].batch_size, entry.batch_size);
        }
        EXPECT_GE(entry.target_epochs.size(), 4u);
        EXPECT_LE(entry.target_epochs.size(), 10u);
        ASSERT_EQ(entry.power.size(), trace.power_limits_w.size());
        for (std::size_t j = 0; j < entry.power.size(); ++j) {
          EXPECT_EQ(entry.power[j].power_limit_w, trace.power_limits_w[j]);
        }
      }
      // b0 is in the model (no capping) and reaches the target in most runs.
      EXPECT_EQ(trace.workload.default_batch_size, workload.default_batch_size);
      const auto& b0 = trace.at_batch_size(workload.default_batch_size);
      const auto reached =
          std::count_if(b0.target_epochs.begin(), b0.target_epochs.end(),
                        [&](const auto& epoch) { return epoch && *epoch <= workload.max_epochs; });
      EXPECT_GE(static_cast<double>(reached), 0.8 * static_cast<double>(b0.target_epochs.size()));
    }
  }
}

TEST(BuiltinTrace, PowerAndTimeHaveThePublishedShape) {
  for (const std::string& gpu : trace_gpus()) {
    for (const Workload& workload : paper_workloads()) {
      SCOPED_TRACE(workload.dataset + " on " + gpu);
      const WorkloadTrace trace = builtin_trace(gpu, workload);
      const int max_limit_w = static_cast<int>(trace.max_power_w);
      for (std::size_t i = 0; i < trace.batch_sizes.size(); ++i) {
        const auto& entry = trace.batch_sizes[i];
        const auto* top = entry.at_power_limit(max_limit_w);
        ASSERT_NE(top, nullptr);
        if (i > 0) {
          // Larger batches: shorter epochs (throughput saturates), more power.
          const auto* smaller = trace.batch_sizes[i - 1].at_power_limit(max_limit_w);
          EXPECT_LT(top->time_per_epoch_s, smaller->time_per_epoch_s);
          EXPECT_GE(top->average_power_w + 1e-9, smaller->average_power_w);
        }
        for (std::size_t j = 0; j < entry.power.size(); ++j) {
          const auto& point = entry.power[j];
          EXPECT_GT(point.time_per_epoch_s, 0.0);
          EXPECT_GT(point.average_power_w, 0.0);
          EXPECT_LE(point.average_power_w, point.power_limit_w + 1e-6);
          if (j > 0) {
            // A lower limit: never faster, never more power.
            const auto& lower = entry.power[j - 1];
            EXPECT_GE(lower.time_per_epoch_s, point.time_per_epoch_s);
            EXPECT_LE(lower.average_power_w, point.average_power_w + 1e-9);
          }
        }
      }
      // Compute-heavy configurations slow down under the lowest limit.
      const auto& largest = trace.batch_sizes.back();
      if (largest.power.back().average_power_w > trace.power_limits_w.front() + 1.0) {
        EXPECT_GT(largest.power.front().time_per_epoch_s, largest.power.back().time_per_epoch_s);
      }
    }
  }
}

TEST(BuiltinTrace, EpochsToTargetAreUShaped) {
  for (const Workload& workload : paper_workloads()) {
    SCOPED_TRACE(workload.dataset);
    const WorkloadTrace trace = builtin_trace("v100", workload);
    // Mean epochs over converging runs; a batch size with no converging run counts as infinite.
    std::vector<double> mean_epochs;
    for (const auto& entry : trace.batch_sizes) {
      double sum = 0.0;
      int count = 0;
      for (const auto& epoch : entry.target_epochs) {
        if (epoch) {
          sum += *epoch;
          ++count;
        }
      }
      mean_epochs.push_back(count == 0 ? std::numeric_limits<double>::infinity() : sum / count);
    }
    const auto best = std::min_element(mean_epochs.begin(), mean_epochs.end());
    EXPECT_GT(mean_epochs.front(), *best - 1e-9);
    EXPECT_GT(mean_epochs.back(), *best);
    // Convergence is a property of the workload, not of the GPU.
    const WorkloadTrace other = builtin_trace("a40", workload);
    for (std::size_t i = 0; i < trace.batch_sizes.size(); ++i) {
      EXPECT_EQ(trace.batch_sizes[i].target_epochs, other.batch_sizes[i].target_epochs);
    }
  }
  // The extremes: some batch sizes never reach the target.
  const auto never = [](const std::string& dataset, int batch_size) {
    const auto trace = builtin_trace("v100", zeus::sim::paper_workload(dataset));
    const auto& epochs = trace.at_batch_size(batch_size).target_epochs;
    return std::count(epochs.begin(), epochs.end(), std::nullopt);
  };
  EXPECT_EQ(never("imagenet", 64), 5);  // too small
  EXPECT_EQ(never("movielens-1m", 16), 5);
  EXPECT_GE(never("cifar100", 4096), 3);  // too large
}

TEST(BuiltinTrace, OracleBeatsDefaultWithinThePapersRange) {
  bool some_oracle_off_b0 = false;
  bool some_oracle_below_max_power = false;
  for (const std::string& gpu : trace_gpus()) {
    for (const Workload& workload : paper_workloads()) {
      SCOPED_TRACE(workload.dataset + " on " + gpu);
      const WorkloadTrace trace = builtin_trace(gpu, workload);
      const auto& b0 = trace.at_batch_size(workload.default_batch_size);
      const Expectation fallback =
          expect(trace, b0, *b0.at_power_limit(static_cast<int>(trace.max_power_w)));
      ASSERT_TRUE(std::isfinite(fallback.cost));
      Expectation best;
      int best_batch_size = 0;
      int best_limit_w = 0;
      for (const auto& entry : trace.batch_sizes) {
        for (const auto& point : entry.power) {
          const Expectation candidate = expect(trace, entry, point);
          if (candidate.cost < best.cost) {
            best = candidate;
            best_batch_size = entry.batch_size;
            best_limit_w = point.power_limit_w;
          }
        }
      }
      const double saving_pct = 100.0 * (1.0 - best.energy_j / fallback.energy_j);
      EXPECT_GE(saving_pct, 15.0);
      EXPECT_LE(saving_pct, 80.0);
      some_oracle_off_b0 |= best_batch_size != workload.default_batch_size;
      some_oracle_below_max_power |= best_limit_w < static_cast<int>(trace.max_power_w);
    }
  }
  EXPECT_TRUE(some_oracle_off_b0);
  EXPECT_TRUE(some_oracle_below_max_power);
}

TEST(BuiltinTrace, Errors) {
  const Workload& cifar = zeus::sim::paper_workload("cifar100");
  expect_error([&] { builtin_trace("h100", cifar); }, ErrorKind::kInvalidArgument,
               {"h100", "v100"});
  Workload unknown = cifar;
  unknown.network = "resnet18";
  expect_error([&] { builtin_trace("v100", unknown); }, ErrorKind::kInvalidArgument,
               {"cifar100/resnet18/adadelta", "cifar100/shufflenetv2/adadelta"});
  // Any target the model's learning curve reaches is simulated (target_metric_test.cpp); one
  // beyond its asymptote is refused, naming the asymptote.
  Workload other_target = cifar;
  other_target.target_metric = 0.7;
  expect_error([&] { builtin_trace("v100", other_target); }, ErrorKind::kInvalidArgument,
               {"no batch size", "0.7", "level off at 0.68"});
  Workload between = cifar;
  between.default_batch_size = 100;
  const WorkloadTrace capped = builtin_trace("v100", between);
  EXPECT_EQ(capped.workload.default_batch_size, 64);
  ASSERT_EQ(capped.notes.size(), 1u);
  EXPECT_NE(capped.notes[0].find("capped to 64"), std::string::npos) << capped.notes[0];
  Workload tiny = cifar;
  tiny.default_batch_size = 2;
  expect_error([&] { builtin_trace("v100", tiny); }, ErrorKind::kInvalidArgument,
               {"default batch size 2"});
  Workload diverging = cifar;
  diverging.default_batch_size = 4096;
  expect_error([&] { builtin_trace("v100", diverging); }, ErrorKind::kInvalidArgument,
               {"never reaches"});
}

}  // namespace
