#include "daemon/power_stream.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

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

void stream_gpu_power(http::Response& res, device::Gpus& gpus, std::vector<int> ids,
                      double poll_hz) {
  auto last_mw = std::make_shared<std::vector<std::optional<std::uint32_t>>>(ids.size());
  const auto stream = start_stream(res, poll_hz > 0 ? poll_hz : 20.0);
  // The current values right away, then only changes, once a period.
  stream->next = [&gpus, ids = std::move(ids), last_mw](std::string& out) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::uint32_t power_mw = 0;
      try {
        power_mw = gpus.at(ids[i]).instant_power_mw();
      } catch (const std::exception& e) {
        log().debug("zeusd: stream: GPU {} power: {}", ids[i], e.what());
        continue;
      }
      if ((*last_mw)[i] == power_mw) {
        continue;
      }
      (*last_mw)[i] = power_mw;
      send_event(out,
                 {{"timestamp_ms", unix_time_ms()}, {"gpu_id", ids[i]}, {"power_mw", power_mw}});
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
