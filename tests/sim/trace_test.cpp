#include "zeus/sim/trace.hpp"
#include "support/expect_error.hpp"
#include "support/shared_data.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "zeus/common/error.hpp"

namespace {

using zeus::ErrorKind;
using zeus::sim::load_trace;
using zeus::sim::TraceDirectory;
using zeus::sim::Workload;
using zeus::sim::WorkloadTrace;

using zeus::testing::TempDir;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

constexpr const char* kTrainHeader =
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
constexpr const char* kPowerHeader =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";

// A toy workload: batch sizes 8, 16, 32 in both traces, 64 only in the train trace, 128 only in
// the power trace; a second target metric and a second workload that must be filtered out.
const std::string kTrain = std::string(kTrainHeader) +
                           "toy,net,8,sgd,1e-3,2,0.5,4\n"
                           "toy,net,8,sgd,1e-3,1,0.50,3.0\n"
                           "toy,net,8,sgd,1e-3,1,0.6,9\n"
                           "toy,net,16,sgd,1e-3,1,0.5,2\n"
                           "toy,net,16,sgd,1e-3,2,0.5,nan\n"
                           "toy,net,16,sgd,1e-3,3,0.5,\n"
                           "toy,net,32,sgd,1e-3,1,0.5,NaN\n"
                           "toy,net,32,sgd,1e-3,2,0.5,7\n"
                           "toy,net,64,sgd,1e-3,1,0.5,5\n"
                           "other,net,16,sgd,1e-3,1,0.5,1\n";
const std::string kPower = std::string(kPowerHeader) +
                           "toy,net,8,sgd,200,10.0,150.0\n"
                           "toy,net,8,sgd,100,20.0,90.0\n"
                           "toy,net,8,sgd,150,12.5,120.0\n"
                           "toy,net,16,sgd,150,7.0,140.0\n"
                           "toy,net,16,sgd,200,6.0,180.0\n"
                           "toy,net,32,sgd,200,4.0,190.0\n"
                           "toy,net,128,sgd,200,3.0,195.0\n"
                           "other,net,16,sgd,300,1.0,250.0\n";

Workload toy(int b0 = 16, int max_epochs = 10) {
  return Workload{"toy", "net", "sgd", 0.5, max_epochs, b0, true};
}

void write_toy(const std::filesystem::path& dir, const std::string& train = kTrain,
               const std::string& power = kPower) {
  write_file(dir / "summary_train.csv", train);
  write_file(dir / "summary_power_toy1.csv", power);
}

using zeus::testing::expect_error;

std::filesystem::path shared_traces() {
  return zeus::testing::shared_data_dir() / "zeus-nsdi23-traces";
}

TEST(PaperWorkloads, AreTheSixPresets) {
  const auto& workloads = zeus::sim::paper_workloads();
  ASSERT_EQ(workloads.size(), 6u);
  struct Expected {
    const char* dataset;
    const char* network;
    const char* optimizer;
    double target;
    int max_epochs;
    int b0;
    bool higher_is_better;
  };
  const Expected expected[] = {
      {"librispeech", "deepspeech2", "adamw", 40.0, 16, 192, false},
      {"squad", "bert_base_uncased", "adamw", 84.0, 6, 32, true},
      {"sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128, true},
      {"imagenet", "resnet50", "adadelta", 0.65, 100, 256, true},
      {"cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024, true},
      {"movielens-1m", "ncf", "adam", 0.41, 100, 1024, true},
  };
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    SCOPED_TRACE(expected[i].dataset);
    EXPECT_EQ(workloads[i].dataset, expected[i].dataset);
    EXPECT_EQ(workloads[i].network, expected[i].network);
    EXPECT_EQ(workloads[i].optimizer, expected[i].optimizer);
    EXPECT_EQ(workloads[i].target_metric, expected[i].target);
    EXPECT_EQ(workloads[i].max_epochs, expected[i].max_epochs);
    EXPECT_EQ(workloads[i].default_batch_size, expected[i].b0);
    EXPECT_EQ(workloads[i].higher_is_better, expected[i].higher_is_better);
    EXPECT_EQ(&zeus::sim::paper_workload(expected[i].dataset), &workloads[i]);
  }
  expect_error(
      [] { zeus::sim::paper_workload("mnist"); }, ErrorKind::kInvalidArgument,
      {"mnist", "librispeech", "squad", "sentiment140", "imagenet", "cifar100", "movielens-1m"});
}

TEST(TraceGpus, ListsTheFourModels) {
  EXPECT_EQ(zeus::sim::trace_gpus(), (std::vector<std::string>{"v100", "a40", "rtx6000", "p100"}));
  for (const std::string& gpu : zeus::sim::trace_gpus()) {
    EXPECT_NO_THROW(zeus::sim::check_trace_gpu(gpu));
  }
  expect_error([] { zeus::sim::check_trace_gpu("h100"); }, ErrorKind::kInvalidArgument,
               {"h100", "v100", "a40", "rtx6000", "p100"});
}

TEST(LoadTrace, JoinsFiltersAndSorts) {
  TempDir dir;
  write_toy(dir.path());
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  EXPECT_EQ(trace.gpu, "toy1");
  EXPECT_EQ(trace.source, dir.path().string());
  EXPECT_EQ(trace.workload.default_batch_size, 16);
  EXPECT_EQ(trace.max_power_w, 300.0);  // the whole file's largest limit, other workloads included
  EXPECT_EQ(trace.power_limits_w, (std::vector<int>{100, 150, 200}));
  ASSERT_EQ(trace.batch_sizes.size(), 3u);
  EXPECT_EQ(trace.batch_sizes[0].batch_size, 8);
  EXPECT_EQ(trace.batch_sizes[1].batch_size, 16);
  EXPECT_EQ(trace.batch_sizes[2].batch_size, 32);
  // Runs in run order; "0.50" is the target 0.5, "3.0" is epoch 3; nan and empty mean never.
  using Epochs = std::vector<std::optional<int>>;
  EXPECT_EQ(trace.batch_sizes[0].target_epochs, (Epochs{3, 4}));
  EXPECT_EQ(trace.batch_sizes[1].target_epochs, (Epochs{2, std::nullopt, std::nullopt}));
  EXPECT_EQ(trace.batch_sizes[2].target_epochs, (Epochs{std::nullopt, 7}));
  // Power points ascending by limit.
  const auto& power = trace.batch_sizes[0].power;
  ASSERT_EQ(power.size(), 3u);
  EXPECT_EQ(power[0].power_limit_w, 100);
  EXPECT_EQ(power[0].time_per_epoch_s, 20.0);
  EXPECT_EQ(power[0].average_power_w, 90.0);
  EXPECT_EQ(power[0].energy_per_epoch_j(), 1800.0);
  EXPECT_EQ(power[1].power_limit_w, 150);
  EXPECT_EQ(power[2].power_limit_w, 200);
  EXPECT_EQ(trace.batch_sizes[0].at_power_limit(150)->time_per_epoch_s, 12.5);
  EXPECT_EQ(trace.batch_sizes[1].at_power_limit(100), nullptr);
  EXPECT_EQ(trace.at_batch_size(32).batch_size, 32);
  expect_error([&] { trace.at_batch_size(64); }, ErrorKind::kInvalidArgument, {"64", "8, 16, 32"});
  // The sizes in one trace only are named in a note; b0 needed no capping.
  ASSERT_EQ(trace.notes.size(), 1u);
  EXPECT_NE(trace.notes[0].find("train only 64"), std::string::npos) << trace.notes[0];
  EXPECT_NE(trace.notes[0].find("power only 128"), std::string::npos) << trace.notes[0];
}

TEST(LoadTrace, CapsTheDefaultBatchSize) {
  TempDir dir;
  write_toy(dir.path());
  const WorkloadTrace capped = load_trace(dir.path(), "toy1", toy(/*b0=*/24));
  EXPECT_EQ(capped.workload.default_batch_size, 16);
  ASSERT_EQ(capped.notes.size(), 2u);
  EXPECT_NE(capped.notes[1].find("b0 24"), std::string::npos) << capped.notes[1];
  EXPECT_NE(capped.notes[1].find("capped to 16"), std::string::npos) << capped.notes[1];
  EXPECT_NE(capped.notes[1].find("toy1"), std::string::npos) << capped.notes[1];
  EXPECT_EQ(load_trace(dir.path(), "toy1", toy(/*b0=*/1000)).workload.default_batch_size, 32);
  expect_error([&] { load_trace(dir.path(), "toy1", toy(/*b0=*/4)); }, ErrorKind::kInvalidArgument,
               {"default batch size 4", "8, 16, 32"});
}

TEST(LoadTrace, DefaultBatchSizeMustReachTheTarget) {
  TempDir dir;
  write_toy(dir.path());
  // b0 = 32: one run never converges, the other needs 7 epochs.
  EXPECT_NO_THROW(load_trace(dir.path(), "toy1", toy(32, /*max_epochs=*/7)));
  expect_error([&] { load_trace(dir.path(), "toy1", toy(32, /*max_epochs=*/6)); },
               ErrorKind::kInvalidArgument,
               {"default batch size 32", "toy/net/sgd", "toy1", "never reaches", "6 epochs"});
  // When no batch size reaches the target at all, that is what the error says (another b0
  // would not help).
  std::string never = std::string(kTrainHeader) + "toy,net,16,sgd,1e-3,1,0.5,nan\n";
  write_toy(dir.path(), never);
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"no batch size", "reaches the target metric 0.5", "in any run",
                "no run of it reaches any target"});
  // b0 alone never reaches it: the b0 error, naming its runs.
  never += "toy,net,8,sgd,1e-3,1,0.5,3\n";
  write_toy(dir.path(), never);
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"never reaches", "any of its 1 runs"});
}

