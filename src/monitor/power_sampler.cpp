#include "zeus/monitor/power_sampler.hpp"

#include <time.h>
#include <algorithm>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <set>

#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::monitor {

namespace {

constexpr const char* kOverflowAdvice =
    "raise max_samples_per_series or use the compacting or drop-oldest policy";

}  // namespace

PowerSampler::PowerSampler(const device::Gpus& gpus, PowerSamplerOptions options)
    : clock_(options.clock ? options.clock : steady_clock()),
      max_samples_(std::max<std::size_t>(1, options.max_samples_per_series)),
      overflow_(options.overflow),
      read_errors_(options.read_errors),
      on_sweep_(std::move(options.on_sweep)),
      temperature_(options.temperature),
      on_temperature_change_(std::move(options.on_temperature_change)) {
  if (options.gpu_indices.empty()) {
    for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
      options.gpu_indices.push_back(i);
    }
  }
  if (options.gpu_indices.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the power sampler needs at least one GPU, and no GPU is available");
  }
  if (options.domains.empty() && !options.temperature) {
    throw Error(ErrorKind::kInvalidArgument,
                "the power sampler needs at least one power domain, or temperature");
  }
  for (const PowerDomain domain : options.domains) {
    if (std::find(domains_.begin(), domains_.end(), domain) == domains_.end()) {
      domains_.push_back(domain);
    }
  }
  for (const int index : options.gpu_indices) {
    if (std::find(gpu_indices_.begin(), gpu_indices_.end(), index) != gpu_indices_.end()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "GPU " + std::to_string(index) + " is listed twice for the power sampler");
    }
    gpus_.push_back(gpus.shared(index));  // throws listing the valid indices
    gpu_indices_.push_back(index);
  }
  // Every (GPU, domain) must be readable now, so that the user learns of it here; a sampler
  // that holds through failed reads only refuses what the GPU cannot do at all.
  const bool holds = read_errors_ == ReadErrorPolicy::kCountAndHold;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    for (const PowerDomain domain : domains_) {
      try {
        read_power_mw(*gpus_[i], domain);
      } catch (const Error& error) {
        if (error.kind() == ErrorKind::kNotSupported) {
          throw Error(ErrorKind::kNotSupported,
                      "GPU " + std::to_string(gpu_indices_[i]) + " (" + gpus_[i]->name() +
                          ") does not support the power domain " +
                          std::string(power_domain_name(domain)) + ": " + error.what());
        }
        if (!holds) {
          throw;
        }
      }
    }
  }
  if (temperature_) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      try {
        (void)gpus_[i]->temperature_c();
      } catch (const Error& error) {
        if (holds && error.kind() != ErrorKind::kNotSupported) {
          continue;
        }
        throw Error(error.kind(), "GPU " + std::to_string(gpu_indices_[i]) + " (" +
                                      gpus_[i]->name() +
                                      ") cannot report its temperature: " + error.what());
      }
    }
    temperatures_.assign(gpus_.size(), HeldSeries(max_samples_, overflow_));
  }
  series_.assign(domains_.size() * gpu_indices_.size(), HeldSeries(max_samples_, overflow_));
  failed_sweeps_.assign(gpu_indices_.size(), 0);
  if (options.period_s) {
    if (!(*options.period_s >= kMinSamplingPeriodS)) {
      throw Error(ErrorKind::kInvalidArgument, "sampling period " +
                                                   std::to_string(*options.period_s) +
                                                   " s is below the minimum of 1 ms");
    }
    if (!(*options.period_s <= kMaxSamplingPeriodS)) {
      throw Error(ErrorKind::kInvalidArgument, "sampling period " +
                                                   std::to_string(*options.period_s) +
                                                   " s is above the maximum of 86400 s (one day)");
    }
    period_s_ = *options.period_s;
  } else if (domains_.empty()) {
    period_s_ = kDefaultTemperaturePeriodS;
  } else {
    std::set<std::string> models;
    period_s_ = 0.1;
    for (const auto& gpu : gpus_) {
      if (models.insert(gpu->name()).second) {
        period_s_ =
            std::min(period_s_, infer_power_update_period_s(*gpu, domains_.front(), *clock_));
      }
    }
  }
  sweep_.reserve(gpus_.size() * domains_.size());
  if (options.start_thread) {
    thread_ = std::thread([this] { run(); });
  }
}

PowerSampler::~PowerSampler() {
  stop();
}

void PowerSampler::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stopping_flag_.store(true, std::memory_order_release);
  stop_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void PowerSampler::run() {
  const auto period = std::chrono::nanoseconds(units::nanoseconds_from_seconds(period_s_));
  // Short periods sleep with clock_nanosleep (the cheapest wake-up; stop() then waits at most
  // one period); longer ones wait on the condition variable so that stop() is immediate.
  const bool short_period = period <= std::chrono::milliseconds(10);
  auto next = std::chrono::steady_clock::now();
  while (!stopping_flag_.load(std::memory_order_acquire)) {
    sample_once();
    {
      std::lock_guard lock(mutex_);
      if (error_) {
        return;
      }
    }
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) {
      next = now;  // fell behind: skip the missed sweeps rather than bursting
    }
    if (short_period) {
      const auto since_epoch = next.time_since_epoch();
      timespec until{};
      until.tv_sec = static_cast<time_t>(
          std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count());
      until.tv_nsec = static_cast<long>((since_epoch - std::chrono::seconds(until.tv_sec)).count());
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
      }
    } else {
      std::unique_lock lock(stop_mutex_);
      if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) {
        return;
      }
    }
  }
}

