// The C++ side of the real-Pushgateway test (pushgateway_server_test.py): for SECONDS, on the GPUs
// of ZEUS_SIMULATED_GPUS, pushes what the reference's three classes push:
//   job "cpp_hist":    ZeusMonitor windows "step" (~50 ms) into WindowHistograms, PUT after each;
//   job "cpp_counter": EnergyCounterPusher, window "epoch", every 0.2 s;
//   job "cpp_power":   PowerGaugePusher, window "epoch", every 0.2 s.
// Exits 0 when every push succeeded, 1 (saying which failed) otherwise.
//
// Usage: pushgateway_push_driver GATEWAY_URL SECONDS
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "zeus/device/discovery.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/metrics/pushgateway.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

zeus::metrics::PushgatewayClient client(const std::string& url, const std::string& job) {
  zeus::metrics::PushgatewayOptions options;
  options.url = url;
  options.job = job;
  return zeus::metrics::PushgatewayClient(options);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: pushgateway_push_driver GATEWAY_URL SECONDS\n";
    return 2;
  }
  const std::string url = argv[1];
  const double seconds = std::stod(argv[2]);
  try {
    const zeus::device::Gpus& gpus = zeus::device::get_gpus();
    std::vector<int> indices;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      indices.push_back(static_cast<int>(i));
    }
    zeus::metrics::EnergyCounterPusher counter(gpus, indices, {}, std::vector<int>{}, 0.2,
                                               client(url, "cpp_counter"));
    zeus::metrics::PowerGaugePusher power(gpus, indices, 0.2, client(url, "cpp_power"));
    zeus::metrics::WindowHistograms histograms;
    const zeus::metrics::PushgatewayClient histogram_client = client(url, "cpp_hist");
    zeus::monitor::ZeusMonitorOptions options;
    options.cpu_indices = std::vector<int>{};
    zeus::monitor::ZeusMonitor monitor(gpus, {}, options);

    counter.begin_window("epoch");
    power.begin_window("epoch");
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int steps = 0;
    while (std::chrono::steady_clock::now() < end) {
      monitor.begin_window("step");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      histograms.observe("step", monitor.end_window("step"));
      std::string body;
      histograms.render(body);
      histogram_client.push(body);  // throws on failure: the test fails
      ++steps;
    }
    const bool counter_ok = counter.end_window("epoch");
    const bool power_ok = power.end_window("epoch");
    const auto failures = counter.stats().failures + power.stats().failures;
    if (!counter_ok || !power_ok || failures > 0) {
      std::cerr << "pushgateway_push_driver: " << failures
                << " periodic push(es) failed; last: " << counter.stats().last_error
                << power.stats().last_error << "\n";
      return 1;
    }
    std::cout << "pushed " << steps << " step windows, " << counter.stats().pushes
              << " counter and " << power.stats().pushes << " gauge pushes\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "pushgateway_push_driver: " << error.what() << "\n";
    return 1;
  }
}
