// Replayed concurrent submissions: jobs start and end at given times, and a job that starts
// while others run gets the policy's decision as it stands.
#include <algorithm>
#include <fstream>
#include <functional>
#include <queue>
#include <stdexcept>

#include "common/text.hpp"
#include "engine.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"

namespace zeus::sim {

std::vector<JobArrival> load_arrivals(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  if (!in) {
    throw Error(ErrorKind::kNotFound, "cannot open the job arrivals file " + csv.string());
  }
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') {
    line.pop_back();
  }
  if (line != "start_time,end_time" && line != "start_time,end_time,runtime_ratio") {
    throw Error(ErrorKind::kInvalidArgument,
                csv.string() + ":1: the header must be start_time,end_time[,runtime_ratio]");
  }
  const bool has_ratio = line.size() > std::string("start_time,end_time").size();
  std::vector<JobArrival> arrivals;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty()) {
      continue;
    }
    const std::string at = csv.string() + ":" + std::to_string(number) + ": ";
    std::vector<double> values;
    try {
      for (const std::string_view piece : text::split(line, ',')) {
        const std::string field(piece);
        std::size_t used = 0;
        values.push_back(std::stod(field, &used));
        if (used != field.size()) {
          throw std::invalid_argument(field);
        }
      }
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidArgument, at + "every field must be a number");
    }
    if (values.size() != (has_ratio ? 3u : 2u)) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "expected " + (has_ratio ? "3" : "2") + " fields");
    }
    JobArrival arrival{values[0], values[1], has_ratio ? values[2] : 1.0};
    if (!(arrival.end_s > arrival.start_s) || !(arrival.runtime_ratio > 0.0)) {
      throw Error(ErrorKind::kInvalidArgument,
                  at + "end_time must be after start_time and runtime_ratio positive");
    }
    arrivals.push_back(arrival);
  }
  if (arrivals.empty()) {
    throw Error(ErrorKind::kInvalidArgument, csv.string() + " lists no job");
  }
  return arrivals;
}

RunResult simulate_concurrent(const WorkloadTrace& trace, PolicyKind kind,
                              const SimulationConfig& config,
                              const std::vector<JobArrival>& arrivals) {
  check_config(trace, config);
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
    const std::optional<double> threshold = policy->threshold();
    const Choice choice = policy->decide();
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
