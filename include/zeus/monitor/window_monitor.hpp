// The measurement-window interface shared by the live monitor and the replay monitor, so that
// consumers (the power-limit optimizer) can run on either.
#pragma once

#include <string>
#include <vector>

#include "zeus/monitor/measurement.hpp"

namespace zeus {

class WindowMonitor {
 public:
  virtual ~WindowMonitor() = default;

  // Opens window `name`. Throws Error(kInvalidArgument) if it is already open, unless `restart`
  // (then the old one is discarded). `sync_execution` calls the synchronisation hook first.
  virtual void begin_window(const std::string& name, bool sync_execution = true,
                            bool restart = false) = 0;
  // Closes window `name` and returns what it measured. With `cancel`, returns a zero
  // measurement and logs nothing. Throws Error(kInvalidArgument) for an unknown name. The window
  // is closed even when reading a device fails.
  virtual Measurement end_window(const std::string& name, bool sync_execution = true,
                                 bool cancel = false) = 0;

  // The GPU indices measured, in order.
  virtual const std::vector<int>& gpu_indices() const = 0;
};

}  // namespace zeus
