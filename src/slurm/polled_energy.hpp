// The energy of a step's GPUs that have no energy counter (pre-Volta NVIDIA): their power read
// through zeusd by the monitor layer's PowerSampler (one background thread, the sample-and-hold
// integral), from the step's start to its end. Each GPU's figure is the integral from its first
// sample, so it misses at most one period at the start and holds the last sample to the end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zeus/device/zeusd_config.hpp"

namespace zeus::monitor {
class PowerSampler;
}

namespace zeus::slurm {

class PolledEnergy {
 public:
  // `gpus`: zeusd's indices. Starts sampling every `period_s` on its own connection to zeusd.
  // Throws zeus::Error when the GPUs' power cannot be read.
  PolledEnergy(const device::ZeusdConfig& zeusd, const std::vector<int>& gpus, double period_s);
  ~PolledEnergy();
  PolledEnergy(const PolledEnergy&) = delete;
  PolledEnergy& operator=(const PolledEnergy&) = delete;

  // Each GPU's energy (J) from its first sample to now, sampling on; a GPU never read is missing.
  std::map<int, double> so_far() const;
  // Stops sampling and gives each GPU's energy (J) from its first sample to now; a GPU never
  // read is missing.
  std::map<int, double> finish();

 private:
  std::map<int, int> sampler_index_;  // zeusd index -> index in the sampler's Gpus
  std::unique_ptr<monitor::PowerSampler> sampler_;
};

}  // namespace zeus::slurm
