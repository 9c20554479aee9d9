#include "zeus/device/simulated_gpu.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "common/text.hpp"
#include "device/clock_range.hpp"
#include "device/gpu_models.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device {
namespace {

constexpr std::int64_t kAverageWindowNs = 1'000'000'000;  // NVML averages over about 1 s

std::string make_uuid(const SimulatedGpuModel& model, int index) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "GPU-%08x-5a5a-4000-8000-%012d", text::fnv1a_32(model.key),
                index);
  return buffer;
}

std::string make_pci_bus_id(int index) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "00000000:%02X:00.0", 0x18 + 0x10 * (index % 14));
  return buffer;
}

}  // namespace

const std::vector<SimulatedGpuModel>& simulated_gpu_models() {
  // The boards of the one GPU catalogue (device/gpu_models.hpp), in its order.
  static const std::vector<SimulatedGpuModel> models = [] {
    std::vector<SimulatedGpuModel> boards;
    for (const GpuModelEntry& entry : gpu_models()) {
      if (entry.board) {
        boards.push_back(*entry.board);
      }
    }
    return boards;
  }();
  return models;
}

const SimulatedGpuModel& simulated_gpu_model(std::string_view key) {
  const std::string wanted = text::ascii_lower(key);
  std::string known;
  for (const SimulatedGpuModel& model : simulated_gpu_models()) {
    if (model.key == wanted) {
      return model;
    }
    known += (known.empty() ? "" : ", ") + model.key;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown simulated GPU model \"" + std::string(key) + "\"; known models: " + known,
              ErrorSubject::kGpu);
}

SimulatedGpu::SimulatedGpu(SimulatedGpuModel model, int physical_index,
                           std::shared_ptr<Clock> clock)
    : model_(std::move(model)),
      clock_(clock ? std::move(clock) : steady_clock()),
      uuid_(make_uuid(model_, physical_index)),
      pci_bus_id_(make_pci_bus_id(physical_index)),
      last_update_ns_(clock_->now_ns()),
      profile_(std::make_shared<const LoadProfile>(LoadProfile::constant(0.0))),
      power_limit_mw_(model_.default_power_limit_mw),
      retain_from_ns_(std::numeric_limits<std::int64_t>::max()) {
  begin_segment_locked();
}

double SimulatedGpu::demand_mw_locked(double utilization) const {
  const double idle = model_.idle_power_mw;
  double clock_factor = 1.0;
  if (locked_max_graphics_mhz_ != 0) {
    clock_factor = std::min(1.0, static_cast<double>(locked_max_graphics_mhz_) /
                                     static_cast<double>(model_.max_graphics_clock_mhz));
  }
  return idle +
         utilization * (model_.peak_power_mw - idle) * clock_factor * clock_factor * clock_factor;
}

double SimulatedGpu::leakage_mw_locked() const {
  if (!model_.thermal_enabled) {
    return 0.0;
  }
  return model_.idle_power_mw * model_.thermal.leakage_per_c * heat_c_;
}

double SimulatedGpu::draw_mw_locked(double utilization) const {
  const double idle = model_.idle_power_mw;
  const double leak = leakage_mw_locked();
  return std::max(idle + leak, std::min(demand_mw_locked(utilization) + leak,
                                        static_cast<double>(power_limit_mw_)));
}

double SimulatedGpu::utilization_locked() const {
  return profile_->utilization_at(last_update_ns_);
}