void PowerSampler::record_error(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) {
    error_ = std::move(error);
  }
}

bool PowerSampler::stops_on(const Error& error, std::size_t gpu) {
  if (read_errors_ == ReadErrorPolicy::kStop) {
    record_error(std::make_exception_ptr(error));
    return true;
  }
  sweep_failed_[gpu] = 1;
  return false;
}

void PowerSampler::sample_once() {
  std::lock_guard sweep_lock(sweep_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (error_) {
      return;
    }
  }
  const std::int64_t now_ns = clock_->now_ns();
  sweep_.clear();
  sweep_series_.clear();
  sweep_failed_.assign(gpus_.size(), 0);
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    const PowerDomain domain = domains_[d];
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      try {
        const double power_w = units::watts_from_milliwatts(read_power_mw(*gpus_[i], domain));
        sweep_.push_back({now_ns, gpu_indices_[i], domain, power_w});
        sweep_series_.push_back(d * gpus_.size() + i);
      } catch (const Error& error) {
        if (stops_on(Error(error.kind(), "power sampler: reading " +
                                             std::string(power_domain_name(domain)) +
                                             " power of GPU " + std::to_string(gpu_indices_[i]) +
                                             " failed: " + error.what()),
                     i)) {
          return;
        }
      }
    }
  }
  if (temperature_ && !read_temperatures(now_ns)) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    if (!store_temperatures_locked()) {
      return;
    }
    for (std::size_t i = 0; i < sweep_failed_.size(); ++i) {
      failed_sweeps_[i] += sweep_failed_[i] != 0 ? 1 : 0;
    }
    for (std::size_t k = 0; k < sweep_.size(); ++k) {
      const PowerSample& sample = sweep_[k];
      HeldSeries& target = series_[sweep_series_[k]];
      if (target.full()) {
        error_ = std::make_exception_ptr(
            Error(ErrorKind::kMemory,
                  "power sampler: the timeline of GPU " + std::to_string(sample.gpu_index) + " (" +
                      std::string(power_domain_name(sample.domain)) + ") is full at " +
                      std::to_string(max_samples_) + " samples; " + kOverflowAdvice));
        return;
      }
      // A sample older than the last (a clock that went backwards) is left out: the series
      // stays ordered.
      target.push(sample.time_ns, sample.power_w);
    }
  }
  if (on_sweep_ && !sweep_.empty()) {
    on_sweep_(sweep_);
  }
  if (on_temperature_change_ && !temperature_sweep_.empty()) {
    on_temperature_change_(temperature_sweep_);
  }
}

bool PowerSampler::read_temperatures(std::int64_t now_ns) {
  temperature_sweep_.clear();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    int temperature_c = 0;
    try {
      temperature_c = gpus_[i]->temperature_c();
    } catch (const Error& error) {
      if (stops_on(
              Error(error.kind(), "power sampler: reading the temperature of GPU " +
                                      std::to_string(gpu_indices_[i]) + " failed: " + error.what()),
              i)) {
        return false;
      }
      continue;
    }
    // Only changes are kept; temperatures_ is read without the lock here, which is safe because
    // only sweeps (serialized by sweep_mutex_) modify it.
    const std::optional<HeldPoint> last = temperatures_[i].last();
    if (!last || last->value != temperature_c) {
      temperature_sweep_.push_back({now_ns, gpu_indices_[i], temperature_c});
    }
  }
  return true;
}

bool PowerSampler::store_temperatures_locked() {
  for (const TemperatureSample& sample : temperature_sweep_) {
    const auto at = std::find(gpu_indices_.begin(), gpu_indices_.end(), sample.gpu_index);
    HeldSeries& series = temperatures_[static_cast<std::size_t>(at - gpu_indices_.begin())];
    if (series.full()) {
      error_ = std::make_exception_ptr(Error(
          ErrorKind::kMemory, "power sampler: the temperature timeline of GPU " +
                                  std::to_string(sample.gpu_index) + " is full at " +
                                  std::to_string(max_samples_) + " samples; " + kOverflowAdvice));
      return false;
    }
    series.push(sample.time_ns, sample.temperature_c);  // an older one is left out
  }
  return true;
}

const HeldSeries& PowerSampler::temperature_series(int gpu_index) const {
  const auto gpu_at = std::find(gpu_indices_.begin(), gpu_indices_.end(), gpu_index);
  if (!temperature_ || gpu_at == gpu_indices_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the power sampler does not sample the temperature "
                "of GPU " +
                    std::to_string(gpu_index));
  }
  return temperatures_[static_cast<std::size_t>(gpu_at - gpu_indices_.begin())];
}

namespace {

TimelineResolution resolution_of(const HeldSeries& series) {
  return {series.exact_since_ns(), series.longest_span_ns(), series.rows()};
}

}  // namespace

