// The exporter's SoC series (a Jetson's power rails): the monitor layer's SocSampler driven by
// DeviceMetrics' reading thread, its latest figures kept for a scrape. Internal to metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/monitor/soc_sampler.hpp"

namespace zeus::metrics {

// Families (rail: the board's name for it; kind: cpu, gpu, soc, total, other):
//   zeus_soc_rail_power_watts{rail,kind}           gauge (the latest poll)
//   zeus_soc_rail_energy_joules_total{rail,kind}   counter (held power integrated)
//   zeus_device_read_errors_total{device="soc_rail_<rail>"} counter (failed polls, power held)
class SocMetrics {
 public:
  // Polled every `interval_s` by the caller's sample_once(). Throws as SocSampler does.
  SocMetrics(std::shared_ptr<const device::JetsonSoc> soc, double interval_s,
             std::shared_ptr<Clock> clock);

  void sample_once();
  void render(std::string& out) const;
  // The families of zeus_device_read_errors_total this adds, without the header (DeviceMetrics
  // writes it once).
  void render_read_errors(std::string& out) const;

 private:
  struct Rail {
    std::optional<double> power_w;
    double energy_j = 0.0;
    std::uint64_t errors = 0;
  };
  monitor::SocSampler sampler_;
  mutable std::mutex mutex_;
  std::vector<Rail> rails_;  // under mutex_
};

}  // namespace zeus::metrics