// Between two control changes the demand is constant, so the temperature obeys a linear ODE:
// with x = T - ambient, draw = demand + a * x (a = leakage mW per degree) and
// tau * dx/dt = r * draw - x (r = K per mW). Unclamped, x relaxes exponentially toward
// r * demand / (1 - r * a) with rate (1 - r * a) / tau, and the energy has a closed form. Where
// the power limit clamps the draw, the draw is constant and x relaxes toward r * limit. Steps of
// tau / 100 bound the error of switching between the two regimes mid-step.
void SimulatedGpu::advance_thermal_locked(double dt_s, double utilization) const {
  const double tau_s = std::max(1e-3, model_.thermal.time_constant_s);
  const double r_c_per_mw = model_.thermal.thermal_resistance_c_per_w / 1000.0;  // K/W -> K/mW
  const double a_mw_per_c = model_.idle_power_mw * model_.thermal.leakage_per_c;
  const double idle = model_.idle_power_mw;
  const double limit = power_limit_mw_;
  const double demand = demand_mw_locked(utilization);
  const double max_step_s = tau_s / 100.0;
  double left_s = dt_s;
  while (left_s > 0.0) {
    const double step_s = std::min(left_s, max_step_s);
    left_s -= step_s;
    const double x0 = heat_c_;
    const double unclamped = demand + a_mw_per_c * x0;
    const double stiffness = 1.0 - r_c_per_mw * a_mw_per_c;
    if (unclamped < limit && stiffness > 1e-9) {
      const double rate = stiffness / tau_s;
      const double x_inf = r_c_per_mw * demand / stiffness;
      const double decay = std::exp(-rate * step_s);
      heat_c_ = x_inf + (x0 - x_inf) * decay;
      energy_mj_ +=
          demand * step_s + a_mw_per_c * (x_inf * step_s + (x0 - x_inf) * (1.0 - decay) / rate);
    } else {
      const double draw = std::max(idle + a_mw_per_c * x0, std::min(unclamped, limit));
      const double x_inf = r_c_per_mw * draw;
      heat_c_ = x_inf + (x0 - x_inf) * std::exp(-step_s / tau_s);
      energy_mj_ += draw * step_s;
    }
  }
}

double SimulatedGpu::levels_energy_mj(const Segment& segment, std::int64_t from_ns,
                                      std::int64_t to_ns) const {
  const std::int64_t high_ns = segment.profile->high_ns(from_ns, to_ns);
  return units::millijoules_at(segment.high_mw, high_ns) +
         units::millijoules_at(segment.low_mw, to_ns - from_ns - high_ns);
}

double SimulatedGpu::segment_energy_mj(const Segment& segment, std::int64_t to_ns) const {
  return segment.energy_mj + levels_energy_mj(segment, segment.start_ns, to_ns);
}

void SimulatedGpu::advance_locked() const {
  const std::int64_t now_ns = clock_->now_ns();
  if (now_ns <= last_update_ns_) {
    return;
  }
  if (!model_.thermal_enabled) {
    // Exact: the current segment's two levels times the time spent at each.
    energy_mj_ = segment_energy_mj(history_.back(), now_ns);
    last_update_ns_ = now_ns;
    return;
  }
  // The draw changes continuously while the temperature moves: keep a point per step (and per
  // change of the load's level), so that energy_at_mj() interpolates over short, nearly linear
  // pieces.
  const std::int64_t max_step_ns = std::max<std::int64_t>(
      1, units::nanoseconds_from_seconds(model_.thermal.time_constant_s / 100.0));
  const std::int64_t horizon_ns = std::min(now_ns - kAverageWindowNs, retain_from_ns_);
  for (std::int64_t t_ns = last_update_ns_; t_ns < now_ns;) {
    const std::int64_t step_ns =
        std::min({now_ns - t_ns, max_step_ns, profile_->next_change_ns(t_ns) - t_ns});
    advance_thermal_locked(units::seconds_from_nanoseconds(step_ns),
                           profile_->utilization_at(t_ns));
    t_ns += step_ns;
    if (t_ns > horizon_ns) {
      history_.push_back({t_ns, energy_mj_, 0.0, 0.0, profile_});
    }
  }
  last_update_ns_ = now_ns;
  trim_history_locked();
}

void SimulatedGpu::trim_history_locked() const {
  const std::int64_t horizon_ns = std::min(last_update_ns_ - kAverageWindowNs, retain_from_ns_);
  while (history_.size() > 1 && history_[1].start_ns <= horizon_ns) {
    history_.pop_front();
  }
}

void SimulatedGpu::begin_segment_locked() {
  const double high = profile_->high();
  const double low = profile_->low();
  Segment segment{last_update_ns_, energy_mj_, draw_mw_locked(high), draw_mw_locked(low), profile_};
  if (!history_.empty() && history_.back().start_ns == last_update_ns_) {
    history_.back() = std::move(segment);
  } else {
    history_.push_back(std::move(segment));
  }
  trim_history_locked();
}

