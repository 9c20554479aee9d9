#include "zeus/runtime/power_limit_optimizer.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "runtime/power_limit_restorer.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::runtime {
namespace {

// The one check of the options: the Python binding and GlobalPowerLimitOptimizer only convert
// types and rely on these messages (a ValueError there), which name the option.
void check_option(int value, const char* name, int minimum) {
  if (value < minimum) {
    throw Error(ErrorKind::kInvalidArgument, std::string(name) + " must be at least " +
                                                 std::to_string(minimum) + ", got " +
                                                 std::to_string(value));
  }
  if (value > kMaxPowerLimitOptimizerOption) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(name) + " is too large: " + std::to_string(value));
  }
}

void check_options(const PowerLimitOptimizerOptions& options) {
  check_option(options.wait_steps, "wait_steps", 0);
  check_option(options.warmup_steps, "warmup_steps", 0);
  check_option(options.profile_steps, "profile_steps", 1);
  check_option(options.pl_step_w, "pl_step_w", 1);
}

}  // namespace

PowerLimitOptimizer::PowerLimitOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor,
                                         const device::Gpus& gpus,
                                         PowerLimitOptimizerOptions options)
    : monitor_(std::move(monitor)),
      reducer_(options.reducer ? options.reducer : std::make_shared<LocalReducer>()),
      warmup_steps_(options.warmup_steps),
      profile_steps_(options.profile_steps),
      profile_path_(options.profile_path),
      state_(plo_state::Ready{0, 1}) {
  check_options(options);
  if (!monitor_) {
    throw Error(ErrorKind::kInvalidArgument, "the power-limit optimizer needs a monitor");
  }
  if (monitor_->gpu_indices().empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the power-limit optimizer needs the monitor to measure at least one GPU");
  }
  for (const int index : monitor_->gpu_indices()) {
    gpus_.push_back(gpus.shared(index));
  }
  const device::PowerLimitConstraints range = gpus_.front()->power_limit_constraints_mw();
  for (std::size_t i = 1; i < gpus_.size(); ++i) {
    const device::PowerLimitConstraints other = gpus_[i]->power_limit_constraints_mw();
    if (other.min_mw != range.min_mw || other.max_mw != range.max_mw) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the GPUs' power-limit ranges differ: GPU " +
                      std::to_string(monitor_->gpu_indices()[0]) + " has [" +
                      std::to_string(range.min_mw) + ", " + std::to_string(range.max_mw) +
                      "] mW, GPU " + std::to_string(monitor_->gpu_indices()[i]) + " has [" +
                      std::to_string(other.min_mw) + ", " + std::to_string(other.max_mw) +
                      "] mW; optimise them in separate processes");
    }
  }
  max_power_limit_mw_ = range.max_mw;
  // In 64 bits: a step of up to kMaxPowerLimitOptimizerOption W is more milliwatts than 32 hold.
  const std::uint64_t step_mw = static_cast<std::uint64_t>(options.pl_step_w) * 1000u;
  for (std::uint64_t limit_mw = range.max_mw;; limit_mw -= step_mw) {
    power_limits_mw_.push_back(static_cast<std::uint32_t>(limit_mw));
    if (limit_mw < range.min_mw + step_mw) {
      break;
    }
  }
  if (power_limits_mw_.back() != range.min_mw) {
    power_limits_mw_.push_back(range.min_mw);  // the minimum is always a candidate
  }
  profile_order_ = power_limits_mw_;

  selector_ = options.selector;
  if (!selector_) {
    const int gpus_in_job = reducer_->world_size() * static_cast<int>(gpus_.size());
    selector_ = std::make_shared<optimizer::ZeusCostSelector>(0.5, gpus_in_job);
  }

  for (const auto& gpu : gpus_) {
    try {
      gpu->set_persistence_mode(true);
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::kNotSupported) {
        throw;
      }
    }
  }
  restore_registration_ =
      PowerLimitRestorer::register_gpus(gpus_, max_power_limit_mw_, options.restore_on_signal);
  try {
    start(options.wait_steps);
  } catch (...) {
    // No destructor runs for a constructor that throws: leave the registry as we found it.
    PowerLimitRestorer::release(restore_registration_);
    throw;
  }
}

