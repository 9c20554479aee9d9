// `zeus exporter --slurm-state-dir`: the running Slurm steps of this node, per GPU, from the
// state files the SPANK plugin leaves (slurm/step_session.hpp), their energy counters read through
// zeusd (docs/prometheus.md, "Slurm jobs"). Internal: the CLI's exporter builds it beside
// DeviceMetrics and serves its render().
//
// Families (label values as the state file has them; user is the numeric uid):
//   zeus_slurm_step_gpu_energy_joules{job_id,step,node,gpu,user}       gauge: energy since the
//       step started (the counter now, read through zeusd, minus the one the step started at)
//   zeus_slurm_step_gpu_power_limit_watts{job_id,step,node,gpu,user}   gauge: the step's cap, only
//       where one is in force
//   zeus_slurm_step_start_timestamp_seconds{job_id,step,node}          gauge: Unix time
//   zeus_slurm_collection_failures_total                               counter: collections that
//       gave no Slurm series (zeusd unreachable or refusing, too many state files)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zeus/common/clock.hpp"
#include "zeus/device/zeusd_config.hpp"

namespace zeus::device {
class ZeusdConnection;
}  // namespace zeus::device

namespace zeus::metrics {

// The most step state files one collection reads (docs/security.md, "Slurm series in the
// exporter"); with more, the collection gives no Slurm series and says why.
inline constexpr std::size_t kMaxSlurmStateFiles = 4096;
// Each request to zeusd gives up after this long (connect, read, write), so that a hung daemon
// holds back neither the collections for long nor the exporter's stop.
inline constexpr double kSlurmZeusdTimeoutS = 2.0;
// A reason for missing Slurm series is logged at most this often.
inline constexpr double kSlurmLogEveryS = 60.0;

struct SlurmMetricsOptions {
  std::string state_dir = "/run/zeus-slurm";
  device::ZeusdConfig zeusd;  // its timeout is capped at kSlurmZeusdTimeoutS
  double interval_s = 1.0;    // how often the state files and counters are read
  std::size_t max_state_files = kMaxSlurmStateFiles;
  std::shared_ptr<Clock> clock;  // the steady clock when null (the log's pace)
  // Start the collecting thread. Tests leave it off and call collect_once().
  bool start_thread = true;
};

// The running steps' series, collected by a background thread every interval and rendered on
// scrape (a scrape never waits for zeusd or the state directory).
class SlurmMetrics {
 public:
  explicit SlurmMetrics(SlurmMetricsOptions options);
  ~SlurmMetrics();
  SlurmMetrics(const SlurmMetrics&) = delete;
  SlurmMetrics& operator=(const SlurmMetrics&) = delete;

  void stop();
  // One collection (what the thread does every interval): the state files, then one read of
  // the counters through zeusd. Never throws: a failure leaves no Slurm series and its reason.
  void collect_once();
  void render(std::string& out) const;
  // Why the last collection gave no series (nullopt when it gave them, or had no step to show).
  std::optional<std::string> last_failure() const;

 private:
  struct Rendered;
  void run();
  // Reads the series into `into`; throws zeus::Error with the reason they are missing.
  void collect(Rendered& into);
  void note_failure(const std::string& reason);

  SlurmMetricsOptions options_;
  std::unique_ptr<device::ZeusdConnection> zeusd_;  // the collecting thread's only
  std::optional<std::int64_t> last_log_ns_;         // the collecting thread's only
  mutable std::mutex mutex_;
  std::unique_ptr<Rendered> rendered_;  // under mutex_
  std::optional<std::string> last_failure_;
  std::uint64_t failures_ = 0;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zeus::metrics
