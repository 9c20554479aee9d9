// Per-window energy and duration histograms in the Prometheus text format (docs/prometheus.md).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeus/monitor/measurement.hpp"

namespace zeus::metrics {

// Upper bounds of the window histograms, strictly increasing and finite (+Inf is implicit). The
// defaults are the reference's (energy) and 0.1 s to 1 h (duration).
struct HistogramBuckets {
  std::vector<double> gpu_energy_j = {50, 100, 200, 500, 1000};
  std::vector<double> cpu_energy_j = {10, 50, 100, 500, 1000};
  std::vector<double> dram_energy_j = {5, 10, 20, 50, 150};
  std::vector<double> duration_s = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600};
};

// Histograms per measurement window, with the reference's metric names:
//   energy_monitor_gpu_energy_joules{window,index}, energy_monitor_cpu_energy_joules{window,index},
//   energy_monitor_dram_energy_joules{window,index} and zeus_window_duration_seconds{window}.
// Thread-safe; observe() is cheap (no allocation once a window/index pair was seen).
class WindowHistograms {
 public:
  using Buckets = HistogramBuckets;
  WindowHistograms() : WindowHistograms(HistogramBuckets()) {}
  // Throws Error(kInvalidArgument) naming the list for an empty, unsorted or non-finite one.
  explicit WindowHistograms(HistogramBuckets buckets);

  void observe(const std::string& window, const monitor::Measurement& measurement);
  // Appends the four families (a family without any observation is still declared).
  void render(std::string& out) const;

 private:
  struct Histogram {
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative; last = +Inf
    double sum = 0.0;
    std::uint64_t count = 0;
  };
  using Key = std::pair<std::string, int>;  // window, device index (-1: none)
  static void add(std::map<Key, Histogram>& series, const std::vector<double>& bounds,
                  const std::string& window, int index, double value);
  static void render_family(std::string& out, std::string_view name, std::string_view help,
                            const std::vector<double>& bounds,
                            const std::map<Key, Histogram>& series, bool with_index);

  Buckets buckets_;
  mutable std::mutex mutex_;
  std::map<Key, Histogram> gpu_;
  std::map<Key, Histogram> cpu_;
  std::map<Key, Histogram> dram_;
  std::map<Key, Histogram> duration_;
};

}  // namespace zeus::metrics
