// AMD SMI before ROCm 7.2 is not thread-safe (reference #256): zeus calls such a library one call
// at a time, process-wide, and a thread-safe one (26.2, ROCm 7.2, and later) freely. The fake
// counts calls that enter while another is inside, each call waiting on entry so that unserialized
// calls from several threads do overlap.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "amdsmi_library.hpp"
#include "amdsmi_test_support.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace {

using namespace zeus::testing::amdsmi;

constexpr int kThreads = 4;
constexpr int kCallsPerThread = 25;

class AmdSmiThreadsTest : public AmdSmiTest {
 protected:
  // Opens two GPUs of a library reporting `version` (the script merged with `extra`), then uses
  // them from kThreads threads at once (power, temperature, power limit writes); returns the
  // calls that overlapped.
  int overlaps(const nlohmann::json& version, nlohmann::json extra = nlohmann::json::object()) {
    extra["version"] = version;
    extra["entry_delay_us"] = 200;
    const auto provider = open(script_of({device("X"), device("Y")}, extra));
    const std::vector<std::shared_ptr<zeus::device::Gpu>> gpus = {provider->open_gpu(0),
                                                                  provider->open_gpu(1)};
    const int before = full_fake().state().at("overlapping_calls");
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&gpus, t] {
        zeus::device::Gpu& gpu = *gpus[static_cast<std::size_t>(t % 2)];
        for (int i = 0; i < kCallsPerThread; ++i) {
          (void)gpu.instant_power_mw();
          (void)gpu.temperature_c();
          if (i % 5 == 0) {
            gpu.set_power_limit_mw(300'000 + static_cast<std::uint32_t>(i) * 1000);
          }
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    return full_fake().state().at("overlapping_calls").get<int>() - before;
  }
};

TEST_F(AmdSmiThreadsTest, CallsBeforeRocm72AreSerialized) {
  EXPECT_EQ(overlaps({26, 1, 0}), 0);     // ROCm 7.1
  EXPECT_EQ(overlaps({26, 0, 2}), 0);     // ROCm 7.0.2
  EXPECT_EQ(overlaps({25, 5, 1}), 0);     // ROCm 6.4
  EXPECT_EQ(overlaps({24, 7, 1, 0}), 0);  // ROCm 6.3: the old version layout
}

TEST_F(AmdSmiThreadsTest, CallsFromRocm72OnAreNotSerialized) {
  // The fake sees overlapping calls here: the detector works, and zeus adds no lock.
  EXPECT_GT(overlaps({26, 2, 0}), 0);
  EXPECT_GT(overlaps({27, 0, 0}), 0);
}

TEST_F(AmdSmiThreadsTest, AnUnknownVersionIsSerialized) {
  // amdsmi_get_lib_version failing (AMDSMI_STATUS_API_FAILED): whatever the library is, it is
  // called one call at a time.
  EXPECT_EQ(overlaps({27, 0, 0}, status_override("amdsmi_get_lib_version", 8)), 0);
}

TEST(AmdSmiSerialization, TheVersionThreshold) {
  using zeus::device::amdsmi::needs_serialized_calls;
  EXPECT_TRUE(needs_serialized_calls(false, 24, 7));
  EXPECT_TRUE(needs_serialized_calls(true, 25, 9));
  EXPECT_TRUE(needs_serialized_calls(true, 26, 1));
  EXPECT_FALSE(needs_serialized_calls(true, 26, 2));
  EXPECT_FALSE(needs_serialized_calls(true, 26, 10));
  EXPECT_FALSE(needs_serialized_calls(true, 27, 0));
}

}  // namespace
