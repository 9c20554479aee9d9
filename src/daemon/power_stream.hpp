// zeusd's power over time: the server-sent-event streams of GPU and CPU power, and the
// two-sample CPU power of /cpu/get_power. Elapsed time comes from the daemon's Clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "daemon/reply.hpp"
#include "http/host.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpus.hpp"

namespace zeus::daemon {

// Average power between two readings of a microjoule counter `elapsed_ns` apart, in whole
// milliwatts; 0 when the counter went backwards or no time passed.
std::uint32_t power_mw_between(std::uint64_t before_uj, std::uint64_t after_uj,
                               std::int64_t elapsed_ns);

// Samplers (threads) at most; a stream of another set past them shares the sampler of every GPU.
inline constexpr std::size_t kMaxGpuPowerSamplers = 8;

// The GPU power streams of one daemon, read once and broadcast: the streams of one set of GPUs
// (whatever their order) at one period share one sampler, a thread that reads each of those GPUs
// once a period, however many streams there are. The first stream of a set starts its sampler
// (reading the GPUs at once, so that the stream begins with their values) and the last one to end
// stops it. At most kMaxGpuPowerSamplers run: past them a new set is served by the sampler of
// every GPU, so that clients asking for many different sets cannot make a thread each.
// Thread-safe.
class GpuPowerFeeds {
 public:
  // `gpus` must outlive this and every stream.
  explicit GpuPowerFeeds(device::Gpus& gpus);
  ~GpuPowerFeeds();
  GpuPowerFeeds(const GpuPowerFeeds&) = delete;
  GpuPowerFeeds& operator=(const GpuPowerFeeds&) = delete;

  // Makes `res` an SSE stream of {"timestamp_ms","gpu_id","power_mw"} events for `ids`: every
  // GPU's power at once, then only changes, once a period of `poll_hz` (20 Hz when not > 0). A GPU
  // whose reading fails is left out of that sample.
  void stream(http::Response& res, std::vector<int> ids, double poll_hz);
  // Samplers running now (one per set of GPUs and period that has a stream).
  std::size_t samplers() const;

 private:
  class Sampler;

  device::Gpus& gpus_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::vector<int>, std::int64_t>, std::weak_ptr<Sampler>> samplers_;
};

// Makes `res` an SSE stream of {"timestamp_ms","cpu_id","cpu_mw","dram_mw"} events, one per CPU
// each period after the first (which only reads the energy baselines).
void stream_cpu_power(http::Response& res, std::vector<std::shared_ptr<device::Cpu>> cpus,
                      double poll_hz, std::shared_ptr<const Clock> clock);

// /cpu/get_power's body: {"timestamp_ms", "power_mw": {"<id>": {"cpu_mw","dram_mw"}}} from two
// energy samples 1/poll_hz apart (slept on `clock`).
Json sample_cpu_power(const std::vector<std::shared_ptr<device::Cpu>>& cpus, double poll_hz,
                      const Clock& clock);

}  // namespace zeus::daemon