TEST(LoadTrace, MissingFilesAreNotFound) {
  TempDir dir;
  expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kNotFound,
               {"summary_train.csv"});
  write_toy(dir.path());
  expect_error([&] { load_trace(dir.path(), "v100", toy()); }, ErrorKind::kNotFound,
               {"summary_power_v100.csv"});
  expect_error([&] { load_trace(dir.path(), "../toy1", toy()); }, ErrorKind::kInvalidArgument,
               {"../toy1"});
}

TEST(LoadTrace, MissingWorkloadNamesWorkloadAndGpu) {
  TempDir dir;
  write_toy(dir.path());
  Workload absent = toy();
  absent.dataset = "nothing";
  expect_error([&] { load_trace(dir.path(), "toy1", absent); }, ErrorKind::kInvalidArgument,
               {"nothing/net/sgd", "toy1", "summary_train.csv", "other/net/sgd, toy/net/sgd"});
  Workload other_target = toy();
  other_target.target_metric = 0.55;
  expect_error([&] { load_trace(dir.path(), "toy1", other_target); }, ErrorKind::kInvalidArgument,
               {"toy/net/sgd", "toy1", "0.55", "0.5 0.6"});
  // In the train trace, not in the power trace.
  write_toy(dir.path(), kTrain + "lonely,net,16,sgd,1e-3,1,0.5,1\n");
  Workload lonely = toy();
  lonely.dataset = "lonely";
  expect_error([&] { load_trace(dir.path(), "toy1", lonely); }, ErrorKind::kInvalidArgument,
               {"lonely/net/sgd", "toy1", "summary_power_toy1.csv"});
  // In both, but no batch size in common.
  write_toy(dir.path(), kTrain + "lonely,net,16,sgd,1e-3,1,0.5,1\n",
            kPower + "lonely,net,32,sgd,200,1.0,100.0\n");
  expect_error([&] { load_trace(dir.path(), "toy1", lonely); }, ErrorKind::kInvalidArgument,
               {"lonely/net/sgd", "no batch size is in both"});
}