const SimulatedGpu::Segment& SimulatedGpu::segment_at_locked(std::int64_t t_ns) const {
  auto it = std::upper_bound(history_.begin(), history_.end(), t_ns,
                             [](std::int64_t t, const Segment& s) { return t < s.start_ns; });
  return it == history_.begin() ? history_.front() : *std::prev(it);
}

double SimulatedGpu::energy_at_mj(std::int64_t t_ns) const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return energy_at_locked(t_ns);
}

double SimulatedGpu::energy_between_mj(std::int64_t from_ns, std::int64_t to_ns) const {
  std::lock_guard lock(mutex_);
  advance_locked();
  from_ns = std::clamp(from_ns, history_.front().start_ns, last_update_ns_);
  to_ns = std::clamp(to_ns, from_ns, last_update_ns_);
  const Segment& segment = segment_at_locked(from_ns);
  if (!model_.thermal_enabled && &segment == &segment_at_locked(to_ns)) {
    // Within one segment: the integral itself, not a difference of two large cumulative sums.
    return levels_energy_mj(segment, from_ns, to_ns);
  }
  return energy_at_locked(to_ns) - energy_at_locked(from_ns);
}

double SimulatedGpu::draw_at_mw(std::int64_t t_ns) const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return draw_at_locked(t_ns);
}

double SimulatedGpu::energy_at_locked(std::int64_t t_ns) const {
  t_ns = std::clamp(t_ns, history_.front().start_ns, last_update_ns_);
  const Segment& segment = segment_at_locked(t_ns);
  if (!model_.thermal_enabled) {
    return segment_energy_mj(segment, t_ns);
  }
  // Linear between this point and the next (or now).
  const auto index = static_cast<std::size_t>(&segment - &history_.front());
  const std::int64_t t1_ns =
      index + 1 < history_.size() ? history_[index + 1].start_ns : last_update_ns_;
  const double e1_mj = index + 1 < history_.size() ? history_[index + 1].energy_mj : energy_mj_;
  if (t1_ns <= segment.start_ns) {
    return segment.energy_mj;
  }
  return segment.energy_mj + (e1_mj - segment.energy_mj) *
                                 static_cast<double>(t_ns - segment.start_ns) /
                                 static_cast<double>(t1_ns - segment.start_ns);
}

double SimulatedGpu::draw_at_locked(std::int64_t t_ns) const {
  t_ns = std::clamp(t_ns, history_.front().start_ns, last_update_ns_);
  if (model_.thermal_enabled) {
    if (t_ns == last_update_ns_) {
      return draw_mw_locked(utilization_locked());
    }
    // The mean draw of the step that holds t_ns.
    const Segment& segment = segment_at_locked(t_ns);
    const auto index = static_cast<std::size_t>(&segment - &history_.front());
    const std::int64_t t1_ns =
        index + 1 < history_.size() ? history_[index + 1].start_ns : last_update_ns_;
    const double e1_mj = index + 1 < history_.size() ? history_[index + 1].energy_mj : energy_mj_;
    return t1_ns > segment.start_ns ? (e1_mj - segment.energy_mj) /
                                          units::seconds_from_nanoseconds(t1_ns - segment.start_ns)
                                    : draw_mw_locked(utilization_locked());
  }
  const Segment& segment = segment_at_locked(t_ns);
  return segment.profile->high_ns(t_ns, t_ns + 1) > 0 ? segment.high_mw : segment.low_mw;
}

void SimulatedGpu::retain_history_from_ns(std::int64_t t_ns) {
  std::lock_guard lock(mutex_);
  // The first call sets the horizon (until then: the last second only); later ones move it on.
  const bool unset = retain_from_ns_ == std::numeric_limits<std::int64_t>::max();
  retain_from_ns_ = unset ? t_ns : std::max(retain_from_ns_, t_ns);
  trim_history_locked();
}

void SimulatedGpu::set_utilization(double utilization) {
  set_load_profile(LoadProfile::constant(utilization));
}

void SimulatedGpu::set_load_profile(LoadProfile profile) {
  std::lock_guard lock(mutex_);
  advance_locked();
  profile_ = std::make_shared<const LoadProfile>(std::move(profile));
  begin_segment_locked();
}

