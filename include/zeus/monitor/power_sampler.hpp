// The background power sampler: one thread per sampler polls GPU power in one or more domains
// at a fixed period, keeps a timeline per (domain, GPU) in bounded memory (a HeldSeries: the
// oldest readings compacted, never forgotten, by default), and integrates each series as a
// sample-and-hold signal into a cumulative energy counter. The same sweep can read each GPU's
// temperature (kept only when it changes: temperature moves in whole degrees, slowly).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/held_series.hpp"

namespace zeus::monitor {

enum class PowerDomain {
  kDeviceInstant,  // Gpu::instant_power_mw
  kDeviceAverage,  // Gpu::average_power_mw (about a 1 s average)
  kMemoryAverage,  // Gpu::average_memory_power_mw
};

// "device_instant", "device_average", "memory_average" (the reference's names).
std::string_view power_domain_name(PowerDomain domain);
// One reading of `domain` (Gpu::instant_power_mw, average_power_mw or average_memory_power_mw).
std::uint32_t read_power_mw(device::Gpu& gpu, PowerDomain domain);

// Whether `gpu` can read `domain` (or its temperature) at all: true when a read answers, false
// when it says kNotSupported; any other failure propagates (a transient error is no answer). The
// one probe of what a GPU offers, for every reader that chooses its domains.
bool supports_power_domain(device::Gpu& gpu, PowerDomain domain);
bool supports_temperature(device::Gpu& gpu);

// Accepts those names and the short forms "instant", "average", "memory". Throws
// Error(kInvalidArgument) listing them.
PowerDomain parse_power_domain(std::string_view text);

// What a failed read does to the sampler.
enum class ReadErrorPolicy {
  kStop,          // stop sampling and surface the error to the caller (rethrow_if_failed)
  kCountAndHold,  // count it (failed_sweeps) and go on: the series keeps its last value
};

struct PowerSample {
  std::int64_t time_ns = 0;  // on the sampler's clock
  int gpu_index = 0;
  PowerDomain domain = PowerDomain::kDeviceInstant;
  double power_w = 0.0;
  // 0 for a sample; in a timeline's compacted past, the length of the span whose mean power this
  // row holds (HeldPoint::span_ns).
  std::int64_t span_ns = 0;
};

// One temperature reading that differs from the one before it (or the first).
struct TemperatureSample {
  std::int64_t time_ns = 0;  // on the sampler's clock
  int gpu_index = 0;
  int temperature_c = 0;
  // 0 for a reading; in a compacted past, the length of the span whose mean (rounded) this is.
  std::int64_t span_ns = 0;
};

// How finely a series keeps its past.
struct TimelineResolution {
  // The oldest exact row; older rows are compacted spans (or were dropped). nullopt: every
  // reading since the first is kept exactly.
  std::optional<std::int64_t> exact_since_ns;
  std::int64_t longest_span_ns = 0;  // the coarsest compacted span (0 when none)
  std::size_t rows = 0;              // rows kept (at most max_samples_per_series)
};

// 65,536 rows: about 2 MiB a series; at 10 Hz the last 32,768 samples (55 minutes) stay exact
// once a run is longer than 109 minutes, and the rest of it, however long, is compacted.
inline constexpr std::size_t kDefaultMaxSamplesPerSeries = std::size_t{1} << 16;

struct PowerSamplerOptions {
  std::vector<int> gpu_indices;  // indices into the Gpus given; empty = all
  // May be empty when `temperature` is on (a temperature-only sampler).
  std::vector<PowerDomain> domains = {PowerDomain::kDeviceInstant};
  // Also read Gpu::temperature_c in every sweep; a temperature-only sampler without period_s
  // polls once a second.
  bool temperature = false;
  // Sampling period; nullopt infers it from how often the readings change. Must be >= 1 ms.
  std::optional<double> period_s;
  // The rows each (domain, GPU) series and each temperature series keeps: exact samples plus, once
  // a run outgrows them, compacted spans (at most half; HeldSeries). About 32 bytes a row.
  std::size_t max_samples_per_series = kDefaultMaxSamplesPerSeries;
  OverflowPolicy overflow = OverflowPolicy::kCompact;
  // kStop for measurement, where a stale value would be a wrong answer; kCountAndHold for a
  // long-lived view such as the Prometheus exporter, which must outlive a GPU's bad second.
  ReadErrorPolicy read_errors = ReadErrorPolicy::kStop;
  std::shared_ptr<Clock> clock;  // the steady clock when null
  // Start the background thread. Tests leave it off and call sample_once() with a ManualClock.
  bool start_thread = true;
  // Called from the sampler thread after every sweep with that sweep's samples (for streaming a
  // timeline to a file without keeping it in memory). Must be quick and must not throw.
  std::function<void(const std::vector<PowerSample>&)> on_sweep;
  // The same for the temperatures that changed in a sweep (only called when one did).
  std::function<void(const std::vector<TemperatureSample>&)> on_temperature_change;
};

// The period of a temperature-only sampler when none is given.
inline constexpr double kDefaultTemperaturePeriodS = 1.0;

// The periods accepted: 1 ms to one day (longer would overflow the nanosecond clock arithmetic
// long before it made sense).
inline constexpr double kMinSamplingPeriodS = 0.001;
inline constexpr double kMaxSamplingPeriodS = 86400.0;

class PowerSampler {
 public:
  // Throws Error(kInvalidArgument) for an empty domain list, an invalid GPU index, a period
  // below 1 ms, and Error(kNotSupported) naming the GPU and domain that cannot be read.
  PowerSampler(const device::Gpus& gpus, PowerSamplerOptions options);
  ~PowerSampler();
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  // Stops the thread (idempotent). Queries keep working on what was collected.
  void stop();
  // One sweep at the clock's current time (what the thread does every period).
  void sample_once();