void PowerLimitOptimizer::start(int wait_steps) {
  bool load_profile = !profile_path_.empty() && std::filesystem::exists(profile_path_);
  if (reducer_->world_size() > 1) {
    // Every process must profile, or none: a process that skips profiling would leave the others
    // waiting in their reductions forever.
    const double with_profile = reducer_->sum(load_profile ? 1.0 : 0.0);
    if (with_profile != 0.0 && with_profile != static_cast<double>(reducer_->world_size())) {
      throw Error(ErrorKind::kInvalidArgument,
                  "the power-limit profile " + profile_path_.string() + " exists for " +
                      std::to_string(static_cast<int>(with_profile)) + " of " +
                      std::to_string(reducer_->world_size()) +
                      " processes; give every process its own profile path, present on all or "
                      "none of them");
    }
  }
  if (load_profile) {
    std::vector<std::string> skipped;
    try {
      measurements_ = load_power_limit_profile(profile_path_, &skipped).measurements;
    } catch (const Error& error) {
      if (error.kind() != ErrorKind::kInvalidArgument) {
        throw;
      }
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(error.what()) +
                      "; delete the file (or choose another profile_path) to profile again");
    }
    if (!skipped.empty()) {
      remeasure(skipped, wait_steps);
      return;
    }
    const auto optimal_mw = static_cast<std::uint32_t>(selector_->select(measurements_)) * 1000u;
    log().info("power-limit profile {} loaded: {} W ({})", profile_path_.string(),
               units::whole_watts_from_milliwatts(optimal_mw), selector_->describe());
    state_ = plo_state::Done{optimal_mw};
    set_power_limit(optimal_mw);
    return;
  }
  set_power_limit(max_power_limit_mw_);
  state_ = plo_state::Ready{max_power_limit_mw_, wait_steps + 1};
}

void PowerLimitOptimizer::remeasure(const std::vector<std::string>& skipped, int wait_steps) {
  for (const std::string& message : skipped) {
    log().warn("{}; skipped", message);
  }
  std::vector<std::uint32_t> missing;
  for (const std::uint32_t limit_mw : power_limits_mw_) {
    const int limit_w = static_cast<int>(units::whole_watts_from_milliwatts(limit_mw));
    if (std::none_of(measurements_.begin(), measurements_.end(),
                     [&](const auto& m) { return m.power_limit_w == limit_w; })) {
      missing.push_back(limit_mw);
    }
  }
  // Every process profiles the same limits, or none does (their windows are reduced together).
  if (reducer_->world_size() > 1 && reducer_->sum(missing.empty() ? 0.0 : 1.0) != 0.0) {
    measurements_.clear();
    missing = power_limits_mw_;
  }
  if (missing.empty()) {
    select_and_save();
    return;
  }
  std::string limits;
  for (const std::uint32_t limit_mw : missing) {
    limits +=
        (limits.empty() ? "" : ", ") + std::to_string(units::whole_watts_from_milliwatts(limit_mw));
  }
  log().warn("power-limit profile {}: profiling {} W again; the file is rewritten when done",
             profile_path_.string(), limits);
  profile_order_ = std::move(missing);
  set_power_limit(max_power_limit_mw_);
  state_ = plo_state::Ready{profile_order_.front(), wait_steps + 1};
}

PowerLimitOptimizer::~PowerLimitOptimizer() {
  // A profiling window still open would block the next optimizer on the same monitor.
  if (const auto* profiling = std::get_if<plo_state::Profiling>(&state_)) {
    try {
      monitor_->end_window(window_name(profiling->power_limit_mw),
                           {.sync_execution = false, .cancel = true});
    } catch (const std::exception& error) {
      log().error("could not cancel the profiling window: {}", error.what());
    }
  }
  // Restores the maximum only where no other live optimizer manages the GPU and nobody changed
  // the limit since (a re-run notebook cell must not undo the new optimizer's choice).
  PowerLimitRestorer::release(restore_registration_);
}

std::string PowerLimitOptimizer::window_name(std::uint32_t power_limit_mw) const {
  return "__GlobalPowerLimitOptimizer_" +
         std::to_string(units::whole_watts_from_milliwatts(power_limit_mw));
}

void PowerLimitOptimizer::set_power_limit(std::uint32_t power_limit_mw) {
  if (power_limit_mw == current_power_limit_mw_) {
    return;
  }
  PowerLimitRestorer::set_power_limit(restore_registration_, power_limit_mw);
  current_power_limit_mw_ = power_limit_mw;
}

void PowerLimitOptimizer::on_step_begin() {
  ++steps_this_epoch_;
  if (auto* ready = std::get_if<plo_state::Ready>(&state_)) {
    if (--ready->steps > 0) {
      return;
    }
    const std::uint32_t limit_mw = ready->next_power_limit_mw;
    set_power_limit(limit_mw);
    state_ = plo_state::Warmup{limit_mw, warmup_steps_};
    if (warmup_steps_ > 0) {
      return;
    }
  }
  if (auto* warmup = std::get_if<plo_state::Warmup>(&state_)) {
    if (warmup->steps > 0 && --warmup->steps > 0) {
      return;
    }
    const std::uint32_t limit_mw = warmup->power_limit_mw;
    monitor_->begin_window(window_name(limit_mw));
    state_ = plo_state::Profiling{limit_mw, profile_steps_};
    return;
  }
  if (auto* profiling = std::get_if<plo_state::Profiling>(&state_)) {
    if (--profiling->steps > 0) {
      return;
    }
    finish_window();
  }
}