double SimulatedGpu::utilization() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return utilization_locked();
}

double SimulatedGpu::relative_speed() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  const double utilization = utilization_locked();
  double clock_factor = 1.0;
  if (locked_max_graphics_mhz_ != 0) {
    clock_factor = std::min(1.0, static_cast<double>(locked_max_graphics_mhz_) /
                                     static_cast<double>(model_.max_graphics_clock_mhz));
  }
  const double idle = model_.idle_power_mw;
  const double dynamic_demand =
      utilization * (model_.peak_power_mw - idle) * clock_factor * clock_factor * clock_factor;
  if (dynamic_demand <= 0.0) {
    return clock_factor;
  }
  // Leakage takes its share of the power limit first (a warm GPU is slower under a limit).
  const double dynamic_draw = draw_mw_locked(utilization) - idle - leakage_mw_locked();
  return clock_factor * std::cbrt(std::max(0.0, dynamic_draw) / dynamic_demand);
}

double SimulatedGpu::exact_energy_j() const {
  std::lock_guard lock(mutex_);
  advance_locked();
  return units::joules_from_millijoules(energy_mj_);
}

PowerLimitConstraints SimulatedGpu::power_limit_constraints_mw() {
  return {model_.min_power_limit_mw, model_.max_power_limit_mw};
}

std::uint32_t SimulatedGpu::power_limit_mw() {
  std::lock_guard lock(mutex_);
  return power_limit_mw_;
}

void SimulatedGpu::set_power_limit_mw(std::uint32_t power_limit_mw) {
  if (power_limit_mw < model_.min_power_limit_mw || power_limit_mw > model_.max_power_limit_mw) {
    throw Error(ErrorKind::kInvalidArgument,
                "power limit " + std::to_string(power_limit_mw) + " mW is outside the range of " +
                    model_.name + ": [" + std::to_string(model_.min_power_limit_mw) + ", " +
                    std::to_string(model_.max_power_limit_mw) + "] mW",
                ErrorSubject::kGpu);
  }
  std::lock_guard lock(mutex_);
  if (power_limit_mw == power_limit_mw_) {
    return;
  }
  advance_locked();
  power_limit_mw_ = power_limit_mw;
  begin_segment_locked();
}

void SimulatedGpu::reset_power_limit() {
  set_power_limit_mw(model_.default_power_limit_mw);
}

bool SimulatedGpu::persistence_mode() {
  std::lock_guard lock(mutex_);
  return persistence_mode_;
}

void SimulatedGpu::set_persistence_mode(bool enabled) {
  std::lock_guard lock(mutex_);
  persistence_mode_ = enabled;
}

std::vector<std::uint32_t> SimulatedGpu::supported_memory_clocks_mhz() {
  return model_.memory_clocks_mhz;
}

std::vector<std::uint32_t> SimulatedGpu::supported_graphics_clocks_mhz(
    std::optional<std::uint32_t> memory_clock_mhz) {
  if (memory_clock_mhz &&
      std::find(model_.memory_clocks_mhz.begin(), model_.memory_clocks_mhz.end(),
                *memory_clock_mhz) == model_.memory_clocks_mhz.end()) {
    throw Error(ErrorKind::kInvalidArgument,
                std::to_string(*memory_clock_mhz) + " MHz is not a supported memory clock of " +
                    model_.name,
                ErrorSubject::kGpu);
  }
  std::vector<std::uint32_t> clocks;
  for (std::uint32_t mhz = model_.max_graphics_clock_mhz; mhz >= model_.min_graphics_clock_mhz;
       mhz -= 15) {
    clocks.push_back(mhz);
    if (mhz < model_.min_graphics_clock_mhz + 15) {
      break;
    }
  }
  return clocks;
}