  double period_s() const { return period_s_; }
  const std::vector<int>& gpu_indices() const { return gpu_indices_; }
  const std::vector<PowerDomain>& domains() const { return domains_; }

  // Energy (J) of the sample-and-hold signal from the first sample up to `time_ns` (the latest
  // sample's power held forward). A monotonic virtual counter: the difference of two readings is
  // the exact integral over that interval. nullopt before the first sample.
  std::optional<double> cumulative_energy_j(PowerDomain domain, int gpu_index,
                                            std::int64_t time_ns) const;
  // Integral over [start_ns, end_ns] of the held signal (nullopt when empty, end < start, or the
  // interval reaches back before samples that kDropOldest forgot). Exact where both ends fall
  // among exact samples; within energy_with_bound_j's bound where one falls in a compacted span.
  std::optional<double> energy_j(PowerDomain domain, int gpu_index, std::int64_t start_ns,
                                 std::int64_t end_ns) const;
  // The same with the most by which it can differ from the exact integral of the samples
  // (HeldSeries::integral: 0 among exact samples).
  std::optional<HeldIntegral> energy_with_bound_j(PowerDomain domain, int gpu_index,
                                                  std::int64_t start_ns, std::int64_t end_ns) const;
  // The sample in force at `time_ns` (latest when unset; a compacted span's mean in the compacted
  // past); nullopt when none.
  std::optional<double> power_w(PowerDomain domain, int gpu_index,
                                std::optional<std::int64_t> time_ns = std::nullopt) const;
  // Rows with start_ns <= time <= end_ns, in time order: compacted spans (span_ns > 0, their mean
  // power) then the exact samples (span_ns == 0).
  std::vector<PowerSample> timeline(PowerDomain domain, int gpu_index,
                                    std::optional<std::int64_t> start_ns = std::nullopt,
                                    std::optional<std::int64_t> end_ns = std::nullopt) const;
  // How finely that timeline keeps its past.
  TimelineResolution resolution(PowerDomain domain, int gpu_index) const;
  // Samples forgotten (kDropOldest, or a bound of one row); compaction forgets none.
  std::uint64_t dropped_samples() const;
  // The sweeps in which a read of `gpu_index` (power or temperature) failed; always 0 with
  // ReadErrorPolicy::kStop. Throws Error(kInvalidArgument) for a GPU that is not sampled.
  std::uint64_t failed_sweeps(int gpu_index) const;