void PowerLimitOptimizer::finish_window() {
  const std::uint32_t limit_mw = std::get<plo_state::Profiling>(state_).power_limit_mw;
  const monitor::Measurement measurement = monitor_->end_window(window_name(limit_mw));
  optimizer::PowerLimitMeasurement result;
  result.power_limit_w = static_cast<int>(units::whole_watts_from_milliwatts(limit_mw));
  result.energy_j = reducer_->sum(measurement.total_energy_j());
  result.time_s = reducer_->max(measurement.time_s);
  if (const std::string problem = power_limit_measurement_problem(result); !problem.empty()) {
    // No energy (or time) in the window: the GPUs' energy counter did not advance within
    // profile_steps steps. A selector cannot use it and the profile file could not hold it.
    ++bad_windows_;
    const bool again = bad_windows_ < kMaxEmptyProfilingWindows;
    log().warn(
        "power-limit optimizer: the profiling window at {} W ({} steps) measured {} J in {} s "
        "({} of {} tries): {}. The window is probably shorter than the GPUs' energy counter "
        "update; raise profile_steps",
        result.power_limit_w, profile_steps_, result.energy_j, result.time_s, bad_windows_,
        kMaxEmptyProfilingWindows,
        again ? "measuring it again" : "leaving this limit out of the profile");
    if (again) {
      state_ = plo_state::Warmup{limit_mw, warmup_steps_};
      if (warmup_steps_ == 0) {
        monitor_->begin_window(window_name(limit_mw));
        state_ = plo_state::Profiling{limit_mw, profile_steps_};
      }
      return;
    }
  } else {
    measurements_.push_back(result);
  }
  bad_windows_ = 0;
  next_limit_after(limit_mw);
}

void PowerLimitOptimizer::next_limit_after(std::uint32_t limit_mw) {
  const auto position = std::find(profile_order_.begin(), profile_order_.end(), limit_mw);
  if (position == profile_order_.end() || position + 1 == profile_order_.end()) {
    select_and_save();
    return;
  }
  const std::uint32_t next_mw = *(position + 1);
  set_power_limit(next_mw);
  state_ = plo_state::Warmup{next_mw, warmup_steps_};
  if (warmup_steps_ == 0) {
    monitor_->begin_window(window_name(next_mw));
    state_ = plo_state::Profiling{next_mw, profile_steps_};
  }
}

void PowerLimitOptimizer::select_and_save() {
  if (measurements_.empty()) {
    log().warn(
        "power-limit optimizer: no power limit could be measured; staying at the maximum, "
        "{} W, and saving no profile",
        units::whole_watts_from_milliwatts(max_power_limit_mw_));
    state_ = plo_state::Done{max_power_limit_mw_};
    set_power_limit(max_power_limit_mw_);
    return;
  }
  // The selectors' tie rule favours the first measurement, which is the higher limit when
  // profiling runs from the maximum down; a profile completed by remeasuring keeps that order.
  std::stable_sort(measurements_.begin(), measurements_.end(),
                   [](const auto& a, const auto& b) { return a.power_limit_w > b.power_limit_w; });
  const auto optimal_mw = static_cast<std::uint32_t>(selector_->select(measurements_)) * 1000u;
  log().info("power-limit profiling done: {} W ({})",
             units::whole_watts_from_milliwatts(optimal_mw), selector_->describe());
  state_ = plo_state::Done{optimal_mw};
  set_power_limit(optimal_mw);
  if (!profile_path_.empty()) {
    save_power_limit_profile(profile_path_, {measurements_});
  }
}

void PowerLimitOptimizer::on_epoch_end() {
  const int steps = std::exchange(steps_this_epoch_, 0);
  std::uint32_t interrupted_mw = 0;
  if (const auto* warmup = std::get_if<plo_state::Warmup>(&state_)) {
    interrupted_mw = warmup->power_limit_mw;
  } else if (const auto* profiling = std::get_if<plo_state::Profiling>(&state_)) {
    interrupted_mw = profiling->power_limit_mw;
    monitor_->end_window(window_name(interrupted_mw), {.sync_execution = false, .cancel = true});
  } else {
    return;
  }
  // One limit needs a step to set it, warmup_steps and profile_steps within one epoch: an epoch
  // shorter than that interrupts every try, and the optimizer would wait at the maximum forever.
  const long long needed = 1LL + warmup_steps_ + profile_steps_;
  if (steps < needed && !warned_short_epochs_) {
    warned_short_epochs_ = true;
    log().warn(
        "power-limit optimizer: this epoch had {} steps, but profiling one power limit needs {} "
        "within one epoch (1 + warmup_steps {} + profile_steps {}); with epochs this short it "
        "never finishes and the GPUs stay at the maximum limit. Lower warmup_steps and "
        "profile_steps so that 1 + warmup_steps + profile_steps <= the steps of an epoch",
        steps, needed, warmup_steps_, profile_steps_);
  }
  // The measurement would straddle an epoch boundary (evaluation, checkpointing): discard it and
  // profile the same limit again from the next step.
  state_ = plo_state::Ready{interrupted_mw, 1};
  set_power_limit(max_power_limit_mw_);
}

std::optional<std::uint32_t> PowerLimitOptimizer::optimal_power_limit_mw() const {
  if (const auto* done = std::get_if<plo_state::Done>(&state_)) {
    return done->optimal_power_limit_mw;
  }
  return std::nullopt;
}

}  // namespace zeus::runtime