TEST(LoadTrace, MalformedFilesNameFileAndLine) {
  TempDir dir;
  const auto expect_train_error = [&](const std::string& train,
                                      const std::vector<std::string>& fragments) {
    write_toy(dir.path(), train);
    std::vector<std::string> all = fragments;
    all.push_back((dir.path() / "summary_train.csv").string() + ":");
    expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument, all);
  };
  expect_train_error("dataset,network,batch_size,optimizer,run,target_metric,target_epoch\n",
                     {"summary_train.csv:1:", "learning_rate"});
  expect_train_error("", {"summary_train.csv:1:", "empty"});
  expect_train_error(std::string(kTrainHeader) +
                         "toy,net,16,sgd,1e-3,1,0.5,2\n"
                         "toy,net,16,sgd,1e-3,2,0.5\n",
                     {"summary_train.csv:3:", "expected 8 fields, found 7"});
  expect_train_error(std::string(kTrainHeader) + "\ntoy,net,x16,sgd,1e-3,1,0.5,2\n",
                     {"summary_train.csv:3:", "batch_size", "x16"});
  expect_train_error(std::string(kTrainHeader) + "toy,net,16,sgd,1e-3,1,0.5,2.5\n",
                     {"summary_train.csv:2:", "target_epoch", "2.5"});
  expect_train_error(std::string(kTrainHeader) + "toy,net,16,sgd,1e-3,1,0.5,0\n",
                     {"summary_train.csv:2:", "target_epoch"});
  expect_train_error(std::string(kTrainHeader) + "toy,net,16,sgd,1e-3,1,high,2\n",
                     {"summary_train.csv:2:", "target_metric", "high"});
  expect_train_error(std::string(kTrainHeader) + "toy,net,16,sgd,1e-3,one,0.5,2\n",
                     {"summary_train.csv:2:", "run"});
  expect_train_error(std::string(kTrainHeader) + ",net,16,sgd,1e-3,1,0.5,2\n",
                     {"summary_train.csv:2:", "must not be empty"});
  expect_train_error(std::string(kTrainHeader) +
                         "toy,net,16,sgd,1e-3,1,0.5,2\n"
                         "toy,net,16,sgd,1e-3,1,0.5,3\n",
                     {"summary_train.csv:3:", "run 1", "twice"});

  const auto expect_power_error = [&](const std::string& power,
                                      const std::vector<std::string>& fragments) {
    write_toy(dir.path(), kTrain, power);
    std::vector<std::string> all = fragments;
    all.push_back((dir.path() / "summary_power_toy1.csv").string() + ":");
    expect_error([&] { load_trace(dir.path(), "toy1", toy()); }, ErrorKind::kInvalidArgument, all);
  };
  expect_power_error("dataset,network,batch_size,optimizer,power_limit,time,average_power\n",
                     {"summary_power_toy1.csv:1:", "time_per_epoch"});
  expect_power_error(std::string(kPowerHeader) + "toy,net,16,sgd,200,abc,180.0\n",
                     {"summary_power_toy1.csv:2:", "time_per_epoch", "abc"});
  expect_power_error(std::string(kPowerHeader) + "toy,net,16,sgd,200,6.0,-1\n",
                     {"summary_power_toy1.csv:2:", "average_power"});
  expect_power_error(std::string(kPowerHeader) + "toy,net,16,sgd,200.5,6.0,180.0\n",
                     {"summary_power_toy1.csv:2:", "power_limit"});
  expect_power_error(std::string(kPowerHeader) + "toy,net,16,sgd,200,6.0,180.0,1\n",
                     {"summary_power_toy1.csv:2:", "expected 7 fields, found 8"});
  expect_power_error(std::string(kPowerHeader) +
                         "toy,net,16,sgd,200,6.0,180.0\n"
                         "toy,net,16,sgd,200,6.5,185.0\n",
                     {"summary_power_toy1.csv:3:", "200 W", "twice"});
  expect_power_error(std::string(kPowerHeader), {"no rows"});
}

