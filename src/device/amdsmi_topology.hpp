// Which AMD GPUs an AMD SMI session has and what each can be trusted to report: processors listed
// over all sockets, ordered by HIP index (enumeration hip_id, else the KFD node id), probed for
// which socket power fields they fill in, the energy counter checked against power over a short
// window, and the second die of an MI250/MI250X marked as having no readings of its own. The
// result is one immutable DeviceRecord per GPU, which amdsmi_gpu.cpp's Gpu serves from.
#pragma once

#include <string>
#include <vector>

#include "amdsmi_library.hpp"

namespace zeus::device::amdsmi {

// What discovery learned about one device; immutable afterwards.
struct DeviceRecord {
  ProcessorHandle handle = nullptr;
  int index = 0;  // HIP index
  bool instant_power_supported = true;
  bool average_power_supported = true;
  bool energy_counter_supported = false;
  std::string energy_counter_note;  // why the counter is disabled
  bool odd_chiplet = false;         // second die of an MI250/MI250X
};

// The devices of `session` in HIP order, probed and validated as above. The validation window is
// options.validation_window_s, timed and slept on options.clock (the steady clock when null).
std::vector<DeviceRecord> discover_devices(const Session& session, const AmdSmiOptions& options);

// Why GPU `index` (an odd MI250 die) has no power or energy reading.
std::string odd_chiplet_message(int index);

}  // namespace zeus::device::amdsmi
