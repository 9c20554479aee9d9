// The power domains: what each reads, whether a GPU offers it, their names, and how often a
// reading changes (the sampling period a PowerSampler infers).
#include <algorithm>
#include <optional>
#include <string>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::monitor {

std::uint32_t read_power_mw(device::Gpu& gpu, PowerDomain domain) {
  switch (domain) {
    case PowerDomain::kDeviceInstant:
      return gpu.instant_power_mw();
    case PowerDomain::kDeviceAverage:
      return gpu.average_power_mw();
    case PowerDomain::kMemoryAverage:
      return gpu.average_memory_power_mw();
  }
  return 0;
}

namespace {

template <typename Read>
bool answers(Read read) {
  try {
    read();
    return true;
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNotSupported) {
      return false;
    }
    throw;
  }
}

}  // namespace

bool supports_power_domain(device::Gpu& gpu, PowerDomain domain) {
  return answers([&] { (void)read_power_mw(gpu, domain); });
}

bool supports_temperature(device::Gpu& gpu) {
  return answers([&] { (void)gpu.temperature_c(); });
}

std::string_view power_domain_name(PowerDomain domain) {
  switch (domain) {
    case PowerDomain::kDeviceInstant:
      return "device_instant";
    case PowerDomain::kDeviceAverage:
      return "device_average";
    case PowerDomain::kMemoryAverage:
      return "memory_average";
  }
  return "unknown";
}

PowerDomain parse_power_domain(std::string_view text) {
  if (text == "device_instant" || text == "instant") {
    return PowerDomain::kDeviceInstant;
  }
  if (text == "device_average" || text == "average") {
    return PowerDomain::kDeviceAverage;
  }
  if (text == "memory_average" || text == "memory") {
    return PowerDomain::kMemoryAverage;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown power domain \"" + std::string(text) +
                  "\"; use device_instant (instant), device_average (average) or "
                  "memory_average (memory)");
}

double infer_power_update_period_s(device::Gpu& gpu, PowerDomain domain, Clock& clock,
                                   double budget_s) {
  constexpr int kMaxReads = 2000;
  constexpr double kDefaultPeriodS = 0.1;
  const std::int64_t start_ns = clock.now_ns();
  const auto budget_ns = units::nanoseconds_from_seconds(budget_s);
  std::optional<std::uint32_t> previous_mw;
  std::optional<std::int64_t> previous_change_ns;
  std::optional<std::int64_t> shortest_ns;
  for (int i = 0; i < kMaxReads; ++i) {
    const std::int64_t now_ns = clock.now_ns();
    if (now_ns - start_ns > budget_ns) {
      break;
    }
    const std::uint32_t value_mw = read_power_mw(gpu, domain);
    if (previous_mw && value_mw != *previous_mw) {
      // The first change only marks a start: the interval before it is partial.
      if (previous_change_ns) {
        const std::int64_t interval_ns = now_ns - *previous_change_ns;
        if (interval_ns > 0 && (!shortest_ns || interval_ns < *shortest_ns)) {
          shortest_ns = interval_ns;
        }
      }
      previous_change_ns = now_ns;
    }
    previous_mw = value_mw;
  }
  if (!shortest_ns) {
    return kDefaultPeriodS;
  }
  return std::clamp(units::seconds_from_nanoseconds(*shortest_ns) / 2.0, kMinSamplingPeriodS,
                    kDefaultPeriodS);
}

}  // namespace zeus::monitor
