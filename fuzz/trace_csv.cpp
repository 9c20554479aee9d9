// The simulator's trace files (summary_train.csv and summary_power_<gpu>.csv, src/sim/trace.cpp)
// -> TraceDirectory::load for one paper workload on "v100", then the oracle and a few recurrences
// of the Zeus policy on what it loaded. The first byte picks what the rest is:
//   bits 0-1: 0 the train file (the power file is a valid one written here), 1 the power file
//             (with a valid train file), 2 or 3 both, the train file, NUL, the power file;
//   bits 2-4: the workload, an index into paper_workloads() (modulo 6).
// The valid partner files give the fuzzer something to join its file with, so that it reaches
// the checks across the two files (batch sizes in one only, duplicate runs and power limits, b0).
//
// Bad files may only be a zeus::Error. A trace that loads holds what trace.hpp says: batch sizes
// and power limits ascending and unique, finite positive measurements, b0 among the batch sizes
// and converging; the simulation on it either runs or throws zeus::Error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

namespace fs = std::filesystem;
namespace sim = zeus::sim;

constexpr std::string_view kGpu = "v100";

std::string names(const sim::Workload& w, int batch_size) {
  return w.dataset + "," + w.network + "," + std::to_string(batch_size) + "," + w.optimizer;
}

std::vector<int> batch_sizes(const sim::Workload& w) {
  const int b0 = w.default_batch_size;
  std::set<int> sizes = {std::max(1, b0 / 4), std::max(1, b0 / 2), b0};
  return {sizes.begin(), sizes.end()};
}

// Three runs per batch size at the workload's target, all of them converging; and a row at
// another target, which the loader must skip.
std::string valid_train(const sim::Workload& w) {
  std::ostringstream out;
  out.precision(17);
  out << "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n";
  const int max_epochs = std::max(1, w.max_epochs);
  for (const int size : batch_sizes(w)) {
    for (int run = 0; run < 3; ++run) {
      out << names(w, size) << ",0.001," << run << "," << w.target_metric << ","
          << 1 + (size + run) % max_epochs << "\n";
    }
    out << names(w, size) << ",0.001,0," << w.target_metric * 0.5 << ",nan\n";
  }
  return out.str();
}

std::string valid_power(const sim::Workload& w) {
  std::ostringstream out;
  out << "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n";
  for (const int size : batch_sizes(w)) {
    for (int limit = 100; limit <= 250; limit += 50) {
      out << names(w, size) << "," << limit << "," << 30.0 + 2000.0 / (size + limit) << ","
          << 0.8 * limit << "\n";
    }
  }
  return out.str();
}

void check_trace(const sim::WorkloadTrace& trace, const sim::Workload& asked) {
  ZEUS_FUZZ_CHECK(!trace.batch_sizes.empty());
  ZEUS_FUZZ_CHECK(trace.gpu == kGpu);
  std::set<int> limits;
  bool has_b0 = false;
  for (std::size_t i = 0; i < trace.batch_sizes.size(); ++i) {
    const sim::BatchSizeTrace& batch = trace.batch_sizes[i];
    ZEUS_FUZZ_CHECK(batch.batch_size > 0);
    ZEUS_FUZZ_CHECK(i == 0 || trace.batch_sizes[i - 1].batch_size < batch.batch_size);
    has_b0 = has_b0 || batch.batch_size == trace.workload.default_batch_size;
    ZEUS_FUZZ_CHECK(!batch.target_epochs.empty());
    for (const auto& epoch : batch.target_epochs) {
      ZEUS_FUZZ_CHECK(!epoch || *epoch >= 1);
    }
    ZEUS_FUZZ_CHECK(!batch.power.empty());
    for (std::size_t j = 0; j < batch.power.size(); ++j) {
      const sim::PowerPoint& point = batch.power[j];
      ZEUS_FUZZ_CHECK(point.power_limit_w > 0);
      ZEUS_FUZZ_CHECK(j == 0 || batch.power[j - 1].power_limit_w < point.power_limit_w);
      ZEUS_FUZZ_CHECK(std::isfinite(point.time_per_epoch_s) && point.time_per_epoch_s > 0.0);
      ZEUS_FUZZ_CHECK(std::isfinite(point.average_power_w) && point.average_power_w > 0.0);
      // An epoch's energy is what every policy adds up: it must be a number too.
      ZEUS_FUZZ_CHECK(std::isfinite(point.energy_per_epoch_j()));
      ZEUS_FUZZ_CHECK(batch.at_power_limit(point.power_limit_w) == &point);
      limits.insert(point.power_limit_w);
      ZEUS_FUZZ_CHECK(point.power_limit_w <= trace.max_power_w);
    }
  }
  ZEUS_FUZZ_CHECK(has_b0);
  ZEUS_FUZZ_CHECK(trace.workload.default_batch_size <= asked.default_batch_size);
  ZEUS_FUZZ_CHECK(std::vector<int>(limits.begin(), limits.end()) == trace.power_limits_w);
}

void check_simulation(const sim::WorkloadTrace& trace) {
  try {
    const sim::Oracle oracle = sim::compute_oracle(trace, 0.5);
    (void)trace.at_batch_size(oracle.batch_size);  // throws (a crash here) when not in the trace
    ZEUS_FUZZ_CHECK(std::find(trace.power_limits_w.begin(), trace.power_limits_w.end(),
                              oracle.power_limit_w) != trace.power_limits_w.end());
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
  }
  sim::SimulationConfig config;
  config.recurrences = 4;
  try {
    const sim::RunResult result = sim::simulate_recurring(trace, sim::PolicyKind::kZeus, config);
    ZEUS_FUZZ_CHECK(result.history.size() == 4);
    for (const sim::RecurrenceRecord& record : result.history) {
      (void)trace.at_batch_size(record.batch_size);
      ZEUS_FUZZ_CHECK(record.tries >= 1);
    }
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  static const fs::path dir = [] {
    fs::path created = zeus::fuzz::scratch_dir() / "traces";
    fs::create_directories(created);
    return created;
  }();
  const std::uint8_t mode = data[0];
  const std::vector<sim::Workload>& workloads = sim::paper_workloads();
  const sim::Workload& workload = workloads[((mode >> 2) & 7) % workloads.size()];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string train;
  std::string power;
  switch (mode & 3) {
    case 0:
      train = rest;
      power = valid_power(workload);
      break;
    case 1:
      train = valid_train(workload);
      power = rest;
      break;
    default: {
      const auto parts = zeus::fuzz::split_parts(rest, 2);
      train = parts[0];
      power = parts[1];
      break;
    }
  }
  zeus::fuzz::write_file(dir / "summary_train.csv", train);
  zeus::fuzz::write_file(dir / ("summary_power_" + std::string(kGpu) + ".csv"), power);

  sim::WorkloadTrace trace;
  try {
    trace = sim::TraceDirectory(dir).load(kGpu, workload);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    return 0;
  }
  check_trace(trace, workload);
  check_simulation(trace);
  return 0;
}
