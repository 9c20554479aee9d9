#include "zeus/device/sensor_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "zeus/common/error.hpp"

namespace zeus::device {
namespace {

double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// The samples where a step-wise reading took a new value (the first sample is one too).
std::vector<TimedValue> change_points(std::span<const TimedValue> trace) {
  std::vector<TimedValue> points;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (i == 0 || trace[i].value != trace[i - 1].value) {
      points.push_back(trace[i]);
    }
  }
  return points;
}

// The last change point at or before `t_s` (index into `points`), or nullopt.
std::optional<std::size_t> last_point_at(std::span<const TimedValue> points, double t_s) {
  const auto it = std::upper_bound(points.begin(), points.end(), t_s,
                                   [](double t, const TimedValue& point) { return t < point.t_s; });
  if (it == points.begin()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::distance(points.begin(), it) - 1);
}

// The first change point at or after `t_s`, or nullopt.
std::optional<std::size_t> first_point_from(std::span<const TimedValue> points, double t_s) {
  const auto it = std::lower_bound(points.begin(), points.end(), t_s,
                                   [](const TimedValue& point, double t) { return point.t_s < t; });
  if (it == points.end()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::distance(points.begin(), it));
}

// Sleeps until the next poll, `interval_s` after the last one's slot (`next_s`, advanced here). A
// poller that fell behind starts again from now: no burst of catch-up polls.
void wait_for_next_poll(const Clock& clock, double& next_s, double interval_s) {
  next_s += interval_s;
  const double wait_s = next_s - clock.now_s();
  if (wait_s > 0.0) {
    clock.sleep_for_s(wait_s);
  } else {
    next_s = clock.now_s();
  }
}

}  // namespace

UpdateStats update_stats(std::span<const TimedValue> trace) {
  UpdateStats stats;
  stats.samples = trace.size();
  std::vector<double> change_times;
  for (std::size_t i = 1; i < trace.size(); ++i) {
    const double step = std::abs(trace[i].value - trace[i - 1].value);
    if (step == 0.0) {
      continue;
    }
    ++stats.changes;
    change_times.push_back(trace[i].t_s);
    if (!stats.smallest_step || step < *stats.smallest_step) {
      stats.smallest_step = step;
    }
  }
  if (change_times.size() >= 3) {
    std::vector<double> intervals;
    intervals.reserve(change_times.size() - 1);
    for (std::size_t i = 1; i < change_times.size(); ++i) {
      intervals.push_back(change_times[i] - change_times[i - 1]);
    }
    stats.period_s = median(std::move(intervals));
  }
  stats.changed_every_poll = stats.samples > 2 && static_cast<double>(stats.changes) >=
                                                      0.9 * static_cast<double>(stats.samples - 1);
  return stats;
}

SensorTrace record_sensor_trace(Gpu& gpu, const Clock& clock, double duration_s,
                                double poll_interval_s, const std::function<bool()>& stop,
                                std::size_t max_samples) {
  if (!(poll_interval_s > 0.0) || !std::isfinite(duration_s) || duration_s < 0.0) {
    throw Error(ErrorKind::kInvalidArgument,
                "a sensor trace needs a positive poll interval and a duration of 0 s or more");
  }
  SensorTrace trace;
  trace.poll_interval_s = poll_interval_s;
  bool energy = gpu.supports_energy_counter();
  bool average = true;
  const double start_s = clock.now_s();
  double next_s = start_s;
  for (std::size_t polls = 0; polls < max_samples; ++polls) {
    const double now_s = clock.now_s();
    if (now_s - start_s > duration_s || (stop && stop())) {
      break;
    }
    if (energy) {
      try {
        trace.energy_mj.push_back({clock.now_s(), static_cast<double>(gpu.total_energy_mj())});
      } catch (const Error&) {
        energy = false;  // a counter that cannot be read is left out from here on
      }
    }
    try {
      trace.instant_power_mw.push_back(
          {clock.now_s(), static_cast<double>(gpu.instant_power_mw())});
    } catch (const Error&) {
      // a failed read leaves a gap in the series
    }
    if (average) {
      try {
        trace.average_power_mw.push_back(
            {clock.now_s(), static_cast<double>(gpu.average_power_mw())});
      } catch (const Error&) {
        average = false;
      }
    }
    wait_for_next_poll(clock, next_s, poll_interval_s);
  }
  return trace;
}

