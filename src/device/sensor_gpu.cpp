#include "zeus/device/sensor_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "device/periods.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device {
namespace {

std::int64_t checked_ns(double value_s, const char* what) {
  if (!std::isfinite(value_s) || value_s < 0.0 || value_s > 3600.0) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("sensor parameter ") + what +
                    " must be a finite number of seconds in [0, 3600], got " +
                    std::to_string(value_s),
                ErrorSubject::kGpu);
  }
  return units::nanoseconds_from_seconds(value_s);
}

SensorParameters published_or_throw(const std::shared_ptr<SimulatedGpu>& truth) {
  if (!truth) {
    throw Error(ErrorKind::kInvalidArgument, "SensorGpu needs a simulated GPU", ErrorSubject::kGpu);
  }
  auto parameters = published_sensor_parameters(truth->name());
  if (!parameters) {
    throw Error(ErrorKind::kInvalidArgument,
                "no published sensor parameters for " + truth->name() +
                    " (zeus/device/sensor.hpp lists the characterised models)",
                ErrorSubject::kGpu);
  }
  return *parameters;
}

}  // namespace

SensorGpu::SensorGpu(std::shared_ptr<SimulatedGpu> truth)
    : SensorGpu(truth, published_or_throw(truth)) {}

SensorGpu::SensorGpu(std::shared_ptr<SimulatedGpu> truth, SensorParameters parameters,
                     std::int64_t phase_ns)
    : ForwardingGpu(truth),
      truth_(std::move(truth)),
      parameters_(std::move(parameters)),
      phase_ns_(phase_ns),
      start_ns_(0),
      window_ns_(checked_ns(parameters_.power_sample_window_s, "power_sample_window_s")),
      period_ns_(checked_ns(parameters_.power_sample_period_s, "power_sample_period_s")),
      refresh_ns_(checked_ns(parameters_.counter_refresh_s, "counter_refresh_s")),
      average_ns_(checked_ns(parameters_.average_power_window_s, "average_power_window_s")),
      delay_ns_(checked_ns(parameters_.reading_delay_s, "reading_delay_s")) {
  if (!truth_) {
    throw Error(ErrorKind::kInvalidArgument, "SensorGpu needs a simulated GPU", ErrorSubject::kGpu);
  }
  if ((window_ns_ == 0) != (period_ns_ == 0) || window_ns_ > period_ns_) {
    throw Error(ErrorKind::kInvalidArgument,
                "sensor parameters: part-time sampling needs both a window and a period, the "
                "window no longer than the period (both 0: sampled all the time)",
                ErrorSubject::kGpu);
  }
  if (!(parameters_.counter_resolution_mj > 0.0) ||
      !std::isfinite(parameters_.counter_resolution_mj)) {
    throw Error(ErrorKind::kInvalidArgument,
                "sensor parameter counter_resolution_mj must be a finite number > 0",
                ErrorSubject::kGpu);
  }
  start_ns_ = truth_->clock()->now_ns();
  truth_->retain_history_from_ns(start_ns_);
  accrued_mj_ = truth_->energy_at_mj(start_ns_);
  next_sample_ = part_time() ? ceil_div(start_ns_ - phase_ns_, period_ns_) : 0;
  first_sample_ = next_sample_;
}

std::int64_t SensorGpu::sensor_time_ns(std::int64_t reading_ns) const {
  return std::max(start_ns_, reading_ns - delay_ns_);
}

std::int64_t SensorGpu::last_sample_at(std::int64_t t_ns) const {
  return floor_div(t_ns - phase_ns_ - window_ns_, period_ns_);
}

double SensorGpu::sample_mw(std::int64_t k) const {
  if (k < first_sample_) {  // no sample closed since the sensor started: its first reading
    return truth_->draw_at_mw(start_ns_);
  }
  return truth_->energy_between_mj(window_start_ns(k), window_end_ns(k)) /
         units::seconds_from_nanoseconds(window_ns_);
}