  bool samples_temperature() const { return temperature_; }
  // The temperature changes of `gpu_index` in [start_ns, end_ns] (either bound open), oldest
  // first; in the compacted past, one row per span (its rounded time-weighted mean, span_ns > 0).
  // Throws Error(kInvalidArgument) when temperature or that GPU is not sampled.
  std::vector<TemperatureSample> temperature_timeline(
      int gpu_index, std::optional<std::int64_t> start_ns = std::nullopt,
      std::optional<std::int64_t> end_ns = std::nullopt) const;
  // The temperature in force at `time_ns` (the last change at or before it, or the compacted
  // span's rounded mean; the latest when nullopt), or nullopt before the first reading.
  std::optional<int> temperature_c(int gpu_index,
                                   std::optional<std::int64_t> time_ns = std::nullopt) const;
  TimelineResolution temperature_resolution(int gpu_index) const;

  // Rethrows the error that stopped sampling (a device failing, overflow with kError), on every
  // call once it happened: later readings would be stale.
  void rethrow_if_failed() const;

 private:
  void record_error(std::exception_ptr error);
  const HeldSeries& series(PowerDomain domain, int gpu_index) const;
  const HeldSeries& temperature_series(int gpu_index) const;
  // Whether a failed read ends the sweep (kStop: recorded as the error) or is counted and
  // skipped (kCountAndHold: marks GPU `gpu` in sweep_failed_).
  bool stops_on(const Error& error, std::size_t gpu);
  // Reads every GPU's temperature into temperature_sweep_ (false after recording an error).
  bool read_temperatures(std::int64_t now_ns);
  // Appends the sweep's changes under mutex_ (false after recording an overflow error).
  bool store_temperatures_locked();
  void run();

  std::vector<std::shared_ptr<device::Gpu>> gpus_;  // parallel to gpu_indices_
  std::vector<int> gpu_indices_;
  std::vector<PowerDomain> domains_;
  std::shared_ptr<Clock> clock_;
  double period_s_ = 0.1;
  std::size_t max_samples_;
  OverflowPolicy overflow_;
  ReadErrorPolicy read_errors_;
  std::function<void(const std::vector<PowerSample>&)> on_sweep_;
  bool temperature_ = false;
  std::function<void(const std::vector<TemperatureSample>&)> on_temperature_change_;

  mutable std::mutex mutex_;                  // guards series_, temperatures_, error_; held briefly
  std::vector<HeldSeries> series_;            // domain-major: series_[d * gpus + g]
  std::vector<HeldSeries> temperatures_;      // per GPU: its changes
  std::vector<std::uint64_t> failed_sweeps_;  // per GPU (kCountAndHold)
  std::exception_ptr error_;

  std::mutex sweep_mutex_;                 // serializes sweeps (the thread and sample_once callers)
  std::vector<PowerSample> sweep_;         // reused between sweeps
  std::vector<std::size_t> sweep_series_;  // the series_ index of each sample of sweep_
  std::vector<char> sweep_failed_;         // per GPU: a read failed in this sweep
  std::vector<TemperatureSample> temperature_sweep_;  // the changes of one sweep

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::atomic<bool> stopping_flag_{false};
  std::thread thread_;
};

// Estimates how often `gpu`'s power reading changes, by polling it back to back for up to
// `budget_s` of `clock` time: half the shortest interval between changes, within [1 ms, 100 ms];
// 100 ms when it never changes.
double infer_power_update_period_s(device::Gpu& gpu, PowerDomain domain, Clock& clock,
                                   double budget_s = 0.2);

}  // namespace zeus::monitor