CounterProbe probe_energy_counter(Gpu& gpu, const Clock& clock, double max_duration_s,
                                  double poll_interval_s, std::size_t enough_changes) {
  if (!gpu.supports_energy_counter()) {
    throw Error(ErrorKind::kNotSupported, "this GPU has no energy counter");
  }
  std::vector<TimedValue> samples;
  std::size_t changes = 0;
  const double start_s = clock.now_s();
  double next_s = start_s;
  while (clock.now_s() - start_s <= max_duration_s && changes < enough_changes) {
    const TimedValue sample{clock.now_s(), static_cast<double>(gpu.total_energy_mj())};
    if (!samples.empty() && sample.value != samples.back().value) {
      ++changes;
    }
    samples.push_back(sample);
    wait_for_next_poll(clock, next_s, poll_interval_s);
  }
  CounterProbe probe;
  probe.counter = update_stats(samples);
  probe.duration_s = clock.now_s() - start_s;
  probe.poll_interval_s = poll_interval_s;
  return probe;
}

std::string describe_counter_probe(const CounterProbe& probe) {
  const UpdateStats& stats = probe.counter;
  if (stats.changed_every_poll) {
    return fmt::format("changed at every read ({:.1f} ms polls): faster than they can tell",
                       probe.poll_interval_s * 1e3);
  }
  if (stats.period_s) {
    return fmt::format("every {:.1f} ms (median of {} changes)", *stats.period_s * 1e3,
                       stats.changes);
  }
  if (stats.changes == 0) {
    return fmt::format("did not change in {:.1f} s", probe.duration_s);
  }
  return fmt::format("changed {} times in {:.1f} s: too few to tell", stats.changes,
                     probe.duration_s);
}

double mean_read_cost_s(const Clock& clock, int max_reads, double max_duration_s,
                        const std::function<void()>& read) {
  const double start_s = clock.now_s();
  int reads = 0;
  while (reads < max_reads && (reads == 0 || clock.now_s() - start_s < max_duration_s)) {
    read();
    ++reads;
  }
  return reads == 0 ? 0.0 : (clock.now_s() - start_s) / reads;
}

std::optional<double> value_at(std::span<const TimedValue> trace, double t_s) {
  const auto index = last_point_at(trace, t_s);
  if (!index) {
    return std::nullopt;
  }
  return trace[*index].value;
}

double integrate_power_j(std::span<const TimedValue> power_mw, double start_s, double end_s,
                         double every_s) {
  double energy_mj = 0.0;
  std::optional<TimedValue> held;  // the reading in force, as the poller last saw it
  if (const auto index = last_point_at(power_mw, start_s)) {
    held = TimedValue{start_s, power_mw[*index].value};
  }
  double last_poll_s = start_s;
  for (const TimedValue& sample : power_mw) {
    if (sample.t_s <= start_s) {
      continue;
    }
    if (sample.t_s >= end_s) {
      break;
    }
    if (every_s > 0.0 && held && sample.t_s - last_poll_s < every_s) {
      continue;
    }
    if (held) {
      energy_mj += held->value * (sample.t_s - held->t_s);
    }
    held = sample;
    last_poll_s = sample.t_s;
  }
  if (held) {
    energy_mj += held->value * (end_s - held->t_s);
  }
  return energy_mj * 1e-3;
}

std::optional<double> counter_mean_power_w(std::span<const TimedValue> energy_mj, double start_s,
                                           double end_s) {
  const std::vector<TimedValue> points = change_points(energy_mj);
  const auto first = first_point_from(points, start_s);
  const auto last = last_point_at(points, end_s);
  if (!first || !last || *last <= *first) {
    return std::nullopt;
  }
  const double span_s = points[*last].t_s - points[*first].t_s;
  return (points[*last].value - points[*first].value) * 1e-3 / span_s;
}

