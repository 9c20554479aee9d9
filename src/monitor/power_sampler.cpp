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

std::uint32_t read_power_mw(device::Gpu& gpu, PowerDomain domain) {
  switch (domain) {
    case PowerDomain::kDeviceInstant:
      return gpu.instant_power_mw();
    case PowerDomain::kDeviceAverage:
      return gpu.average_power_mw();
    case PowerDomain::kMemoryAverage:
      return gpu.average_memory_power_mw();
  }
  return 0;
}

namespace {

template <typename Read>
bool answers(Read read) {
  try {
    read();
    return true;
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNotSupported) {
      return false;
    }
    throw;
  }
}

}  // namespace

bool supports_power_domain(device::Gpu& gpu, PowerDomain domain) {
  return answers([&] { (void)read_power_mw(gpu, domain); });
}

bool supports_temperature(device::Gpu& gpu) {
  return answers([&] { (void)gpu.temperature_c(); });
}

std::string_view power_domain_name(PowerDomain domain) {
  switch (domain) {
    case PowerDomain::kDeviceInstant:
      return "device_instant";
    case PowerDomain::kDeviceAverage:
      return "device_average";
    case PowerDomain::kMemoryAverage:
      return "memory_average";
  }
  return "unknown";
}

PowerDomain parse_power_domain(std::string_view text) {
  if (text == "device_instant" || text == "instant") {
    return PowerDomain::kDeviceInstant;
  }
  if (text == "device_average" || text == "average") {
    return PowerDomain::kDeviceAverage;
  }
  if (text == "memory_average" || text == "memory") {
    return PowerDomain::kMemoryAverage;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown power domain \"" + std::string(text) +
                  "\"; use device_instant (instant), device_average (average) or "
                  "memory_average (memory)");
}

double infer_power_update_period_s(device::Gpu& gpu, PowerDomain domain, Clock& clock,
                                   double budget_s) {
  constexpr int kMaxReads = 2000;
  constexpr double kDefaultPeriodS = 0.1;
  const std::int64_t start_ns = clock.now_ns();
  const auto budget_ns = units::nanoseconds_from_seconds(budget_s);
  std::optional<std::uint32_t> previous_mw;
  std::optional<std::int64_t> previous_change_ns;
  std::optional<std::int64_t> shortest_ns;
  for (int i = 0; i < kMaxReads; ++i) {
    const std::int64_t now_ns = clock.now_ns();
    if (now_ns - start_ns > budget_ns) {
      break;
    }
    const std::uint32_t value_mw = read_power_mw(gpu, domain);
    if (previous_mw && value_mw != *previous_mw) {
      // The first change only marks a start: the interval before it is partial.
      if (previous_change_ns) {
        const std::int64_t interval_ns = now_ns - *previous_change_ns;
        if (interval_ns > 0 && (!shortest_ns || interval_ns < *shortest_ns)) {
          shortest_ns = interval_ns;
        }
      }
      previous_change_ns = now_ns;
    }
    previous_mw = value_mw;
  }
  if (!shortest_ns) {
    return kDefaultPeriodS;
  }
  return std::clamp(units::seconds_from_nanoseconds(*shortest_ns) / 2.0, kMinSamplingPeriodS,
                    kDefaultPeriodS);
}

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
    temperatures_.resize(gpus_.size());
  }
  series_.resize(domains_.size() * gpu_indices_.size());
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
      Series& target = series_[sweep_series_[k]];
      double energy_j = 0.0;
      if (!target.entries.empty()) {
        const Entry& last = target.entries.back();
        if (sample.time_ns < last.time_ns) {
          continue;  // a clock that went backwards; keep the series ordered
        }
        energy_j = last.energy_j +
                   last.power_w * units::seconds_from_nanoseconds(sample.time_ns - last.time_ns);
      }
      if (target.entries.size() >= max_samples_) {
        if (overflow_ == OverflowPolicy::kError) {
          error_ = std::make_exception_ptr(
              Error(ErrorKind::kMemory,
                    "power sampler: the timeline of GPU " + std::to_string(sample.gpu_index) +
                        " (" + std::string(power_domain_name(sample.domain)) + ") is full at " +
                        std::to_string(max_samples_) +
                        " samples; raise max_samples_per_series or use the drop-oldest policy"));
          return;
        }
        target.entries.pop_front();
        target.dropped = true;
        ++dropped_;
      }
      target.entries.push_back({sample.time_ns, sample.power_w, energy_j});
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
    const std::deque<TemperatureSample>& series = temperatures_[i];
    if (series.empty() || series.back().temperature_c != temperature_c) {
      temperature_sweep_.push_back({now_ns, gpu_indices_[i], temperature_c});
    }
  }
  return true;
}

