// A monitor-only program outside the zeus tree: measures one window on the simulated GPUs and
// checks that the library's version matches its headers'.
#include <cstring>
#include <iostream>

#include "zeus/device/discovery.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/version.hpp"

int main() {
  std::cout << "zeus " << zeus::version() << " (headers " << ZEUS_VERSION_STRING << ")\n";
  if (std::strcmp(zeus::version(), ZEUS_VERSION_STRING) != 0) {
    std::cout << "version mismatch\n";
    return 1;
  }
  const zeus::device::Gpus& gpus = zeus::device::get_gpus();
  zeus::monitor::ZeusMonitor monitor;
  monitor.begin_window("monitor-only");
  const zeus::monitor::Measurement measurement = monitor.end_window("monitor-only");
  std::cout << "monitor-only window over " << measurement.gpu_energy_j.size() << " GPU(s)\n";
  return gpus.empty() || measurement.gpu_energy_j.size() != gpus.size() ? 1 : 0;
}
