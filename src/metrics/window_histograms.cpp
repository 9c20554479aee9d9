// The per-window energy and duration histograms, rendered in the text exposition format.
#include "zeus/metrics/window_histograms.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "metrics/exposition.hpp"
#include "zeus/common/error.hpp"

namespace zeus::metrics {

namespace {

void check_bounds(const std::vector<double>& bounds, std::string_view what) {
  if (bounds.empty()) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("the {} histogram buckets are empty; give at least one upper bound", what));
  }
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("the {} histogram buckets must be finite and strictly increasing "
                              "(+Inf is implicit); got {}",
                              what, fmt::join(bounds, ", ")));
    }
  }
}

}  // namespace

WindowHistograms::WindowHistograms(HistogramBuckets buckets) : buckets_(std::move(buckets)) {
  check_bounds(buckets_.gpu_energy_j, "GPU energy");
  check_bounds(buckets_.cpu_energy_j, "CPU energy");
  check_bounds(buckets_.dram_energy_j, "DRAM energy");
  check_bounds(buckets_.duration_s, "window duration");
}

void WindowHistograms::add(std::map<Key, Histogram>& series, const std::vector<double>& bounds,
                           const std::string& window, int index, double value) {
  auto it = series.find(Key(window, index));
  if (it == series.end()) {
    Histogram fresh;
    fresh.counts.assign(bounds.size() + 1, 0);
    it = series.emplace(Key(window, index), std::move(fresh)).first;
  }
  Histogram& histogram = it->second;
  // The first bucket whose upper bound is >= value ("le" is inclusive).
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++histogram.counts[bucket];
  histogram.sum += value;
  ++histogram.count;
}

void WindowHistograms::observe(const std::string& window, const monitor::Measurement& measurement) {
  const std::lock_guard lock(mutex_);
  for (const auto& [index, joules] : measurement.gpu_energy_j) {
    add(gpu_, buckets_.gpu_energy_j, window, index, joules);
  }
  for (const auto& [index, joules] : measurement.cpu_energy_j) {
    add(cpu_, buckets_.cpu_energy_j, window, index, joules);
  }
  for (const auto& [index, joules] : measurement.dram_energy_j) {
    add(dram_, buckets_.dram_energy_j, window, index, joules);
  }
  add(duration_, buckets_.duration_s, window, -1, measurement.time_s);
}

void WindowHistograms::render_family(std::string& out, std::string_view name, std::string_view help,
                                     const std::vector<double>& bounds,
                                     const std::map<Key, Histogram>& series, bool with_index) {
  write_family_header(out, name, "histogram", help);
  for (const auto& [key, histogram] : series) {
    std::string labels = fmt::format("window=\"{}\"", escape_label_value(key.first));
    if (with_index) {
      labels.append(fmt::format(",index=\"{}\"", key.second));
    }
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += histogram.counts[i];
      const std::string le = i < bounds.size() ? format_value(bounds[i]) : "+Inf";
      fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le,
                     cumulative);
    }
    fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n", name, labels,
                   format_value(histogram.sum));
    fmt::format_to(std::back_inserter(out), "{}_count{{{}}} {}\n", name, labels, histogram.count);
  }
}

void WindowHistograms::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  render_family(out, "energy_monitor_gpu_energy_joules",
                "GPU energy of each measurement window, in joules", buckets_.gpu_energy_j, gpu_,
                true);
  render_family(out, "energy_monitor_cpu_energy_joules",
                "CPU package energy of each measurement window, in joules", buckets_.cpu_energy_j,
                cpu_, true);
  render_family(out, "energy_monitor_dram_energy_joules",
                "DRAM energy of each measurement window, in joules", buckets_.dram_energy_j, dram_,
                true);
  render_family(out, "zeus_window_duration_seconds", "Duration of each measurement window",
                buckets_.duration_s, duration_, false);
}

}  // namespace zeus::metrics
