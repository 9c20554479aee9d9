#include "daemon/power_stream.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/log.hpp"
#include "zeus/common/units.hpp"

namespace zeus::daemon {
namespace {

std::chrono::milliseconds period_of(double hz) {
  return std::chrono::milliseconds(
      std::max<long long>(1, std::llround(units::milliseconds_from_seconds(1.0 / hz))));
}

void send_event(std::string& out, const Json& event) {
  out += "data: " + event.dump() + "\n\n";
}

std::shared_ptr<http::StreamSource> start_stream(http::Response& res, double poll_hz) {
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = std::make_shared<http::StreamSource>();
  res.stream->period = period_of(poll_hz);
  return res.stream;
}

// One reading of a CPU's energy counters.
struct EnergySample {
  std::int64_t time_ns = 0;
  std::uint64_t cpu_uj = 0;
  std::optional<std::uint64_t> dram_uj;
};

EnergySample sample_energy(device::Cpu& cpu, const Clock& clock) {
  EnergySample sample;
  sample.time_ns = clock.now_ns();
  sample.cpu_uj = cpu.package_energy_uj();
  if (cpu.has_dram()) {
    sample.dram_uj = cpu.dram_energy_uj();
  }
  return sample;
}

// {"cpu_mw": N, "dram_mw": N or null} between two samples, over `elapsed_ns`.
Json power_between(const EnergySample& before, const EnergySample& after, std::int64_t elapsed_ns) {
  Json entry{{"cpu_mw", power_mw_between(before.cpu_uj, after.cpu_uj, elapsed_ns)},
             {"dram_mw", nullptr}};
  if (before.dram_uj && after.dram_uj) {
    entry["dram_mw"] = power_mw_between(*before.dram_uj, *after.dram_uj, elapsed_ns);
  }
  return entry;
}

}  // namespace

std::uint32_t power_mw_between(std::uint64_t before_uj, std::uint64_t after_uj,
                               std::int64_t elapsed_ns) {
  if (after_uj < before_uj || elapsed_ns <= 0) {
    return 0;
  }
  const double energy_mj =
      units::millijoules_from_microjoules(static_cast<double>(after_uj - before_uj));
  return static_cast<std::uint32_t>(energy_mj / units::seconds_from_nanoseconds(elapsed_ns));
}

// One reading of every GPU of a sampler's set. A GPU's event is formatted the first time a
// stream sends it (streams send only changes: an idle GPU costs no formatting).
class GpuPowerSample {
 public:
  GpuPowerSample(std::uint64_t sequence, std::vector<int> ids)
      : sequence_(sequence),
        ids_(std::move(ids)),
        power_mw_(ids_.size()),
        timestamp_ms_(ids_.size()),
        formatted_(ids_.size()),
        events_(ids_.size()) {}

  std::uint64_t sequence() const { return sequence_; }
  std::size_t size() const { return ids_.size(); }
  // nullopt when the reading failed.
  const std::optional<std::uint32_t>& power_mw(std::size_t i) const { return power_mw_[i]; }
  void set(std::size_t i, std::uint32_t power_mw, std::uint64_t timestamp_ms) {
    power_mw_[i] = power_mw;
    timestamp_ms_[i] = timestamp_ms;
  }
  // The SSE event of GPU i (one with a reading), formatted once whichever stream asks first.
  const std::string& event(std::size_t i) const {
    std::call_once(formatted_[i], [&] {
      send_event(
          events_[i],
          {{"timestamp_ms", timestamp_ms_[i]}, {"gpu_id", ids_[i]}, {"power_mw", *power_mw_[i]}});
    });
    return events_[i];
  }

 private:
  std::uint64_t sequence_;
  std::vector<int> ids_;
  std::vector<std::optional<std::uint32_t>> power_mw_;
  std::vector<std::uint64_t> timestamp_ms_;
  mutable std::vector<std::once_flag> formatted_;
  mutable std::vector<std::string> events_;
};

class GpuPowerFeeds::Sampler {
 public:
  Sampler(device::Gpus& gpus, std::vector<int> ids, std::chrono::milliseconds period)
      : gpus_(gpus), ids_(std::move(ids)), period_(period) {
    latest_ = read(1);
    thread_ = std::thread([this] { run(); });
  }
  ~Sampler() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  std::shared_ptr<const GpuPowerSample> latest() const {
    std::lock_guard lock(mutex_);
    return latest_;
  }

 private:
  std::shared_ptr<const GpuPowerSample> read(std::uint64_t sequence) const {
    auto sample = std::make_shared<GpuPowerSample>(sequence, ids_);
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      try {
        const std::uint32_t power_mw = gpus_.at(ids_[i]).instant_power_mw();
        sample->set(i, power_mw, unix_time_ms());
      } catch (const std::exception& e) {
        log().debug("zeusd: stream: GPU {} power: {}", ids_[i], e.what());
      }
    }
    return sample;
  }

  void run() {
    auto next_at = std::chrono::steady_clock::now() + period_;
    std::uint64_t sequence = 1;
    std::unique_lock lock(mutex_);
    while (!wake_.wait_until(lock, next_at, [this] { return stopping_; })) {
      lock.unlock();
      auto sample = read(++sequence);
      lock.lock();
      latest_ = std::move(sample);
      // Once a period from the last tick; after a stall, from now (no burst of catch-up reads).
      const auto now = std::chrono::steady_clock::now();
      next_at = next_at + period_ > now ? next_at + period_ : now + period_;
    }
  }

