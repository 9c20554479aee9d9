// Replayed concurrent submissions: jobs start and end at given times, and a job that starts
// while others run gets the policy's decision as it stands.
#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <string_view>

#include "bounded_fields.hpp"
#include "common/csv.hpp"
#include "common/text.hpp"
#include "engine.hpp"
#include "limits.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"

namespace zeus::sim {

namespace {

constexpr detail::NumberColumn kStartTime{"start_time", "a number of seconds", "s", 0.0,
                                          limits::kMaxArrivalTimeS};
constexpr detail::NumberColumn kEndTime{"end_time", "a number of seconds", "s", 0.0,
                                        limits::kMaxArrivalTimeS};
constexpr detail::NumberColumn kRuntimeRatio{"runtime_ratio",          "a positive number", "", 0.0,
                                             limits::kMaxRuntimeRatio, /*above_min=*/true};

// Whether the header (the first non-blank line, after a byte-order mark) names runtime_ratio,
// the one optional column.
bool has_runtime_ratio(std::string_view text) {
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) {
    text.remove_prefix(kUtf8Bom.size());
  }
  for (const std::string_view line : text::split(text, '\n')) {
    if (text::trim(line, csv::kFieldBlanks).empty()) {
      continue;
    }
    const std::vector<std::string_view> fields = csv::split_fields(line);
    return std::find(fields.begin(), fields.end(), "runtime_ratio") != fields.end();
  }
  return false;
}

}  // namespace

std::vector<JobArrival> load_arrivals(const std::filesystem::path& path) {
  // text::read_file refuses what is not a regular file (a FIFO would block, a directory read as
  // empty), and csv::Reader skips a byte-order mark.
  std::string content = text::read_file(path, "job arrivals file");
  std::vector<std::string> columns = {"start_time", "end_time"};
  const bool ratio = has_runtime_ratio(content);
  if (ratio) {
    columns.emplace_back("runtime_ratio");
  }
  const csv::Reader csv = csv::Reader::from_text(path.string(), std::move(content), columns);
  std::vector<JobArrival> arrivals;
  csv.for_each_row([&](int line, const std::vector<std::string_view>& fields) {
    if (arrivals.size() >= limits::kMaxArrivals) {
      csv.fail(line, "more than " + std::to_string(limits::kMaxArrivals) +
                         " jobs; split the file into several runs");
    }
    JobArrival arrival;
    arrival.start_s = detail::bounded_number(csv, line, kStartTime, fields[0]);
    arrival.end_s = detail::bounded_number(csv, line, kEndTime, fields[1]);
    arrival.runtime_ratio =
        ratio ? detail::bounded_number(csv, line, kRuntimeRatio, fields[2]) : 1.0;
    if (!(arrival.end_s > arrival.start_s)) {
      csv.fail(line, "end_time (" + std::string(fields[1]) + ") must be after start_time (" +
                         std::string(fields[0]) + ")");
    }
    arrivals.push_back(arrival);
  });
  if (arrivals.empty()) {
    throw Error(ErrorKind::kInvalidArgument, path.string() + " lists no job");
  }
  return arrivals;
}

RunResult simulate_concurrent(const WorkloadTrace& trace, PolicyKind kind,
                              const SimulationConfig& config,
                              const std::vector<JobArrival>& arrivals) {
  check_config(trace, config);
  if (config.drift) {
    throw Error(ErrorKind::kInvalidArgument,
                "drift applies to sequential recurrences, not to replayed job arrivals");
  }
  std::unique_ptr<Policy> policy = make_policy(trace, kind, config);
  optimizer::Rng rng = run_rng(config);
  std::vector<JobArrival> jobs = arrivals;
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const auto& a, const auto& b) { return a.start_s < b.start_s; });

  struct Running {
    double end_s;
    std::size_t job;
    Choice choice;
    Outcome outcome;
    bool operator>(const Running& other) const {
      return end_s != other.end_s ? end_s > other.end_s : job > other.job;
    }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  RunResult result;
  result.history.resize(jobs.size());
  std::size_t next_job = 0;

  auto start = [&](std::size_t job, double now_s) {
    RecurrenceRecord& record = result.history[job];
    if (++record.tries > config.max_tries) {
      throw Error(ErrorKind::kInvalidArgument, "job " + std::to_string(job) +
                                                   " did not reach the target in " +
                                                   std::to_string(config.max_tries) + " tries");
    }
    const Choice choice = policy->decide();
    const std::optional<double> threshold = policy->threshold(choice);
    const Outcome outcome = run_once(trace, trace.at_batch_size(choice.batch_size), choice,
                                     threshold, config.eta, rng, jobs[job].runtime_ratio);
    const double duration_s = jobs[job].end_s - jobs[job].start_s;
    running.push({now_s + duration_s, job, choice, outcome});
  };

  while (next_job < jobs.size() || !running.empty()) {
    const bool start_next =
        next_job < jobs.size() && (running.empty() || jobs[next_job].start_s < running.top().end_s);
    if (start_next) {
      result.history[next_job].recurrence = static_cast<int>(next_job);
      result.history[next_job].runtime_ratio = jobs[next_job].runtime_ratio;
      start(next_job, jobs[next_job].start_s);
      ++next_job;
      continue;
    }
    const Running done = running.top();
    running.pop();
    policy->report(done.choice, done.outcome);
    RecurrenceRecord& record = result.history[done.job];
    if (!done.outcome.never_ran) {
      record.batch_size = done.choice.batch_size;
      record.power_limit_w = done.choice.power_limit_w;
      record.profiled = done.choice.profile;
      record.energy_j += done.outcome.energy_j;
      record.time_s += done.outcome.time_s;
      record.cost += done.outcome.cost;
    }
    if (!done.outcome.reached) {
      if (!done.outcome.never_ran) {
        ++result.failed_runs;
      }
      start(done.job, done.end_s);  // retried at once, with the same duration
    }
  }
  return result;
}

}  // namespace zeus::sim