std::vector<TemperatureSample> PowerSampler::temperature_timeline(
    int gpu_index, std::optional<std::int64_t> start_ns, std::optional<std::int64_t> end_ns) const {
  std::lock_guard lock(mutex_);
  std::vector<TemperatureSample> samples;
  for (const HeldPoint& point : temperature_series(gpu_index).points(start_ns, end_ns)) {
    samples.push_back(
        {point.time_ns, gpu_index, static_cast<int>(std::lround(point.value)), point.span_ns});
  }
  return samples;
}

std::optional<int> PowerSampler::temperature_c(int gpu_index,
                                               std::optional<std::int64_t> time_ns) const {
  std::lock_guard lock(mutex_);
  const HeldSeries& series = temperature_series(gpu_index);
  const std::optional<HeldPoint> point = time_ns ? series.at(*time_ns) : series.last();
  if (!point) {
    return std::nullopt;
  }
  return static_cast<int>(std::lround(point->value));
}

TimelineResolution PowerSampler::temperature_resolution(int gpu_index) const {
  std::lock_guard lock(mutex_);
  return resolution_of(temperature_series(gpu_index));
}

const HeldSeries& PowerSampler::series(PowerDomain domain, int gpu_index) const {
  const auto domain_at = std::find(domains_.begin(), domains_.end(), domain);
  const auto gpu_at = std::find(gpu_indices_.begin(), gpu_indices_.end(), gpu_index);
  if (domain_at == domains_.end() || gpu_at == gpu_indices_.end()) {
    throw Error(ErrorKind::kInvalidArgument, "the power sampler does not sample " +
                                                 std::string(power_domain_name(domain)) +
                                                 " power of GPU " + std::to_string(gpu_index));
  }
  return series_[static_cast<std::size_t>(domain_at - domains_.begin()) * gpu_indices_.size() +
                 static_cast<std::size_t>(gpu_at - gpu_indices_.begin())];
}

std::optional<double> PowerSampler::cumulative_energy_j(PowerDomain domain, int gpu_index,
                                                        std::int64_t time_ns) const {
  std::lock_guard lock(mutex_);
  const std::optional<HeldIntegral> energy = series(domain, gpu_index).integral_to(time_ns);
  return energy ? std::optional<double>(energy->value) : std::nullopt;
}

std::optional<HeldIntegral> PowerSampler::energy_with_bound_j(PowerDomain domain, int gpu_index,
                                                              std::int64_t start_ns,
                                                              std::int64_t end_ns) const {
  std::lock_guard lock(mutex_);
  return series(domain, gpu_index).integral(start_ns, end_ns);
}

std::optional<double> PowerSampler::energy_j(PowerDomain domain, int gpu_index,
                                             std::int64_t start_ns, std::int64_t end_ns) const {
  const std::optional<HeldIntegral> energy =
      energy_with_bound_j(domain, gpu_index, start_ns, end_ns);
  return energy ? std::optional<double>(energy->value) : std::nullopt;
}

std::optional<double> PowerSampler::power_w(PowerDomain domain, int gpu_index,
                                            std::optional<std::int64_t> time_ns) const {
  std::lock_guard lock(mutex_);
  const HeldSeries& target = series(domain, gpu_index);
  const std::optional<HeldPoint> point = time_ns ? target.at(*time_ns) : target.last();
  return point ? std::optional<double>(point->value) : std::nullopt;
}

std::vector<PowerSample> PowerSampler::timeline(PowerDomain domain, int gpu_index,
                                                std::optional<std::int64_t> start_ns,
                                                std::optional<std::int64_t> end_ns) const {
  std::lock_guard lock(mutex_);
  std::vector<PowerSample> samples;
  for (const HeldPoint& point : series(domain, gpu_index).points(start_ns, end_ns)) {
    samples.push_back({point.time_ns, gpu_index, domain, point.value, point.span_ns});
  }
  return samples;
}

TimelineResolution PowerSampler::resolution(PowerDomain domain, int gpu_index) const {
  std::lock_guard lock(mutex_);
  return resolution_of(series(domain, gpu_index));
}

std::uint64_t PowerSampler::dropped_samples() const {
  std::lock_guard lock(mutex_);
  std::uint64_t dropped = 0;
  for (const HeldSeries& series : series_) {
    dropped += series.dropped();
  }
  for (const HeldSeries& series : temperatures_) {
    dropped += series.dropped();
  }
  return dropped;
}

std::uint64_t PowerSampler::failed_sweeps(int gpu_index) const {
  const auto at = std::find(gpu_indices_.begin(), gpu_indices_.end(), gpu_index);
  if (at == gpu_indices_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "GPU " + std::to_string(gpu_index) + " is not sampled by this power sampler");
  }
  std::lock_guard lock(mutex_);
  return failed_sweeps_[static_cast<std::size_t>(at - gpu_indices_.begin())];
}

void PowerSampler::rethrow_if_failed() const {
  std::lock_guard lock(mutex_);
  if (error_) {
    std::rethrow_exception(error_);
  }
}

}  // namespace zeus::monitor
