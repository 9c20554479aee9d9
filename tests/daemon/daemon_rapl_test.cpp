// zeusd keeps its RAPL counters tracked for as long as it serves them, so that cumulative CPU
// energy differenced over any span counts every wraparound (docs/zeusd.md, docs/rapl.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "device/rapl_test_support.hpp"
#include "support/running_daemon.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/rapl_tracker.hpp"

namespace zeus::daemon {
namespace {

using nlohmann::json;
using namespace zeus::testing::rapl;

class ZeusdRapl : public RaplTest {};

TEST_F(ZeusdRapl, CumulativeCpuEnergyCountsEveryWrapWhileTheDaemonServes) {
  WrappingRig rig(root_);
  const auto clock = std::make_shared<ManualClock>();
  const auto tracker = std::make_shared<device::RaplTracker>(
      device::RaplTrackerOptions{clock, /*start_thread=*/false});
  const device::CpuDiscovery found = device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  {
    Running d(DaemonConfig{}, 1, {}, nullptr, found.cpus);
    EXPECT_EQ(tracker->tracked_zones(), 2u);  // package and DRAM, from the start
    const std::string route = "/cpu/get_cumulative_energy?cpu=true&dram=true";
    const json before = json::parse(get(d, route).body);
    for (int second = 0; second < 95; ++second) {
      rig.run_one_second();
      clock->advance_s(1.0);
      tracker->sweep();  // what the tracker's thread does every second here
    }
    const json after = json::parse(get(d, route).body);
    EXPECT_EQ(after["0"]["cpu_energy_uj"].get<std::uint64_t>() -
                  before["0"]["cpu_energy_uj"].get<std::uint64_t>(),
              9'500'000'000u);  // 9 wraps of 1 kJ
    EXPECT_EQ(after["0"]["dram_energy_uj"].get<std::uint64_t>() -
                  before["0"]["dram_energy_uj"].get<std::uint64_t>(),
              2'375'000'000u);  // 23 wraps of 100 J
    EXPECT_EQ(found.cpus[0]->counter_health().gaps, 0u);
  }
  EXPECT_EQ(tracker->tracked_zones(), 0u);
}

}  // namespace
}  // namespace zeus::daemon
