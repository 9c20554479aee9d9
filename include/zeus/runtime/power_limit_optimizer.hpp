// The just-in-time power-limit optimizer inside a training run (the reference's
// GlobalPowerLimitOptimizer): during the first epoch(s) it steps through the power limits from the
// maximum down to the minimum, measures a fixed number of iterations at each, picks the best with a
// selector from the policy core, and runs the rest of training at that limit.
//
// Drive it from the training loop: on_step_begin() before every iteration, on_epoch_end() after
// every epoch (the other hooks exist for symmetry with the reference's callback set and do
// nothing).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "zeus/device/gpus.hpp"
#include "zeus/monitor/window_monitor.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/runtime/reducer.hpp"

namespace zeus::runtime {

// The profile file: {"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]}.
struct PowerLimitProfile {
  std::vector<optimizer::PowerLimitMeasurement> measurements;
};
// Throws Error(kNotFound) for a missing file, Error(kInvalidArgument) naming the file for anything
// malformed (not JSON, missing keys, non-positive values, no measurement). With `skipped`, a bad
// measurement is not an error: its message (naming the file and the measurement) is appended to
// `skipped` and the others are returned (possibly none); only a file that is not a profile at all
// still throws.
PowerLimitProfile load_power_limit_profile(const std::filesystem::path& path,
                                           std::vector<std::string>* skipped = nullptr);
// Writes only what load_power_limit_profile reads back: throws Error(kInvalidArgument) naming the
// first measurement it would refuse (energy or time not positive and finite, a power limit that is
// not a positive number of watts, a limit measured twice) or an empty profile, writing nothing.
void save_power_limit_profile(const std::filesystem::path& path, const PowerLimitProfile& profile);
// Why load_power_limit_profile would refuse `measurement` ("" when it would not).
std::string power_limit_measurement_problem(const optimizer::PowerLimitMeasurement& measurement);

// The largest value any of the options' counts may take.
inline constexpr int kMaxPowerLimitOptimizerOption = 1'000'000'000;
// Windows in a row at one limit that may measure no energy (or no time) before that limit is left
// out of the profile with a warning; each is remeasured from the warm-up.
inline constexpr int kMaxEmptyProfilingWindows = 3;

// The defaults here are the only ones: the Python binding and GlobalPowerLimitOptimizer read
// them from this struct. The constructor checks the values (the binding and Python only convert
// types), throwing Error(kInvalidArgument) that names the option, e.g. "profile_steps must be at
// least 1, got 0", or "wait_steps is too large: ..." above kMaxPowerLimitOptimizerOption.
struct PowerLimitOptimizerOptions {
  // nullptr: ZeusCostSelector(0.5, world size from the reducer).
  std::shared_ptr<const optimizer::OptimumSelector> selector;
  int wait_steps = 1;      // >= 0
  int warmup_steps = 10;   // >= 0 (0 profiles right after the limit is set)
  int profile_steps = 40;  // >= 1
  int pl_step_w = 25;      // >= 1
  // When the file exists, profiling is skipped; when it does not, it is written once profiling
  // ends.
  std::filesystem::path profile_path;
  // nullptr: LocalReducer (one process).
  std::shared_ptr<Reducer> reducer;
  // Restore the maximum power limit on SIGINT/SIGTERM too (see docs/power-limit-optimizer.md);
  // by the same rule as the destructor's.
  bool restore_on_signal = true;
};

namespace plo_state {
struct Ready {
  std::uint32_t next_power_limit_mw;
  int steps;
};
struct Warmup {
  std::uint32_t power_limit_mw;
  int steps;
};
struct Profiling {
  std::uint32_t power_limit_mw;
  int steps;
};
struct Done {
  std::uint32_t optimal_power_limit_mw;
};
}  // namespace plo_state
using PowerLimitOptimizerState =
    std::variant<plo_state::Ready, plo_state::Warmup, plo_state::Profiling, plo_state::Done>;

class PowerLimitOptimizer {
 public:
  // `gpus` are the GPUs this process trains on (the monitor's GPU indices into them). Throws
  // Error(kInvalidArgument) for bad options or GPUs whose power-limit ranges differ, and
  // Error(kNoPermission) (saying how to get the right) when the limit cannot be set.
  PowerLimitOptimizer(std::shared_ptr<monitor::WindowMonitor> monitor, const device::Gpus& gpus,
                      PowerLimitOptimizerOptions options = {});
  // Restores the maximum power limit, unless another live optimizer manages the GPUs or someone
  // changed the limit since this process's optimizers last set it (see the internal
  // runtime/power_limit_restorer.hpp).
  ~PowerLimitOptimizer();
  PowerLimitOptimizer(const PowerLimitOptimizer&) = delete;
  PowerLimitOptimizer& operator=(const PowerLimitOptimizer&) = delete;

  void on_train_begin() {}
  void on_epoch_begin() {}
  void on_step_begin();
  void on_step_end() {}
  void on_epoch_end();
  void on_train_end() {}

  const PowerLimitOptimizerState& state() const { return state_; }
  // The candidate limits, from the maximum down to the minimum (always included).
  const std::vector<std::uint32_t>& power_limits_mw() const { return power_limits_mw_; }
  const std::vector<optimizer::PowerLimitMeasurement>& measurements() const {
    return measurements_;
  }
  // The chosen limit once profiling is done.
  std::optional<std::uint32_t> optimal_power_limit_mw() const;

 private:
  // The constructor's part after registration: loads the profile or starts at the maximum.
  void start(int wait_steps);
  // Profiles the limits of profile_order_ missing from a profile whose bad entries were skipped.
  void remeasure(const std::vector<std::string>& skipped, int wait_steps);
  void set_power_limit(std::uint32_t power_limit_mw);
  void finish_window();
  // After the window at `limit_mw`: the next limit of profile_order_, or the selection.
  void next_limit_after(std::uint32_t limit_mw);
  void select_and_save();
  std::string window_name(std::uint32_t power_limit_mw) const;

  std::shared_ptr<monitor::WindowMonitor> monitor_;
  std::vector<std::shared_ptr<device::Gpu>> gpus_;
  std::shared_ptr<const optimizer::OptimumSelector> selector_;
  std::shared_ptr<Reducer> reducer_;
  int warmup_steps_;
  int profile_steps_;
  std::filesystem::path profile_path_;
  std::vector<std::uint32_t> power_limits_mw_;
  // The limits to profile, in order: power_limits_mw_, or those a damaged profile lacked.
  std::vector<std::uint32_t> profile_order_;
  int bad_windows_ = 0;  // consecutive windows at the current limit that measured nothing
  int steps_this_epoch_ = 0;
  bool warned_short_epochs_ = false;
  std::uint32_t max_power_limit_mw_ = 0;
  std::uint32_t current_power_limit_mw_ = 0;  // what this optimizer last set (0: nothing yet)
  std::vector<optimizer::PowerLimitMeasurement> measurements_;
  PowerLimitOptimizerState state_;
  int restore_registration_ = -1;
};

}  // namespace zeus::runtime
