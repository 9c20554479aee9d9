// The one GPU catalogue (device/gpu_models.hpp) as the simulator's layers read it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "device/gpu_models.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/sim/trace.hpp"

namespace {

TEST(GpuCatalogue, KeysAreUniqueAndEveryEntryKnowsSomething) {
  std::set<std::string> keys;
  for (const zeus::device::GpuModelEntry& entry : zeus::device::gpu_models()) {
    EXPECT_TRUE(keys.insert(entry.key).second) << entry.key;
    EXPECT_TRUE(entry.board || entry.workload) << entry.key;
    if (entry.board) {
      EXPECT_EQ(entry.board->key, entry.key);
    }
    EXPECT_EQ(zeus::device::find_gpu_model(entry.key), &entry);
  }
  EXPECT_EQ(zeus::device::find_gpu_model("nonesuch"), nullptr);
}

TEST(GpuCatalogue, EveryTraceGpuHasAWorkloadModelWhosePowerLimitsAscend) {
  for (const std::string& gpu : zeus::sim::trace_gpus()) {
    const zeus::device::GpuModelEntry* entry = zeus::device::find_gpu_model(gpu);
    ASSERT_NE(entry, nullptr) << gpu;
    ASSERT_TRUE(entry->workload) << gpu;
    const auto& limits = entry->workload->power_limits_w;
    ASSERT_FALSE(limits.empty());
    EXPECT_TRUE(std::is_sorted(limits.begin(), limits.end())) << gpu;
  }
}

TEST(GpuCatalogue, SimulatedBoardsAreTheEntriesWithABoard) {
  std::vector<std::string> boards;
  for (const zeus::device::GpuModelEntry& entry : zeus::device::gpu_models()) {
    if (entry.board) {
      boards.push_back(entry.key);
    }
  }
  std::vector<std::string> simulated;
  for (const zeus::device::SimulatedGpuModel& model : zeus::device::simulated_gpu_models()) {
    simulated.push_back(model.key);
  }
  EXPECT_EQ(simulated, boards);
  EXPECT_EQ(simulated.size(), 6u);  // v100, a40, p100, a100, h100, h200
  EXPECT_FALSE(zeus::device::simulated_gpu_model("p100").energy_counter);
}

}  // namespace
