// `zeus monitor`'s parts, one job per file: monitor_command.cpp, the command line (its options
// and their checks); monitor_run.cpp, a run (devices, outputs, the window, carbon and cost; the
// command's process is supervised by common/process.hpp's supervise_child, as `zeus profile`'s);
// monitor_timeline.cpp, the --timeline sampler (the file's format: monitor/timeline_csv.hpp);
// monitor_summary.cpp, the summary as text or JSON.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/output_file.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "monitor/timeline_csv.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/measurement_error.hpp"
#include "zeus/monitor/power_sampler.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::cli::monitor_command {

struct MonitorArgs {
  std::string gpus;
  std::string cpus;
  std::string interval;
  std::string duration;
  std::string kill_after = "10s";
  std::string timeline;
  std::string output;
  std::string powercap_root;
  int metrics_port = -1;  // -1: no /metrics
  std::string metrics_host = "127.0.0.1";
  bool as_json = false;
  bool cross_check = false;      // --cross-check: the GPUs' counters against their power, first
  std::string carbon_intensity;  // --carbon-intensity SPEC (carbon_spec.hpp); empty: none
  std::string price;             // --price SPEC (price_spec.hpp); empty: none
  std::vector<std::string> command;
};

// The arguments read and checked, before any device is touched or anything started.
struct Plan {
  std::optional<double> interval_s;
  std::optional<double> duration_s;
  double kill_after_s = 0.0;
  std::shared_ptr<monitor::CarbonIntensityProvider> carbon_provider;
  std::shared_ptr<monitor::ElectricityPriceProvider> price_provider;
  std::optional<std::vector<int>> gpu_request;
  std::optional<std::vector<int>> cpu_request;
};

// monitor_command.cpp. Throws Error(kInvalidArgument) for a bad argument (and the providers'
// errors).
Plan check_arguments(const MonitorArgs& args);

// monitor_run.cpp: measures, prints the summary; the exit code.
int run(const MonitorArgs& args, const Plan& plan);

// What was run and how it ended, for the summary.
struct RunOutcome {
  std::optional<ChildExit> child;  // set when a command ran
  std::optional<int> stop_signal;  // SIGINT/SIGTERM that ended a run without a command
  std::optional<double> limit_s;   // --duration
  bool limit_reached = false;      // the command was sent SIGTERM at the time limit
  std::string kill_reason;         // set when zeus sent SIGKILL: why
};

// monitor_timeline.cpp. The power timeline: every readable domain of the monitored GPUs (and
// their temperatures when each reports one), streamed to the file as sampled.
class TimelineRecording {
 public:
  // Starts sampling `gpu_indices` (none: the file gets its header only). Throws
  // Error(kNotSupported) when the GPUs share no power reading.
  TimelineRecording(OutputFile file, const device::Gpus& gpus, const std::vector<int>& gpu_indices,
                    std::optional<double> interval_s);
  ~TimelineRecording();
  // Stops sampling and closes the file; appends to `errors` what went wrong (`path` names the
  // file).
  void finish(const std::string& path, std::vector<std::string>& errors);

 private:
  std::unique_ptr<monitor::timeline_csv::Writer> writer_;
  std::unique_ptr<monitor::PowerSampler> sampler_;
};

// monitor_summary.cpp.
struct Summary {
  const monitor::Measurement& measured;
  const RunOutcome& outcome;
  const std::optional<monitor::CarbonEmissionMeasurement>& carbon;
  const std::optional<monitor::EnergyCostMeasurement>& cost;
  const std::vector<std::string>& notes;
  const std::vector<monitor::CounterPowerCheck>& cross_checks;  // empty without --cross-check
};
void write_text_summary(std::ostream& out, const MonitorArgs& args, const Summary& summary,
                        const device::Gpus& gpus, const device::CpuDiscovery& cpus);
void write_json_summary(std::ostream& out, const MonitorArgs& args, const Summary& summary);

}  // namespace zeus::cli::monitor_command