TEST(LoadTrace, ToleratesColumnOrderCarriageReturnsAndSpaces) {
  TempDir dir;
  write_toy(dir.path(),
            "run,target_epoch,dataset,network,batch_size,optimizer,learning_rate,target_metric\r\n"
            "1, 3 ,toy,net,16,sgd,1e-3,5e-1\r\n"
            "\r\n",
            std::string(kPowerHeader) + "toy,net,16.0,sgd,200,6.0,180.0\r\n");
  const WorkloadTrace trace = load_trace(dir.path(), "toy1", toy());
  ASSERT_EQ(trace.batch_sizes.size(), 1u);
  EXPECT_EQ(trace.batch_sizes[0].target_epochs, (std::vector<std::optional<int>>{3}));
  EXPECT_EQ(trace.batch_sizes[0].power.at(0).average_power_w, 180.0);
}

TEST(TraceDirectory, ParsesEachFileOnce) {
  TempDir dir;
  write_toy(dir.path());
  const TraceDirectory traces(dir.path());
  const WorkloadTrace first = traces.load("toy1", toy());
  // The files are gone, yet the directory still answers from what it parsed.
  std::filesystem::remove(dir.path() / "summary_train.csv");
  std::filesystem::remove(dir.path() / "summary_power_toy1.csv");
  const WorkloadTrace second = traces.load("toy1", toy(/*b0=*/32));
  EXPECT_EQ(second.batch_sizes.size(), first.batch_sizes.size());
  EXPECT_EQ(second.workload.default_batch_size, 32);
  const TraceDirectory copy = traces;  // copies share the cache
  EXPECT_NO_THROW(copy.load("toy1", toy()));
  expect_error([&] { TraceDirectory(dir.path()).load("toy1", toy()); }, ErrorKind::kNotFound,
               {"summary_train.csv"});
}

