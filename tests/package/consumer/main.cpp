// A program outside the zeus tree, built against the installed package.
#include <iostream>

#include "zeus/device/discovery.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

int main() {
  const zeus::device::Gpus& gpus = zeus::device::get_gpus();
  std::cout << gpus.size() << " GPU(s): " << (gpus.empty() ? "none" : gpus.at(0).name()) << "\n";
  zeus::monitor::ZeusMonitor monitor;
  monitor.begin_window("consumer");
  const zeus::monitor::Measurement measurement = monitor.end_window("consumer");
  std::cout << "window over " << measurement.gpu_energy_j.size() << " GPU(s)\n";
  return gpus.empty() || measurement.gpu_energy_j.size() != gpus.size() ? 1 : 0;
}
