// Measuring a GPU's sensor: how often its energy counter and power readings change, what one
// read costs, and, given a log of the load that ran meanwhile, the part-time power sampling
// window, the averaging window and delay of the readings, and how counter and polled power agree.
// `zeus show-env` uses probe_energy_counter; `zeus sensor-probe` (and scripts/device-check.sh on
// a real GPU) the rest. The estimators are tested on the sensor-faithful simulated GPU, whose
// parameters are known (include/zeus/device/sensor.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpu.hpp"

namespace zeus::device {

// One reading at one time (seconds on the probe's clock).
struct TimedValue {
  double t_s = 0.0;
  double value = 0.0;
};

// How a polled reading changes.
struct UpdateStats {
  std::size_t samples = 0;
  std::size_t changes = 0;
  // Median interval between consecutive changes; nullopt with fewer than 3 changes (no interval
  // between the first change and the one before it is known).
  std::optional<double> period_s;
  // Smallest non-zero |change| seen; nullopt without a change.
  std::optional<double> smallest_step;
  // Whether the reading changed at (nearly) every poll: then period_s only says "at most the
  // poll interval", not the sensor's own period.
  bool changed_every_poll = false;
};
UpdateStats update_stats(std::span<const TimedValue> trace);

// What a probe records from one GPU.
struct SensorTrace {
  std::vector<TimedValue> energy_mj;  // empty when the GPU has no counter
  std::vector<TimedValue> instant_power_mw;
  std::vector<TimedValue> average_power_mw;  // empty when the reading is not supported
  double poll_interval_s = 0.0;
};

// Polls the counter and the power readings of `gpu` every `poll_interval_s` (on `clock`) until
// `duration_s` has passed or `stop` returns true. A reading that throws is left out of its series
// (a GPU without a counter records no energy). At most `max_samples` polls are kept (the oldest
// are kept; recording ends there).
SensorTrace record_sensor_trace(Gpu& gpu, const Clock& clock, double duration_s,
                                double poll_interval_s, const std::function<bool()>& stop = {},
                                std::size_t max_samples = 2'000'000);

// The energy counter's refresh period, read on `gpu` for at most `max_duration_s` (stopping
// early once `enough_changes` changes were seen), polling every `poll_interval_s`. Throws
// Error(kNotSupported) when the GPU has no counter.
struct CounterProbe {
  UpdateStats counter;
  double duration_s = 0.0;
  double poll_interval_s = 0.0;
};
CounterProbe probe_energy_counter(Gpu& gpu, const Clock& clock, double max_duration_s = 1.5,
                                  double poll_interval_s = 0.0005, std::size_t enough_changes = 12);
// One line on what a probe found: "every 100.0 ms (median of 6 changes)", "at every read (0.5 ms
// polls): faster than they can tell", "did not change in 1.2 s".
std::string describe_counter_probe(const CounterProbe& probe);

// The mean cost in seconds of one call of `read`, over up to `max_reads` calls timed on `clock`,
// stopping early once `max_duration_s` has passed (a real H200's energy read takes 3.7 ms: 2000
// of them would take 7.5 s).
double mean_read_cost_s(const Clock& clock, int max_reads, double max_duration_s,
                        const std::function<void()>& read);

// The value of a step-wise reading at time `t_s`: the last sample at or before it (nullopt
// before the first sample).
std::optional<double> value_at(std::span<const TimedValue> trace, double t_s);

// Energy in joules from a power trace in milliwatts over [start_s, end_s], integrating the
// samples as steps (each value holds until the next sample). Only samples at most `every_s` apart
// are used when `every_s` > 0 (a naive poller of that interval).
double integrate_power_j(std::span<const TimedValue> power_mw, double start_s, double end_s,
                         double every_s = 0.0);

// A span of the load: `kind` is "idle", "busy", "burst", "square" or "step" (idle before
// `start_s`, busy from it to `end_s`); `period_s` is a square wave's period.
struct LoadSpan {
  std::string kind;
  double start_s = 0.0;
  double end_s = 0.0;
  double period_s = 0.0;
};

// Bursts as the counter saw them: a burst adds about (busy - idle) x length, seen whole when the
// power is sampled all the time; with part-time sampling a burst that falls between sampling
// windows adds nothing, and one that is seen adds more (the window is extrapolated).
struct BurstAnalysis {
  std::size_t bursts = 0;
  std::size_t missed = 0;       // added less than a quarter of the expected energy
  double expected_j = 0.0;      // (busy - idle) x mean burst length
  double mean_seen_j = 0.0;     // mean over all bursts (missed ones included)
  double burst_length_s = 0.0;  // mean
  // The sampling window, as sampling_period x (1 - missed / bursts) - burst length (clipped to
  // [0, period]); nullopt when no burst was missed (power is seen all the time, as far as bursts
  // of this length can tell).
  std::optional<double> sampling_window_s;
};
BurstAnalysis analyze_bursts(std::span<const TimedValue> energy_mj, std::span<const LoadSpan> load,
                             double counter_refresh_s, double idle_w, double busy_w,
                             double sampling_period_s);

// Bursts as a power reading saw them: a reading that averages the draw over a window of W
// seconds in every sampling period P shows a burst of length b only when the burst overlaps a
// window, with probability about (W + b) / P for bursts at random phases. A burst is seen when
// a reading within `max_lag_s` of its end rises above idle by a tenth of (busy - idle).
struct ReadingBurstAnalysis {
  std::size_t bursts = 0;
  std::size_t missed = 0;
  // The shortest time from a burst's start to the first reading that shows it: about the
  // reading's delay (bursts fall at random phases of the update period).
  std::optional<double> min_lag_s;
  // (P x (1 - missed / bursts) - b) / 0.8, clipped to [0, P] (a burst that overlaps the window
  // by less than a tenth of it does not reach the threshold); nullopt when no burst was missed.
  std::optional<double> sampling_window_s;
};
ReadingBurstAnalysis analyze_reading_bursts(std::span<const TimedValue> power_mw,
                                            std::span<const LoadSpan> load, double idle_w,
                                            double busy_w, double update_period_s,
                                            double max_lag_s);

// The mean power in watts the counter shows over [start_s, end_s].
std::optional<double> counter_mean_power_w(std::span<const TimedValue> energy_mj, double start_s,
                                           double end_s);

// How a reading follows a step of the load from idle to busy at `step_s`: the delay until it
// first shows a tenth of the rise, and the time from a tenth to nine tenths of it (for a
// reading averaged over a window A, about 0.8 A). nullopt fields when the reading never got there.
struct StepResponse {
  std::optional<double> delay_s;
  std::optional<double> rise_s;
};
StepResponse step_response(std::span<const TimedValue> power_mw, double step_s, double end_s,
                           double idle_w, double busy_w);

}  // namespace zeus::device