void SimulatedGpu::set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  // Like the driver: any range that meets the supported clocks, run at supported clocks in it.
  const std::vector<std::uint32_t> supported = supported_graphics_clocks_mhz(std::nullopt);
  if (auto problem = clock_range_problem("Graphics", min_mhz, max_mhz, supported)) {
    throw Error(ErrorKind::kInvalidArgument, *problem, ErrorSubject::kGpu);
  }
  const auto [snapped_min, snapped_max] = snap_clock_range(min_mhz, max_mhz, supported);
  std::lock_guard lock(mutex_);
  advance_locked();
  locked_min_graphics_mhz_ = snapped_min;
  locked_max_graphics_mhz_ = snapped_max;
  begin_segment_locked();
}

void SimulatedGpu::reset_gpu_locked_clocks() {
  std::lock_guard lock(mutex_);
  advance_locked();
  locked_min_graphics_mhz_ = 0;
  locked_max_graphics_mhz_ = 0;
  begin_segment_locked();
}

void SimulatedGpu::set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  if (auto problem = clock_range_problem("Memory", min_mhz, max_mhz, model_.memory_clocks_mhz)) {
    throw Error(ErrorKind::kInvalidArgument, *problem, ErrorSubject::kGpu);
  }
  // Memory clocks do not enter the power model; they are kept for locked_memory_clocks_mhz().
  const auto snapped = snap_clock_range(min_mhz, max_mhz, model_.memory_clocks_mhz);
  std::lock_guard lock(mutex_);
  locked_memory_mhz_ = snapped;
}

void SimulatedGpu::reset_memory_locked_clocks() {
  std::lock_guard lock(mutex_);
  locked_memory_mhz_.reset();
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> SimulatedGpu::locked_graphics_clocks_mhz()
    const {
  std::lock_guard lock(mutex_);
  if (locked_max_graphics_mhz_ == 0) {
    return std::nullopt;
  }
  return std::make_pair(locked_min_graphics_mhz_, locked_max_graphics_mhz_);
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> SimulatedGpu::locked_memory_clocks_mhz()
    const {
  std::lock_guard lock(mutex_);
  return locked_memory_mhz_;
}

std::uint32_t SimulatedGpu::instant_power_mw() {
  std::lock_guard lock(mutex_);
  if (!model_.thermal_enabled && profile_->high() == profile_->low()) {
    // A constant load: the draw is the current segment's, whatever the time (no clock read).
    return static_cast<std::uint32_t>(std::lround(history_.back().high_mw));
  }
  advance_locked();
  return static_cast<std::uint32_t>(std::lround(draw_at_locked(last_update_ns_)));
}

std::uint32_t SimulatedGpu::average_power_mw() {
  std::lock_guard lock(mutex_);
  advance_locked();
  const std::int64_t now_ns = last_update_ns_;
  const std::int64_t window_start_ns =
      std::max(history_.front().start_ns, now_ns - kAverageWindowNs);
  if (now_ns <= window_start_ns) {
    return static_cast<std::uint32_t>(std::lround(draw_at_locked(now_ns)));
  }
  const double average_mw = (energy_mj_ - energy_at_locked(window_start_ns)) /
                            units::seconds_from_nanoseconds(now_ns - window_start_ns);
  return static_cast<std::uint32_t>(std::lround(std::max(0.0, average_mw)));
}

std::uint32_t SimulatedGpu::average_memory_power_mw() {
  std::lock_guard lock(mutex_);
  advance_locked();
  return static_cast<std::uint32_t>(model_.memory_power_mw * (0.3 + 0.7 * utilization_locked()));
}

std::uint64_t SimulatedGpu::total_energy_mj() {
  if (!model_.energy_counter) {
    throw Error(ErrorKind::kNotSupported,
                model_.name + " (simulated) has no energy counter, as on real pre-Volta GPUs",
                ErrorSubject::kGpu);
  }
  std::lock_guard lock(mutex_);
  advance_locked();
  return static_cast<std::uint64_t>(energy_mj_);
}

int SimulatedGpu::temperature_c() {
  return static_cast<int>(std::lround(exact_temperature_c()));
}

double SimulatedGpu::exact_temperature_c() const {
  std::lock_guard lock(mutex_);
  if (model_.thermal_enabled) {
    advance_locked();
    return model_.thermal.ambient_c + heat_c_;
  }
  advance_locked();
  return 30.0 + 55.0 * draw_at_locked(last_update_ns_) / model_.peak_power_mw;
}

}  // namespace zeus::device
