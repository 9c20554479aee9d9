// The measurement-window interface shared by the live monitor and the replay monitor, so that
// consumers (the power-limit optimizer) can run on either.
#pragma once

#include <string>
#include <vector>

#include "zeus/monitor/measurement.hpp"

namespace zeus::monitor {

// How a window opens: `monitor.begin_window("step", {.sync_execution = false})`. The defaults
// live here, not in default arguments of the virtual functions, so that every implementation
// and every call site agrees on them.
struct BeginWindowOptions {
  bool sync_execution = true;  // call the synchronisation hook (e.g. CUDA synchronize) first
  bool restart = false;        // an open window of the same name is discarded, not an error
};

// How a window closes: `monitor.end_window("step", {.cancel = true})`.
struct EndWindowOptions {
  bool sync_execution = true;  // call the synchronisation hook first
  bool cancel = false;         // a zero measurement, nothing logged or observed
};

class WindowMonitor {
 public:
  virtual ~WindowMonitor() = default;

  // Opens window `name`. Throws Error(kInvalidArgument) if it is already open, unless
  // `options.restart` (then the old one is discarded).
  virtual void begin_window(const std::string& name, BeginWindowOptions options = {}) = 0;
  // Closes window `name` and returns what it measured. With `options.cancel`, returns a zero
  // measurement and logs nothing. Throws Error(kInvalidArgument) for an unknown name. The window
  // is closed even when reading a device fails.
  virtual Measurement end_window(const std::string& name, EndWindowOptions options = {}) = 0;

  // The GPU indices measured, in order.
  virtual const std::vector<int>& gpu_indices() const = 0;
};

}  // namespace zeus::monitor
