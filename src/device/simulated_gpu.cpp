#include "zeus/device/simulated_gpu.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

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
      power_limit_mw_(model_.default_power_limit_mw) {
  history_.emplace_back(last_update_ns_, 0.0);
}

double SimulatedGpu::demand_mw_locked() const {
  const double idle = model_.idle_power_mw;
  double clock_factor = 1.0;
  if (locked_max_graphics_mhz_ != 0) {
    clock_factor = std::min(1.0, static_cast<double>(locked_max_graphics_mhz_) /
                                     static_cast<double>(model_.max_graphics_clock_mhz));
  }
  return idle +
         utilization_ * (model_.peak_power_mw - idle) * clock_factor * clock_factor * clock_factor;
}

double SimulatedGpu::leakage_mw_locked() const {
  if (!model_.thermal_enabled) {
    return 0.0;
  }
  return model_.idle_power_mw * model_.thermal.leakage_per_c * heat_c_;
}

double SimulatedGpu::draw_mw_locked() const {
  const double idle = model_.idle_power_mw;
  const double leak = leakage_mw_locked();
  return std::max(idle + leak,
                  std::min(demand_mw_locked() + leak, static_cast<double>(power_limit_mw_)));
}

// Between two control changes the demand is constant, so the temperature obeys a linear ODE:
// with x = T - ambient, draw = demand + a * x (a = leakage mW per degree) and
// tau * dx/dt = r * draw - x (r = K per mW). Unclamped, x relaxes exponentially toward
// r * demand / (1 - r * a) with rate (1 - r * a) / tau, and the energy has a closed form. Where
// the power limit clamps the draw, the draw is constant and x relaxes toward r * limit. Steps of
// tau / 100 bound the error of switching between the two regimes mid-step.
void SimulatedGpu::advance_thermal_locked(double dt_s) const {
  const double tau_s = std::max(1e-3, model_.thermal.time_constant_s);
  const double r_c_per_mw = model_.thermal.thermal_resistance_c_per_w / 1000.0;  // K/W -> K/mW
  const double a_mw_per_c = model_.idle_power_mw * model_.thermal.leakage_per_c;
  const double idle = model_.idle_power_mw;
  const double limit = power_limit_mw_;
  const double demand = demand_mw_locked();
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

void SimulatedGpu::advance_locked() const {
  const std::int64_t now_ns = clock_->now_ns();
  if (now_ns <= last_update_ns_) {
    return;
  }
  if (model_.thermal_enabled) {
    // The draw changes continuously while the temperature moves: keep breakpoints of the last
    // second so that average_power_mw() interpolates over short, nearly linear pieces.
    const std::int64_t max_step_ns = std::max<std::int64_t>(
        1, units::nanoseconds_from_seconds(model_.thermal.time_constant_s / 100.0));
    for (std::int64_t t_ns = last_update_ns_; t_ns < now_ns;) {
      const std::int64_t step_ns = std::min(now_ns - t_ns, max_step_ns);
      advance_thermal_locked(units::seconds_from_nanoseconds(step_ns));
      t_ns += step_ns;
      if (t_ns > now_ns - kAverageWindowNs) {
        history_.emplace_back(t_ns, energy_mj_);
        while (history_.size() > 2 && history_[1].first <= t_ns - kAverageWindowNs) {
          history_.pop_front();
        }
      }
    }
    last_update_ns_ = now_ns;
    return;
  }
  energy_mj_ += units::millijoules_at(draw_mw_locked(), now_ns - last_update_ns_);
  last_update_ns_ = now_ns;
}

// Integrates up to now and records a breakpoint before the draw changes; forgets breakpoints
// that fell out of the averaging window (keeping one at or before its start).
void SimulatedGpu::record_breakpoint_locked() {
  advance_locked();
  history_.emplace_back(last_update_ns_, energy_mj_);
  while (history_.size() > 2 && history_[1].first <= last_update_ns_ - kAverageWindowNs) {
    history_.pop_front();
  }
}

void SimulatedGpu::set_utilization(double utilization) {
  std::lock_guard lock(mutex_);
  record_breakpoint_locked();
  utilization_ = std::clamp(std::isnan(utilization) ? 0.0 : utilization, 0.0, 1.0);
}

double SimulatedGpu::utilization() const {
  std::lock_guard lock(mutex_);
  return utilization_;
}

double SimulatedGpu::relative_speed() const {
  std::lock_guard lock(mutex_);
  if (model_.thermal_enabled) {
    advance_locked();
  }
  double clock_factor = 1.0;
  if (locked_max_graphics_mhz_ != 0) {
    clock_factor = std::min(1.0, static_cast<double>(locked_max_graphics_mhz_) /
                                     static_cast<double>(model_.max_graphics_clock_mhz));
  }
  const double idle = model_.idle_power_mw;
  const double dynamic_demand =
      utilization_ * (model_.peak_power_mw - idle) * clock_factor * clock_factor * clock_factor;
  if (dynamic_demand <= 0.0) {
    return clock_factor;
  }
  // Leakage takes its share of the power limit first (a warm GPU is slower under a limit).
  const double dynamic_draw = draw_mw_locked() - idle - leakage_mw_locked();
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
  record_breakpoint_locked();
  power_limit_mw_ = power_limit_mw;
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
  record_breakpoint_locked();
  locked_min_graphics_mhz_ = snapped_min;
  locked_max_graphics_mhz_ = snapped_max;
}

void SimulatedGpu::reset_gpu_locked_clocks() {
  std::lock_guard lock(mutex_);
  record_breakpoint_locked();
  locked_min_graphics_mhz_ = 0;
  locked_max_graphics_mhz_ = 0;
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
  if (model_.thermal_enabled) {
    advance_locked();
  }
  return static_cast<std::uint32_t>(std::lround(draw_mw_locked()));
}

std::uint32_t SimulatedGpu::average_power_mw() {
  std::lock_guard lock(mutex_);
  advance_locked();
  const std::int64_t now_ns = last_update_ns_;
  const std::int64_t window_start_ns = std::max(history_.front().first, now_ns - kAverageWindowNs);
  if (now_ns <= window_start_ns) {
    return static_cast<std::uint32_t>(std::lround(draw_mw_locked()));
  }
  // Energy at window_start_ns: from the last breakpoint at or before it, energy grows linearly
  // with the draw that held until the next breakpoint (or until now).
  std::size_t i = 0;
  while (i + 1 < history_.size() && history_[i + 1].first <= window_start_ns) {
    ++i;
  }
  const auto [t0_ns, e0_mj] = history_[i];
  const std::int64_t t1_ns = i + 1 < history_.size() ? history_[i + 1].first : now_ns;
  const double e1_mj = i + 1 < history_.size() ? history_[i + 1].second : energy_mj_;
  const double slope_mj_per_ns =
      t1_ns > t0_ns ? (e1_mj - e0_mj) / static_cast<double>(t1_ns - t0_ns) : 0.0;
  const double start_energy_mj =
      e0_mj + slope_mj_per_ns * static_cast<double>(window_start_ns - t0_ns);
  const double average_mw =
      (energy_mj_ - start_energy_mj) / units::seconds_from_nanoseconds(now_ns - window_start_ns);
  return static_cast<std::uint32_t>(std::lround(std::max(0.0, average_mw)));
}

std::uint32_t SimulatedGpu::average_memory_power_mw() {
  std::lock_guard lock(mutex_);
  return static_cast<std::uint32_t>(model_.memory_power_mw * (0.3 + 0.7 * utilization_));
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
  return 30.0 + 55.0 * draw_mw_locked() / model_.peak_power_mw;
}

namespace {

class SimulatedProvider final : public GpuProvider {
 public:
  SimulatedProvider(int count, const SimulatedGpuModel& model, std::shared_ptr<Clock> clock) {
    for (int i = 0; i < count; ++i) {
      gpus_.push_back(std::make_shared<SimulatedGpu>(model, i, clock));
    }
  }
  GpuBackend backend() const override { return GpuBackend::kSimulated; }
  std::string library_path() const override { return ""; }
  std::string driver_version() override { return "simulated"; }
  std::string library_version() override { return "simulated"; }
  int device_count() override { return static_cast<int>(gpus_.size()); }
  std::string device_uuid(int physical_index) override { return at(physical_index)->uuid(); }
  std::shared_ptr<Gpu> open_gpu(int physical_index) override { return at(physical_index); }

 private:
  std::shared_ptr<SimulatedGpu> at(int physical_index) const {
    if (physical_index < 0 || physical_index >= static_cast<int>(gpus_.size())) {
      throw Error(ErrorKind::kNotFound,
                  "no simulated GPU with index " + std::to_string(physical_index),
                  ErrorSubject::kGpu);
    }
    return gpus_[static_cast<std::size_t>(physical_index)];
  }
  std::vector<std::shared_ptr<SimulatedGpu>> gpus_;
};

}  // namespace

std::shared_ptr<GpuProvider> make_simulated_provider(int count, const SimulatedGpuModel& model,
                                                     std::shared_ptr<Clock> clock) {
  return std::make_shared<SimulatedProvider>(count, model, std::move(clock));
}

SimulatedGpuModel SimulatedGpusSpec::model() const {
  SimulatedGpuModel result = simulated_gpu_model(model_key);
  result.thermal_enabled = thermal;
  return result;
}

SimulatedGpusSpec parse_simulated_gpus_spec(const std::string& value) {
  const std::string quoted = "ZEUS_SIMULATED_GPUS=\"" + value + "\"";
  const std::size_t colon = value.find(':');
  const std::string count_text = value.substr(0, colon);
  SimulatedGpusSpec spec;
  if (count_text.empty() || count_text.size() > 4 ||
      count_text.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                quoted + " is malformed: expected <count>[:<model>[:thermal]], e.g. \"4:h200\"",
                ErrorSubject::kGpu);
  }
  spec.count = std::stoi(count_text);
  if (spec.count < 1 || spec.count > 1024) {
    throw Error(ErrorKind::kInvalidArgument, quoted + ": the GPU count must be between 1 and 1024",
                ErrorSubject::kGpu);
  }
  if (colon != std::string::npos) {
    std::string model_text = value.substr(colon + 1);
    if (const std::size_t option = model_text.find(':'); option != std::string::npos) {
      if (text::ascii_lower(model_text.substr(option + 1)) != "thermal") {
        throw Error(ErrorKind::kInvalidArgument,
                    quoted +
                        " is malformed: the only option after the model is \"thermal\", e.g. "
                        "\"2:h200:thermal\"",
                    ErrorSubject::kGpu);
      }
      spec.thermal = true;
      model_text.resize(option);
    }
    spec.model_key = text::ascii_lower(model_text);
    try {
      simulated_gpu_model(spec.model_key);
    } catch (const Error& error) {
      throw Error(ErrorKind::kInvalidArgument, quoted + ": " + error.what(), ErrorSubject::kGpu);
    }
  }
  return spec;
}

}  // namespace zeus::device
