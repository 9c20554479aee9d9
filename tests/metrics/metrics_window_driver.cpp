// A training-loop stand-in for the real-Prometheus test (prometheus_server_test.py): ZeusMonitor
// windows "step" (about 50 ms) and "epoch" (10 steps) on the GPUs of ZEUS_SIMULATED_GPUS, feeding
// WindowHistograms, with the device metrics, served at /metrics until SIGTERM or SIGINT.
//
// Usage: metrics_window_driver PORT_FILE
#include <csignal>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "zeus/device/discovery.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

std::atomic<bool> stop{false};

void on_signal(int) {
  stop = true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: metrics_window_driver PORT_FILE\n";
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  try {
    const zeus::device::Gpus& gpus = zeus::device::get_gpus();
    auto histograms = std::make_shared<zeus::metrics::WindowHistograms>();
    zeus::monitor::ZeusMonitorOptions options;
    options.cpu_indices = std::vector<int>{};
    options.on_window_end = [histograms](const std::string& window,
                                         const zeus::monitor::Measurement& m) {
      histograms->observe(window, m);
    };
    zeus::monitor::ZeusMonitor monitor(gpus, {}, options);
    zeus::metrics::DeviceMetricsOptions device_options;
    device_options.interval_s = 0.2;
    zeus::metrics::DeviceMetrics devices(gpus, {}, device_options);
    zeus::metrics::MetricsServer server(
        "127.0.0.1", 0,
        {[&devices](std::string& out) { devices.render(out); },
         [histograms](std::string& out) { histograms->render(out); }});
    server.start();
    {
      std::ofstream out(std::string(argv[1]) + ".tmp");
      out << server.port() << "\n";
    }
    std::rename((std::string(argv[1]) + ".tmp").c_str(), argv[1]);
    while (!stop) {
      monitor.begin_window("epoch");
      for (int step = 0; step < 10 && !stop; ++step) {
        monitor.begin_window("step");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        monitor.end_window("step");
      }
      monitor.end_window("epoch");
    }
    server.stop();
    devices.stop();
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "metrics_window_driver: " << error.what() << "\n";
    return 1;
  }
}
