// The job arrivals CSV of `zeus sim --arrivals` (start_time,end_time[,runtime_ratio]) ->
// sim::load_arrivals (zeus/sim/simulator.hpp), and, when it loads, a replay of those submissions
// (simulate_concurrent) on the built-in model of one paper workload under the Zeus policy.
//
// Bad files may only be a zeus::Error naming the file. Loaded jobs have finite times, end after
// start and a positive finite runtime ratio; the replay gives each job one record, or a
// zeus::Error (a job that never reaches the target).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace {

namespace sim = zeus::sim;

// Replays cost about a job's tries each; past this many jobs an input costs more than it teaches.
constexpr std::size_t kMaxReplayedJobs = 32;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = zeus::fuzz::scratch_dir() / "arrivals.csv";
  static const sim::WorkloadTrace trace =
      sim::builtin_trace("v100", sim::paper_workload("cifar100"));
  zeus::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));

  std::vector<sim::JobArrival> arrivals;
  try {
    arrivals = sim::load_arrivals(path);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(error.what()).find(path.string()) != std::string_view::npos);
    return 0;
  }
  ZEUS_FUZZ_CHECK(!arrivals.empty());
  for (const sim::JobArrival& job : arrivals) {
    ZEUS_FUZZ_CHECK(std::isfinite(job.start_s) && std::isfinite(job.end_s));
    ZEUS_FUZZ_CHECK(job.end_s > job.start_s);
    ZEUS_FUZZ_CHECK(std::isfinite(job.runtime_ratio) && job.runtime_ratio > 0.0);
  }
  if (arrivals.size() > kMaxReplayedJobs) {
    return 0;
  }

  sim::SimulationConfig config;
  config.seed = size;
  config.arrivals = arrivals;
  sim::RunResult result;
  try {
    result = sim::simulate_concurrent(trace, sim::PolicyKind::kZeus, config, arrivals);
  } catch (const zeus::Error& error) {
    ZEUS_FUZZ_CHECK(error.kind() == zeus::ErrorKind::kInvalidArgument);
    return 0;
  }
  ZEUS_FUZZ_CHECK(result.history.size() == arrivals.size());
  for (const sim::RecurrenceRecord& record : result.history) {
    ZEUS_FUZZ_CHECK(record.tries >= 1);
    ZEUS_FUZZ_CHECK(record.energy_j >= 0.0 && record.time_s >= 0.0 && record.cost >= 0.0);
  }
  return 0;
}
