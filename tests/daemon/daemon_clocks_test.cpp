// Locked clocks through zeusd follow NVML's range semantics: any range that meets the supported
// clocks is accepted and the (simulated) driver runs at supported clocks inside it; a range wholly
// outside them, or min > max, is a 400 naming the supported span, and nothing changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "support/running_daemon.hpp"

namespace zeus::daemon {
namespace {

using nlohmann::json;

device::SimulatedGpu& simulated(Running& d, int index) {
  return dynamic_cast<device::SimulatedGpu&>(d.gpu(index));
}

std::string set_clocks(const char* route, int gpu, std::uint32_t min_mhz, std::uint32_t max_mhz,
                       bool block = true) {
  return std::string("/gpu/") + route + "?gpu_ids=" + std::to_string(gpu) +
         "&min_clock_mhz=" + std::to_string(min_mhz) + "&max_clock_mhz=" + std::to_string(max_mhz) +
         "&block=" + (block ? "true" : "false");
}

TEST(ZeusdClocksTest, GraphicsRangeOfNonMembersIsAcceptedAndSnapped) {
  Running d({});
  // The request: on an H200 (345-1980 MHz in 15 MHz steps from the top) 1000 MHz is not
  // a listed clock.
  const auto graphics = d.gpu(0).supported_graphics_clocks_mhz(std::nullopt);
  ASSERT_EQ(std::count(graphics.begin(), graphics.end(), 1000u), 0);
  Reply r = post(d, set_clocks("set_gpu_locked_clocks", 0, 1000, 1500));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.body.empty()) << r.body;
  // The driver settles on the nearest supported clocks (1980 - 15k): 1005 and 1500.
  EXPECT_EQ(simulated(d, 0).locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{1005}, std::uint32_t{1500}));
  EXPECT_FALSE(simulated(d, 1).locked_graphics_clocks_mhz().has_value());

  // A range wider than the span is clamped to it.
  r = post(d, set_clocks("set_gpu_locked_clocks", 1, 1, 99999));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(simulated(d, 1).locked_graphics_clocks_mhz(),
            std::make_pair(std::uint32_t{345}, std::uint32_t{1980}));

  r = post(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0,1&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(simulated(d, 0).locked_graphics_clocks_mhz().has_value());
}

TEST(ZeusdClocksTest, RangeOutsideTheSupportedSpanIs400NamingIt) {
  Running d({});
  Reply r = post(d, set_clocks("set_gpu_locked_clocks", 0, 100, 200));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Graphics clocks 100-200 MHz are outside the supported range 345-1980 MHz"),
            std::string::npos)
      << r.body;
  r = post(d, set_clocks("set_gpu_locked_clocks", 0, 2000, 2100));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("345-1980 MHz"), std::string::npos) << r.body;
  // Validated before queueing: a non-blocking request is refused too (the reference answers 200).
  r = post(d, set_clocks("set_gpu_locked_clocks", 0, 100, 200, false));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_FALSE(simulated(d, 0).locked_graphics_clocks_mhz().has_value());

  r = post(d, set_clocks("set_gpu_locked_clocks", 0, 1500, 1000));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("min_clock_mhz 1500 is greater than max_clock_mhz 1000"), std::string::npos)
      << r.body;
  // A single-point range on a listed clock is fine, as before.
  r = post(d, set_clocks("set_gpu_locked_clocks", 0, 1980, 1980));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(ZeusdClocksTest, MemoryClocksFollowTheSameRule) {
  Running d({});
  const auto memory = d.gpu(0).supported_memory_clocks_mhz();
  ASSERT_EQ(memory, (std::vector<std::uint32_t>{3201}));
  // A range around the only memory clock.
  Reply r = post(d, set_clocks("set_mem_locked_clocks", 0, 3000, 3500));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(simulated(d, 0).locked_memory_clocks_mhz(),
            std::make_pair(std::uint32_t{3201}, std::uint32_t{3201}));
  r = post(d,
           "/gpu/set_mem_locked_clocks?gpu_ids=0,1&min_clock_mhz=3201&max_clock_mhz=3201"
           "&block=true");
  EXPECT_EQ(r.status, 200) << r.body;
  r = post(d, set_clocks("set_mem_locked_clocks", 0, 1, 1));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Memory clocks 1-1 MHz are outside the supported range 3201-3201 MHz"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(json::parse(r.body)["errors"].size(), 1u) << r.body;

  r = post(d, "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(simulated(d, 0).locked_memory_clocks_mhz().has_value());
  for (const char* route :
       {"reset_gpu_locked_clocks", "reset_mem_locked_clocks", "reset_locked_clocks"}) {
    r = post(d, std::string("/gpu/") + route + "?gpu_ids=0,1&block=true");
    EXPECT_EQ(r.status, 200) << route << ": " << r.body;
    r = post(d, std::string("/gpu/") + route + "?gpu_ids=0&block=false");
    EXPECT_EQ(r.status, 200) << route << ": " << r.body;
  }
  EXPECT_FALSE(simulated(d, 1).locked_memory_clocks_mhz().has_value());
}

}  // namespace
}  // namespace zeus::daemon
