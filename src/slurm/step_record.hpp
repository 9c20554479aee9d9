// What one step used on one node, and where it is written: the job's AdminComment as JSON and the
// step's energy summary (docs/slurm.md, "What is recorded"). Pure: no Slurm and no daemon here.
//
// AdminComment holds {"zeus": {"version": 1, "steps": {"<step>": {"<node>": <record>}}, ...}},
// merged into what is already there: other top-level keys are kept as they are, and a step's
// record on another node is kept. A comment that is not a JSON object is never rewritten.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace zeus::slurm {

// One GPU over one step.
struct GpuUsage {
  double energy_j = 0.0;
  double average_power_w = 0.0;
  std::optional<std::uint32_t> power_limit_w;        // the cap in force (nullopt: not capped)
  std::optional<std::uint32_t> prior_power_limit_w;  // what it was before, when capped here
};

// One step on one node.
struct StepRecord {
  std::string step;  // "0", "batch", "extern", ... (step_name())
  std::string node;
  double start_unix_s = 0.0;
  double duration_s = 0.0;
  std::string source = "counter";   // "counter": the GPUs' energy counters, read through zeusd
  std::map<int, GpuUsage> gpus;     // by GPU index (zeusd's)
  std::optional<std::string> note;  // why the step is not capped, when it asked to be
  // A record of a step still running (at start + duration_s), written so that a job cancelled
  // before its steps end (AdminComment is refused after that) keeps a figure.
  bool partial = false;

  double energy_j() const;
};

// "batch", "extern", "interactive" for Slurm's special step ids, else the number.
std::string step_name(std::uint32_t step_id);

// `existing` (the job's AdminComment, "" when none) with `record` merged in, or nullopt when the
// comment holds something that is not a JSON object (it is left alone). Beyond `max_steps` step
// entries a step is added to "zeus"."other_steps" (count, energy_j) instead.
std::optional<std::string> merge_admin_comment(const std::string& existing,
                                               const StepRecord& record, std::uint32_t max_steps);

// The step's record for `node` from an AdminComment, or nullopt when it is not (yet) there.
std::optional<StepRecord> find_step_record(const std::string& admin_comment,
                                           const std::string& step, const std::string& node);

// Lines for the step's stderr, as `zeus monitor` prints a window:
//   zeus: step 12.0 on node7: 61.02 s, 2 GPUs, 25710.3 J
//     GPU 0: 12890.1 J, 211.2 W average, capped at 250 W
std::string summary_text(std::uint32_t job_id, const StepRecord& record);

}  // namespace zeus::slurm
