// SoC energy (a Jetson's power rails): each rail's power polled in the background by the one
// PowerSampler and integrated as its sample-and-hold signal, exactly as GPUs without an energy
// counter are (docs/devices.md, "Jetson"). A rail read that fails (a file gone, a value that is
// no number) is counted and skipped: the rail's last power is held over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::monitor {

// How often a rail is polled unless told: the INA3221's own conversion cycle on the boards is a
// few milliseconds to about 10 ms with L4T's averaging, and a sysfs read costs tens of µs.
inline constexpr double kDefaultSocPeriodS = 0.05;

struct SocSamplerOptions {
  double period_s = kDefaultSocPeriodS;  // within the PowerSampler's [1 ms, 1 day]
  std::size_t max_samples_per_series = kDefaultMaxSamplesPerSeries;
  std::shared_ptr<Clock> clock;  // the steady clock when null
  bool start_thread = true;      // tests drive sample_once() on a ManualClock
};

// The cumulative readings of every rail at one instant (a window's start or end).
struct SocReading {
  std::vector<double> energy_j;  // per rail, the sampler's virtual counter
  std::uint64_t skipped = 0;     // failed rail reads so far, every rail together
};

class SocSampler {
 public:
  // Samples every rail once before returning, so that a window can begin right away. Throws
  // Error(kInvalidArgument) for a SoC without rails or a period out of range.
  explicit SocSampler(std::shared_ptr<const device::JetsonSoc> soc, SocSamplerOptions options = {});

  const device::JetsonSoc& soc() const { return *soc_; }
  const std::shared_ptr<const device::JetsonSoc>& shared_soc() const { return soc_; }
  double period_s() const { return sampler_->period_s(); }
  void sample_once() { sampler_->sample_once(); }
  void stop() { sampler_->stop(); }

  // Every rail's counter at `time_ns` into `reading` (its vector reused).
  void read(std::int64_t time_ns, SocReading& reading) const;
  // Every rail's counter at one instant: the clock's present.
  SocReading read_now() const;
  // The energy of each rail between two readings, with the reads skipped between them.
  SocEnergy energy_between(const SocReading& start, const SocReading& end) const;
  // Rail `rail`'s latest power (W), nullopt before its first good read.
  std::optional<double> power_w(std::size_t rail) const;
  // Its counter now (J): the latest power held to the clock's present.
  double energy_j(std::size_t rail) const;
  // Failed reads of rail `rail` since the start.
  std::uint64_t skipped(std::size_t rail) const;

 private:
  std::shared_ptr<const device::JetsonSoc> soc_;
  device::Gpus rails_;  // one SocRailGpu per rail, for the sampler
  std::shared_ptr<Clock> clock_;
  std::unique_ptr<PowerSampler> sampler_;
};

}  // namespace zeus::monitor