  device::Gpus& gpus_;
  const std::vector<int> ids_;
  const std::chrono::milliseconds period_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::shared_ptr<const GpuPowerSample> latest_;
  std::thread thread_;
};

GpuPowerFeeds::GpuPowerFeeds(device::Gpus& gpus) : gpus_(gpus) {}

GpuPowerFeeds::~GpuPowerFeeds() = default;

std::size_t GpuPowerFeeds::samplers() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(samplers_.begin(), samplers_.end(),
                    [](const auto& entry) { return !entry.second.expired(); }));
}

void GpuPowerFeeds::stream(http::Response& res, std::vector<int> ids, double poll_hz) {
  const auto stream = start_stream(res, poll_hz > 0 ? poll_hz : 20.0);
  // A sampler reads a set of GPUs in index order; each stream sends its own ids' events, in the
  // order it asked for them.
  std::vector<int> set = ids;
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  std::shared_ptr<Sampler> sampler;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(samplers_, [](const auto& entry) { return entry.second.expired(); });
    // The last place is kept for the sampler of every GPU, which serves any new set past the
    // others: no more threads.
    if (samplers_.size() + 1 >= kMaxGpuPowerSamplers &&
        !samplers_.contains({set, stream->period.count()})) {
      set.resize(gpus_.size());
      for (std::size_t i = 0; i < set.size(); ++i) {
        set[i] = static_cast<int>(i);
      }
    }
    std::weak_ptr<Sampler>& slot = samplers_[{set, stream->period.count()}];
    sampler = slot.lock();
    if (!sampler) {
      sampler = std::make_shared<Sampler>(gpus_, set, stream->period);
      slot = sampler;
    }
  }
  std::vector<std::size_t> positions;  // of each asked id in the sampler's set
  for (const int id : ids) {
    positions.push_back(
        static_cast<std::size_t>(std::lower_bound(set.begin(), set.end(), id) - set.begin()));
  }
  // The sampler's latest values right away, then only changes, once a period.
  auto last_mw = std::make_shared<std::vector<std::optional<std::uint32_t>>>(ids.size());
  auto last_sequence = std::make_shared<std::uint64_t>(0);
  // A copy of what the sampler thread read: cheap enough for the connection's own thread.
  stream->non_blocking = true;
  stream->next = [sampler = std::move(sampler), positions = std::move(positions), last_mw,
                  last_sequence](std::string& out) {
    const std::shared_ptr<const GpuPowerSample> sample = sampler->latest();
    if (sample->sequence() == *last_sequence) {
      return true;
    }
    *last_sequence = sample->sequence();
    for (std::size_t i = 0; i < positions.size(); ++i) {
      const std::optional<std::uint32_t>& power_mw = sample->power_mw(positions[i]);
      if (!power_mw || (*last_mw)[i] == power_mw) {
        continue;
      }
      (*last_mw)[i] = power_mw;
      out += sample->event(positions[i]);
    }
    return true;
  };
}

void stream_cpu_power(http::Response& res, std::vector<std::shared_ptr<device::Cpu>> cpus,
                      double poll_hz, std::shared_ptr<const Clock> clock) {
  auto baselines = std::make_shared<std::vector<std::optional<EnergySample>>>(cpus.size());
  const auto stream = start_stream(res, poll_hz > 0 ? poll_hz : 10.0);
  // The first call only reads the baselines; every later one (a period later) reports.
  stream->next = [cpus = std::move(cpus), baselines, clock](std::string& out) {
    for (std::size_t i = 0; i < cpus.size(); ++i) {
      EnergySample now;
      try {
        now = sample_energy(*cpus[i], *clock);
      } catch (const std::exception& e) {
        log().debug("zeusd: stream: CPU {} energy: {}", cpus[i]->index(), e.what());
        continue;
      }
      std::optional<EnergySample>& before = (*baselines)[i];
      if (before) {
        Json event{{"timestamp_ms", unix_time_ms()}, {"cpu_id", cpus[i]->index()}};
        event.update(power_between(*before, now, now.time_ns - before->time_ns));
        send_event(out, event);
      }
      before = now;
    }
    return true;
  };
}

Json sample_cpu_power(const std::vector<std::shared_ptr<device::Cpu>>& cpus, double poll_hz,
                      const Clock& clock) {
  auto sample = [&] {
    std::vector<EnergySample> out;
    for (const auto& cpu : cpus) {
      out.push_back(sample_energy(*cpu, clock));
    }
    return out;
  };
  const std::int64_t start_ns = clock.now_ns();
  const auto first = sample();
  clock.sleep_for_s(1.0 / (poll_hz > 0 ? poll_hz : 10.0));
  const auto second = sample();
  const std::int64_t elapsed_ns = clock.now_ns() - start_ns;
  Json power = Json::object();
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    power[std::to_string(cpus[i]->index())] = power_between(first[i], second[i], elapsed_ns);
  }
  return {{"timestamp_ms", unix_time_ms()}, {"power_mw", power}};
}

}  // namespace zeus::daemon