// ---- The published traces (skipped when ../shared/data is absent) ----

TEST(RealTraces, AllCellsLoad) {
  const std::filesystem::path dir = shared_traces();
  if (!std::filesystem::exists(dir / "summary_train.csv")) {
    GTEST_SKIP() << "the public Zeus traces are not at " << dir.string()
                 << " (../shared/data next to the project); skipping";
  }
  const std::map<std::string, double> max_power_w = {
      {"v100", 250.0}, {"a40", 300.0}, {"rtx6000", 260.0}, {"p100", 250.0}};
  const std::map<std::pair<std::string, std::string>, int> capped_b0 = {
      {{"librispeech", "rtx6000"}, 128}, {{"librispeech", "p100"}, 72}, {{"squad", "p100"}, 24},
      {{"sentiment140", "p100"}, 64},    {{"imagenet", "p100"}, 128},
  };
  const auto start = std::chrono::steady_clock::now();
  const TraceDirectory traces(dir);
  std::vector<WorkloadTrace> loaded;
  for (const std::string& gpu : zeus::sim::trace_gpus()) {
    for (const Workload& workload : zeus::sim::paper_workloads()) {
      loaded.push_back(traces.load(gpu, workload));
    }
  }
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(elapsed_ms, 2000.0);  // a few ms in a release build
  ASSERT_EQ(loaded.size(), 24u);
  for (const WorkloadTrace& trace : loaded) {
    SCOPED_TRACE(trace.workload.dataset + " on " + trace.gpu);
    EXPECT_EQ(trace.source, dir.string());
    EXPECT_EQ(trace.max_power_w, max_power_w.at(trace.gpu));
    ASSERT_FALSE(trace.batch_sizes.empty());
    ASSERT_FALSE(trace.power_limits_w.empty());
    EXPECT_TRUE(std::is_sorted(trace.power_limits_w.begin(), trace.power_limits_w.end()));
    EXPECT_EQ(trace.power_limits_w.back(), static_cast<int>(trace.max_power_w));
    for (std::size_t i = 0; i < trace.batch_sizes.size(); ++i) {
      const auto& entry = trace.batch_sizes[i];
      if (i > 0) {
        EXPECT_LT(trace.batch_sizes[i - 1].batch_size, entry.batch_size);
      }
      EXPECT_FALSE(entry.target_epochs.empty());
      ASSERT_FALSE(entry.power.empty());
      for (std::size_t j = 1; j < entry.power.size(); ++j) {
        EXPECT_LT(entry.power[j - 1].power_limit_w, entry.power[j].power_limit_w);
      }
    }
    const Workload& preset = zeus::sim::paper_workload(trace.workload.dataset);
    const auto cap = capped_b0.find({trace.workload.dataset, trace.gpu});
    if (cap == capped_b0.end()) {
      EXPECT_EQ(trace.workload.default_batch_size, preset.default_batch_size);
    } else {
      EXPECT_EQ(trace.workload.default_batch_size, cap->second);
      const bool noted = std::any_of(trace.notes.begin(), trace.notes.end(), [&](const auto& n) {
        return n.find("capped to " + std::to_string(cap->second)) != std::string::npos;
      });
      EXPECT_TRUE(noted);
    }
    const auto& b0 = trace.at_batch_size(trace.workload.default_batch_size);
    EXPECT_TRUE(std::any_of(b0.target_epochs.begin(), b0.target_epochs.end(), [&](auto epoch) {
      return epoch && *epoch <= trace.workload.max_epochs;
    }));
    EXPECT_NE(b0.at_power_limit(static_cast<int>(trace.max_power_w)), nullptr);
  }
  // Spot checks against the files: the V100 cifar100 trace also holds adam rows (filtered out).
  const WorkloadTrace cifar = traces.load("v100", zeus::sim::paper_workload("cifar100"));
  const auto& b1024 = cifar.at_batch_size(1024);
  EXPECT_EQ(b1024.power.size(), 7u);
  EXPECT_EQ(b1024.target_epochs.size(), 10u);
  EXPECT_EQ(
      load_trace(dir, "p100", zeus::sim::paper_workload("librispeech")).workload.default_batch_size,
      72);
}

}  // namespace