bool PowerSampler::store_temperatures_locked() {
  for (const TemperatureSample& sample : temperature_sweep_) {
    const auto at = std::find(gpu_indices_.begin(), gpu_indices_.end(), sample.gpu_index);
    std::deque<TemperatureSample>& series =
        temperatures_[static_cast<std::size_t>(at - gpu_indices_.begin())];
    if (!series.empty() && sample.time_ns < series.back().time_ns) {
      continue;  // a clock that went backwards; keep the series ordered
    }
    if (series.size() >= max_samples_) {
      if (overflow_ == OverflowPolicy::kError) {
        error_ = std::make_exception_ptr(Error(
            ErrorKind::kMemory,
            "power sampler: the temperature timeline of GPU " + std::to_string(sample.gpu_index) +
                " is full at " + std::to_string(max_samples_) +
                " samples; raise max_samples_per_series or use the drop-oldest policy"));
        return false;
      }
      series.pop_front();
      ++dropped_;
    }
    series.push_back(sample);
  }
  return true;
}

const std::deque<TemperatureSample>& PowerSampler::temperature_series(int gpu_index) const {
  const auto gpu_at = std::find(gpu_indices_.begin(), gpu_indices_.end(), gpu_index);
  if (!temperature_ || gpu_at == gpu_indices_.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the power sampler does not sample the temperature "
                "of GPU " +
                    std::to_string(gpu_index));
  }
  return temperatures_[static_cast<std::size_t>(gpu_at - gpu_indices_.begin())];
}

std::vector<TemperatureSample> PowerSampler::temperature_timeline(
    int gpu_index, std::optional<std::int64_t> start_ns, std::optional<std::int64_t> end_ns) const {
  std::lock_guard lock(mutex_);
  std::vector<TemperatureSample> samples;
  for (const TemperatureSample& sample : temperature_series(gpu_index)) {
    if ((start_ns && sample.time_ns < *start_ns) || (end_ns && sample.time_ns > *end_ns)) {
      continue;
    }
    samples.push_back(sample);
  }
  return samples;
}

std::optional<int> PowerSampler::temperature_c(int gpu_index,
                                               std::optional<std::int64_t> time_ns) const {
  std::lock_guard lock(mutex_);
  const std::deque<TemperatureSample>& series = temperature_series(gpu_index);
  if (series.empty()) {
    return std::nullopt;
  }
  if (!time_ns) {
    return series.back().temperature_c;
  }
  const auto after = std::upper_bound(
      series.begin(), series.end(), *time_ns,
      [](std::int64_t time, const TemperatureSample& sample) { return time < sample.time_ns; });
  if (after == series.begin()) {
    return std::nullopt;
  }
  return std::prev(after)->temperature_c;
}

const PowerSampler::Series& PowerSampler::series(PowerDomain domain, int gpu_index) const {
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

std::optional<std::size_t> PowerSampler::entry_at(const Series& series, std::int64_t time_ns) {
  const auto& entries = series.entries;
  const auto after =
      std::upper_bound(entries.begin(), entries.end(), time_ns,
                       [](std::int64_t time, const Entry& entry) { return time < entry.time_ns; });
  if (after == entries.begin()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::distance(entries.begin(), after) - 1);
}

std::optional<double> PowerSampler::energy_at(const Series& series, std::int64_t time_ns) {
  if (series.entries.empty()) {
    return std::nullopt;
  }
  const std::optional<std::size_t> index = entry_at(series, time_ns);
  // Before the first kept sample, hold that sample's value backwards.
  const Entry& entry = index ? series.entries[*index] : series.entries.front();
  return entry.energy_j + entry.power_w * units::seconds_from_nanoseconds(time_ns - entry.time_ns);
}

std::optional<double> PowerSampler::cumulative_energy_j(PowerDomain domain, int gpu_index,
                                                        std::int64_t time_ns) const {
  std::lock_guard lock(mutex_);
  return energy_at(series(domain, gpu_index), time_ns);
}

std::optional<double> PowerSampler::energy_j(PowerDomain domain, int gpu_index,
                                             std::int64_t start_ns, std::int64_t end_ns) const {
  std::lock_guard lock(mutex_);
  const Series& target = series(domain, gpu_index);
  if (target.entries.empty() || end_ns < start_ns ||
      (target.dropped && start_ns < target.entries.front().time_ns)) {
    return std::nullopt;
  }
  return *energy_at(target, end_ns) - *energy_at(target, start_ns);
}

std::optional<double> PowerSampler::power_w(PowerDomain domain, int gpu_index,
                                            std::optional<std::int64_t> time_ns) const {
  std::lock_guard lock(mutex_);
  const Series& target = series(domain, gpu_index);
  if (target.entries.empty()) {
    return std::nullopt;
  }
  if (!time_ns) {
    return target.entries.back().power_w;
  }
  const std::optional<std::size_t> index = entry_at(target, *time_ns);
  if (!index) {
    return std::nullopt;
  }
  return target.entries[*index].power_w;
}

std::vector<PowerSample> PowerSampler::timeline(PowerDomain domain, int gpu_index,
                                                std::optional<std::int64_t> start_ns,
                                                std::optional<std::int64_t> end_ns) const {
  std::lock_guard lock(mutex_);
  std::vector<PowerSample> samples;
  for (const Entry& entry : series(domain, gpu_index).entries) {
    if ((start_ns && entry.time_ns < *start_ns) || (end_ns && entry.time_ns > *end_ns)) {
      continue;
    }
    samples.push_back({entry.time_ns, gpu_index, domain, entry.power_w});
  }
  return samples;
}

std::uint64_t PowerSampler::dropped_samples() const {
  std::lock_guard lock(mutex_);
  return dropped_;
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