BurstAnalysis analyze_bursts(std::span<const TimedValue> energy_mj, std::span<const LoadSpan> load,
                             double counter_refresh_s, double idle_w, double busy_w,
                             double sampling_period_s) {
  BurstAnalysis analysis;
  const std::vector<TimedValue> points = change_points(energy_mj);
  double seen_total_j = 0.0;
  double length_total_s = 0.0;
  std::vector<double> seen;
  for (const LoadSpan& span : load) {
    if (span.kind != "burst") {
      continue;
    }
    // From the last update before the burst to the first one two refresh periods after it: the
    // updates in between hold the burst's energy whatever the counter's delay.
    const auto before = last_point_at(points, span.start_s);
    const auto after = first_point_from(points, span.end_s + 2.0 * counter_refresh_s);
    if (!before || !after || *after <= *before) {
      continue;
    }
    const double counted_j = (points[*after].value - points[*before].value) * 1e-3;
    const double idle_j = idle_w * (points[*after].t_s - points[*before].t_s);
    seen.push_back(counted_j - idle_j);
    seen_total_j += counted_j - idle_j;
    length_total_s += span.end_s - span.start_s;
  }
  analysis.bursts = seen.size();
  if (seen.empty()) {
    return analysis;
  }
  analysis.burst_length_s = length_total_s / static_cast<double>(seen.size());
  analysis.expected_j = (busy_w - idle_w) * analysis.burst_length_s;
  analysis.mean_seen_j = seen_total_j / static_cast<double>(seen.size());
  for (const double energy_j : seen) {
    if (energy_j < 0.25 * analysis.expected_j) {
      ++analysis.missed;
    }
  }
  if (analysis.missed > 0 && sampling_period_s > 0.0) {
    const double seen_fraction =
        1.0 - static_cast<double>(analysis.missed) / static_cast<double>(analysis.bursts);
    analysis.sampling_window_s = std::clamp(
        sampling_period_s * seen_fraction - analysis.burst_length_s, 0.0, sampling_period_s);
  }
  return analysis;
}

ReadingBurstAnalysis analyze_reading_bursts(std::span<const TimedValue> power_mw,
                                            std::span<const LoadSpan> load, double idle_w,
                                            double busy_w, double update_period_s,
                                            double max_lag_s) {
  ReadingBurstAnalysis analysis;
  const double threshold_mw = (idle_w + 0.1 * (busy_w - idle_w)) * 1e3;
  double length_total_s = 0.0;
  for (const LoadSpan& span : load) {
    if (span.kind != "burst") {
      continue;
    }
    const auto from =
        std::lower_bound(power_mw.begin(), power_mw.end(), span.start_s,
                         [](const TimedValue& sample, double t) { return sample.t_s < t; });
    if (from == power_mw.end() || power_mw.back().t_s < span.end_s + max_lag_s) {
      continue;  // the trace ends before the burst could show
    }
    ++analysis.bursts;
    length_total_s += span.end_s - span.start_s;
    bool seen = false;
    for (auto it = from; it != power_mw.end() && it->t_s <= span.end_s + max_lag_s; ++it) {
      if (it->value >= threshold_mw) {
        const double lag_s = it->t_s - span.start_s;
        if (!analysis.min_lag_s || lag_s < *analysis.min_lag_s) {
          analysis.min_lag_s = lag_s;
        }
        seen = true;
        break;
      }
    }
    if (!seen) {
      ++analysis.missed;
    }
  }
  if (analysis.missed > 0 && analysis.bursts > 0 && update_period_s > 0.0) {
    const double seen_fraction =
        1.0 - static_cast<double>(analysis.missed) / static_cast<double>(analysis.bursts);
    const double length_s = length_total_s / static_cast<double>(analysis.bursts);
    // A burst shows when it overlaps the window by a tenth of it (a tenth of the rise): it is
    // seen with probability (W + b - 2 W / 10) / P.
    analysis.sampling_window_s =
        std::clamp((update_period_s * seen_fraction - length_s) / 0.8, 0.0, update_period_s);
  }
  return analysis;
}

StepResponse step_response(std::span<const TimedValue> power_mw, double step_s, double end_s,
                           double idle_w, double busy_w) {
  StepResponse response;
  const double tenth_mw = (idle_w + 0.1 * (busy_w - idle_w)) * 1e3;
  const double nine_tenths_mw = (idle_w + 0.9 * (busy_w - idle_w)) * 1e3;
  std::optional<double> t10;
  for (const TimedValue& sample : power_mw) {
    if (sample.t_s < step_s || sample.t_s > end_s) {
      continue;
    }
    if (!t10 && sample.value >= tenth_mw) {
      t10 = sample.t_s;
    }
    if (t10 && sample.value >= nine_tenths_mw) {
      response.rise_s = sample.t_s - *t10;
      break;
    }
  }
  if (t10) {
    response.delay_s = *t10 - step_s;
  }
  return response;
}

}  // namespace zeus::device