void SensorGpu::accrue_until_locked(std::int64_t t_ns) {
  while (window_end_ns(next_sample_) <= t_ns) {
    // The window's energy scaled to the whole period.
    const std::int64_t k = next_sample_;
    accrued_mj_ += truth_->energy_between_mj(window_start_ns(k), window_end_ns(k)) *
                   static_cast<double>(period_ns_) / static_cast<double>(window_ns_);
    ++next_sample_;
  }
}

// Keeps what later readings need: the samples not yet accrued, and the averaging window.
void SensorGpu::retain_locked(std::int64_t sensor_ns) {
  std::int64_t from_ns =
      sensor_ns - std::max(average_ns_ + period_ns_ + window_ns_, refresh_ns_ + period_ns_);
  if (counter_sampled()) {
    from_ns = std::min(from_ns, window_start_ns(next_sample_));
  }
  truth_->retain_history_from_ns(std::max(start_ns_, from_ns));
}

std::uint64_t SensorGpu::total_energy_mj() {
  if (!supports_energy_counter()) {
    return ForwardingGpu::total_energy_mj();  // the truth's kNotSupported
  }
  std::lock_guard lock(mutex_);
  const std::int64_t sensor_ns = sensor_time_ns(truth_->clock()->now_ns());
  std::int64_t refreshed_ns = sensor_ns;
  if (refresh_ns_ > 0) {
    refreshed_ns = std::max(
        start_ns_, phase_ns_ + floor_div(sensor_ns - phase_ns_, refresh_ns_) * refresh_ns_);
  }
  double energy_mj = 0.0;
  if (counter_sampled()) {
    accrue_until_locked(refreshed_ns);
    energy_mj = static_cast<double>(accrued_mj_);
  } else {
    energy_mj = truth_->energy_at_mj(refreshed_ns);
  }
  retain_locked(sensor_ns);
  // Whole steps of the resolution; the tolerance (1e-12 relative, far below any sensor's) keeps
  // the double arithmetic's rounding from turning an exact 7000 mJ into 6999.
  const double resolution_mj = parameters_.counter_resolution_mj;
  const double steps = std::floor(energy_mj / resolution_mj * (1.0 + 1e-12) + 1e-9);
  return static_cast<std::uint64_t>(std::max(0.0, steps) * resolution_mj);
}

std::uint32_t SensorGpu::instant_power_mw() {
  std::lock_guard lock(mutex_);
  const std::int64_t sensor_ns = sensor_time_ns(truth_->clock()->now_ns());
  const double power_mw =
      part_time() ? sample_mw(last_sample_at(sensor_ns)) : truth_->draw_at_mw(sensor_ns);
  retain_locked(sensor_ns);
  return static_cast<std::uint32_t>(std::lround(std::max(0.0, power_mw)));
}

std::uint32_t SensorGpu::average_power_mw() {
  std::lock_guard lock(mutex_);
  const std::int64_t sensor_ns = sensor_time_ns(truth_->clock()->now_ns());
  double power_mw = 0.0;
  if (part_time()) {
    // The samples closed in (t - A, t]; at least the last one.
    std::int64_t k = last_sample_at(sensor_ns);
    double sum_mw = sample_mw(k);
    int count = 1;
    for (--k; k >= first_sample_ && window_end_ns(k) > sensor_ns - average_ns_; --k) {
      sum_mw += sample_mw(k);
      ++count;
    }
    power_mw = sum_mw / count;
  } else {
    const std::int64_t from_ns = std::max(start_ns_, sensor_ns - average_ns_);
    power_mw = sensor_ns > from_ns ? truth_->energy_between_mj(from_ns, sensor_ns) /
                                         units::seconds_from_nanoseconds(sensor_ns - from_ns)
                                   : truth_->draw_at_mw(sensor_ns);
  }
  retain_locked(sensor_ns);
  return static_cast<std::uint32_t>(std::lround(std::max(0.0, power_mw)));
}

}  // namespace zeus::device
