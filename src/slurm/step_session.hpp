// A step's GPUs from its start to its end on one node: caps applied through zeusd (whose ledger
// restores them if the step's slurmstepd dies), energy counters read at both ends, and the
// step's state file that the epilog and `zeus exporter --slurm-state-dir` read
// (docs/slurm.md, "How caps come back").
//
// The state file, <state_dir>/job-<job>.step-<step>.json, written atomically by root:
//   {"job_id": 12, "step": "0", "node": "n1", "uid": 1000, "owner_pid": 4242,
//    "owner_start_time": 123456 | null, "zeusd": "unix socket /run/zeusd/zeusd.sock" | "host:port",
//    "start_unix_s": ..., "start_monotonic_s": ..., "gpus": [{"index": 0, "start_energy_mj": 123,
//    "prior_power_limit_mw": 700000,
//              "cap_mw": 250000 | null, "capped_here": true}], "note": "..." (optional)}
// The GPUs capped_here are the ones this step changed: it puts them back at its end, the epilog
// puts back those of a step that did not (killed), and zeusd's ledger those of a step whose
// slurmstepd died, as soon as it dies.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "device/zeusd_connection.hpp"
#include "slurm/site_config.hpp"
#include "slurm/step_record.hpp"

namespace zeus::slurm {

struct StepGpu {
  int index = 0;
  std::optional<std::uint64_t> start_energy_mj;  // nullopt: the GPU has no energy counter
  std::uint32_t prior_power_limit_mw = 0;
  std::optional<std::uint32_t> cap_mw;  // the cap in force for this step
  bool capped_here = false;             // this step wrote the cap (and restores it)
};

struct StepState {
  std::uint32_t job_id = 0;
  std::string step;  // step_name()
  std::string node;
  uid_t uid = 0;
  pid_t owner_pid = 0;  // the step's slurmstepd: zeusd's ledger owner of its caps
  std::optional<std::uint64_t> owner_start_time;  // its /proc start time (common/proc_stat.hpp)
  std::string zeusd;                              // zeusd's address as the site configured it
  double start_unix_s = 0.0;
  double start_monotonic_s = 0.0;
  std::vector<StepGpu> gpus;
  std::optional<std::string> note;  // why the step is not capped as asked
};

// CLOCK_MONOTONIC in seconds (comparable between processes of one boot).
double monotonic_s();

// Starts the step: reads its GPUs' power limits and energy counters through `daemon`, caps them
// at `cap_w` (when set) and writes the state file. A GPU already capped by a running step of the
// same job keeps that cap; one capped by another job is left alone (a note says so); a cap
// outside a GPU's own range is not applied (a note says so). Throws zeus::Error when the daemon
// cannot be reached or refuses, with nothing written.
StepState begin_step(const SiteConfig& site, device::ZeusdConnection& daemon, StepState identity,
                     const std::vector<int>& gpus, std::optional<std::uint32_t> cap_w);

// Ends the step: reads the counters again, puts back the limits this step changed (when they
// still hold its cap) and removes the state file. The record has each GPU's energy and average
// power over [start, now]; a counter that went backwards (GPU reset, daemon restarted) gives no
// figure for that GPU and a note. A GPU without a counter takes its energy from `polled_j`
// (PolledEnergy::finish(): the record's source is then "polled", or "counter+polled"), or has no
// figure and a note. Throws zeus::Error when the daemon cannot be reached (the state file stays for
// the epilog).
StepRecord end_step(const SiteConfig& site, device::ZeusdConnection& daemon, const StepState& state,
                    const std::map<int, double>& polled_j = {});

// The step's record so far (counters read now), changing nothing: what end_step records, for a
// step still running.
StepRecord measure_step(device::ZeusdConnection& daemon, const StepState& state,
                        const std::map<int, double>& polled_j = {});

// The step's GPUs without an energy counter (to poll with PolledEnergy).
std::vector<int> uncounted_gpus(const StepState& state);

// The running steps' state files under the site's state_dir (unreadable ones are skipped), at
// most `max_files` of them (the exporter's bound).
std::vector<StepState> read_step_states(const std::string& state_dir,
                                        std::size_t max_files = SIZE_MAX);
std::string state_file_path(const std::string& state_dir, std::uint32_t job_id,
                            const std::string& step);
void write_step_state(const std::string& state_dir, const StepState& state);
void remove_step_state(const std::string& state_dir, const StepState& state);

// Whether the step's owner (its slurmstepd) still runs: not exited, not a zombie, and not another
// process that took its pid (its start time, when recorded, must match).
bool owner_alive(const StepState& state);

// The epilog's backstop: for every state file of `job_id` (and every file whose owner is gone),
// puts back the limits it capped that still hold its cap, and removes the file. Returns a line
// per GPU put back, for the log. Throws zeus::Error when the daemon cannot be reached.
std::vector<std::string> restore_leftovers(const SiteConfig& site, device::ZeusdConnection& daemon,
                                           std::uint32_t job_id);

// Holds an exclusive lock on <state_dir>/job-<job>.lock while alive (AdminComment's
// read-modify-write of concurrent steps on this node).
class JobLock {
 public:
  JobLock(const std::string& state_dir, std::uint32_t job_id);
  ~JobLock();
  JobLock(const JobLock&) = delete;
  JobLock& operator=(const JobLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace zeus::slurm
