// zeusd keeps its RAPL counters tracked for as long as it serves them, so that cumulative CPU
// energy differenced over any span counts every wraparound (docs/zeusd.md, docs/rapl.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/rapl_test_support.hpp"
#include "support/running_daemon.hpp"

namespace zeus::daemon {
namespace {

using nlohmann::json;
using namespace zeus::testing::rapl;

class ZeusdRapl : public TrackedRaplTest {};

TEST_F(ZeusdRapl, CumulativeCpuEnergyCountsEveryWrapWhileTheDaemonServes) {
  WrappingRig rig(root_);
  const std::vector<std::shared_ptr<device::Cpu>> cpus = discover();
  ASSERT_EQ(cpus.size(), 1u);
  {
    Running d(DaemonConfig{}, 1, {}, nullptr, cpus);
    EXPECT_EQ(tracker_->tracked_zones(), 2u);  // package and DRAM, from the start
    const std::string route = "/cpu/get_cumulative_energy?cpu=true&dram=true";
    const json before = json::parse(get(d, route).body);
    run(rig, 95);
    const json after = json::parse(get(d, route).body);
    EXPECT_EQ(after["0"]["cpu_energy_uj"].get<std::uint64_t>() -
                  before["0"]["cpu_energy_uj"].get<std::uint64_t>(),
              9'500'000'000u);  // 9 wraps of 1 kJ
    EXPECT_EQ(after["0"]["dram_energy_uj"].get<std::uint64_t>() -
                  before["0"]["dram_energy_uj"].get<std::uint64_t>(),
              2'375'000'000u);  // 23 wraps of 100 J
    EXPECT_EQ(cpus[0]->counter_health().gaps, 0u);
  }
  EXPECT_EQ(tracker_->tracked_zones(), 0u);
}

}  // namespace
}  // namespace zeus::daemon
