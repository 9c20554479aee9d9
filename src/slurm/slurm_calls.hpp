// The Slurm plugin's calls into Slurm's API (slurm.h), which srun, sbatch and slurmstepd carry:
// the job's allocation, its AdminComment, its stderr file. Only spank_plugin.cpp uses them; they
// are built into zeus_spank.so alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "slurm/site_config.hpp"
#include "slurm/step_record.hpp"

namespace zeus::slurm {

// The job's GPU indices on `node`, from slurmctld (trusted, unlike the job's environment);
// nullopt with `why` set when they cannot be known.
std::optional<std::vector<int>> allocated_gpus(std::uint32_t job_id, const std::string& node,
                                               std::string& why);

// Merges `record` into the job's AdminComment (under the job's lock on this node). False, with
// the reason in slurmd's log, when it could not (slurmctld unreachable, the job finished, a
// comment that is not JSON).
bool record_admin_comment(const SiteConfig& site, std::uint32_t job_id, const StepRecord& record);

// Appends `text` to the job's stderr file, as the job's user (a batch step's summary).
void append_to_batch_stderr(std::uint32_t job_id, const std::string& text);

// srun --zeus-energy: waits (at most 5 s) for the step's records of every node in AdminComment
// and prints their summaries to stderr; at once when the job has no GPUs.
void print_summary_local();

}  // namespace zeus::slurm
