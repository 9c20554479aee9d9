// The RAPL wraparound tracker and the zone counter under it, on fake powercap trees: the read
// period derived from the range and the maximum power, counters that wrap several times inside
// one window, resets, absurd ranges, clock jumps, and the thread's life (reference counted, woken
// on stop). ManualClocks make every period instant.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/rapl_test_support.hpp"
#include "device/rapl_zone.hpp"
#include "support/wait_until.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/rapl_tracker.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using zeus::device::RaplTracker;
using zeus::device::RaplTrackerOptions;
using zeus::device::RaplZone;
using namespace zeus::testing::rapl;

constexpr std::int64_t kSecondNs = 1'000'000'000;

class RaplTrackerTest : public TrackedRaplTest {
 protected:
  // A zone stating `max_power_uw` in constraint_0 (nothing when 0).
  fs::path powered_zone(const std::string& folder, const std::string& name, std::uint64_t energy_uj,
                        std::uint64_t range_uj, std::uint64_t max_power_uw) {
    const fs::path dir = make_zone(root_ / folder, name, energy_uj, range_uj);
    if (max_power_uw != 0) {
      write_file(dir / "constraint_0_max_power_uw", std::to_string(max_power_uw));
    }
    return dir;
  }

  std::shared_ptr<RaplTracker> manual_tracker(bool start_thread) {
    RaplTrackerOptions options;
    options.clock = clock_;
    options.start_thread = start_thread;
    return std::make_shared<RaplTracker>(options);
  }
};

// ---- The period, from the range and the stated maximum power ----

TEST_F(RaplTrackerTest, ReadPeriodIsAQuarterOfTheWrapAtTheLargestStatedPower) {
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, kKilojouleUj, 50'000'000);
  write_file(dir / "constraint_1_max_power_uw", "100000000");  // 100 W: the largest
  write_file(dir / "constraint_2_max_power_uw", "0");          // not stated
  const RaplZone zone(dir, clock_);
  EXPECT_TRUE(zone.max_power_stated());
  EXPECT_DOUBLE_EQ(zone.max_power_w(), 100.0);
  EXPECT_EQ(zone.wrap_period_ns(), 10 * kSecondNs);  // 1 kJ at 100 W
  EXPECT_EQ(zone.read_period_ns(), 2'500'000'000);
  EXPECT_TRUE(zone.trackable());
}

TEST_F(RaplTrackerTest, TypicalPackageIsReadEverySixtySeconds) {
  const RaplZone zone(powered_zone("intel-rapl:0", "package-0", 0, kTypicalRangeUj, 250'000'000),
                      clock_);
  EXPECT_NEAR(static_cast<double>(zone.wrap_period_ns()) / kSecondNs, 1048.57, 0.01);
  EXPECT_EQ(zone.read_period_ns(), zeus::device::kRaplMaxReadPeriodNs);
}

TEST_F(RaplTrackerTest, NoCredibleStatedPowerMeansTheDocumentedWorstCase) {
  constexpr std::uint64_t kAmdRangeUj = 65'532'610'987;
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, kAmdRangeUj, 0);
  write_file(dir / "constraint_0_max_power_uw", "0");
  write_file(dir / "constraint_1_max_power_uw", "garbage");
  write_file(dir / "constraint_2_max_power_uw", "1000000000000000");  // 1 GW: not a CPU zone
  write_file(dir / "constraint_3_max_power_uw", "10");                // 10 µW: neither
  const RaplZone zone(dir, clock_);
  EXPECT_FALSE(zone.max_power_stated());
  EXPECT_DOUBLE_EQ(zone.max_power_w(), zeus::device::kRaplUnknownMaxPowerW);
  EXPECT_EQ(zone.wrap_period_ns(), 65'532'610'987);  // 65.5 kJ at 1 kW
  EXPECT_EQ(zone.read_period_ns(), 65'532'610'987 / 4);
}

// ---- Absurd ranges ----

TEST_F(RaplTrackerTest, ZeroRangeIsAClearErrorAndTheZoneIsSkipped) {
  powered_zone("intel-rapl:0", "package-0", 0, 0, 100'000'000);
  make_zone(root_ / "intel-rapl:1", "package-1", 5);
  std::string what;
  catch_kind_or_fail([&] { RaplZone(root_ / "intel-rapl:0", clock_); }, zeus::ErrorKind::kIo, what);
  EXPECT_THAT(what, HasSubstr("max_energy_range_uj is 0"));
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_EQ(found.cpus[0]->index(), 1);
  EXPECT_THAT(found.message, HasSubstr("max_energy_range_uj is 0"));
}

TEST_F(RaplTrackerTest, RangeNoRaplCounterCanHaveIsAClearError) {
  powered_zone("intel-rapl:0", "package-0", 0, 18'446'744'073'709'551'615u, 100'000'000);
  std::string what;
  catch_kind_or_fail([&] { RaplZone(root_ / "intel-rapl:0", clock_); }, zeus::ErrorKind::kIo, what);
  EXPECT_THAT(what, HasSubstr("more than any 32-bit RAPL counter can hold"));
  // The largest possible range is accepted, and read no less often than the cap.
  powered_zone("intel-rapl:1", "package-1", 0, zeus::device::kRaplMaxCredibleRangeUj, 100'000'000);
  const RaplZone largest(root_ / "intel-rapl:1", clock_);
  EXPECT_EQ(largest.read_period_ns(), zeus::device::kRaplMaxReadPeriodNs);
}

TEST_F(RaplTrackerTest, TinyRangeIsReadAtTheFloorAndItsGapsAreCounted) {
  // 1 mJ at 100 W wraps every 10 µs: no tracker can follow it, and none reads every nanosecond.
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, 1000, 100'000'000);
  RaplZone zone(dir, clock_);
  EXPECT_EQ(zone.wrap_period_ns(), 10'000);
  EXPECT_EQ(zone.read_period_ns(), zeus::device::kRaplMinReadPeriodNs);
  EXPECT_FALSE(zone.trackable());
  clock_->advance_ns(zeus::device::kRaplMinReadPeriodNs);
  set_energy(dir, 400);
  EXPECT_EQ(zone.read_energy_uj(), 400u);
  EXPECT_EQ(zone.health().gaps, 1u);  // said, not hidden
}

// ---- Decreases: wraps and resets ----

TEST_F(RaplTrackerTest, DecreaseThatFitsTheElapsedTimeIsAWrap) {
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", kTypicalRangeUj - 10'000'000,
                                    kTypicalRangeUj, 100'000'000);
  RaplZone zone(dir, clock_);
  const std::uint64_t before_uj = zone.read_energy_uj();
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 20'000'000);  // 30 J in 1 s
  EXPECT_EQ(zone.read_energy_uj() - before_uj, 30'000'000u);
  EXPECT_EQ(zone.health().wraps, 1u);
  EXPECT_EQ(zone.health().resets, 0u);
}

TEST_F(RaplTrackerTest, CounterThatGoesBackwardsWithoutWrappingIsAResetNotAWholeRange) {
  const fs::path dir =
      powered_zone("intel-rapl:0", "package-0", 200 * kKilojouleUj, kTypicalRangeUj, 100'000'000);
  RaplZone zone(dir, clock_);
  const std::uint64_t start_uj = zone.read_energy_uj();
  // Back to 50 J one second later: as a wrap that would be 62 kJ in 1 s. The counter restarted,
  // and the 50 J it holds were drawn since.
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 50'000'000);
  EXPECT_EQ(zone.read_energy_uj() - start_uj, 50'000'000u);
  EXPECT_EQ(zone.health().resets, 1u);
  EXPECT_EQ(zone.health().wraps, 0u);
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 5 * kKilojouleUj);  // up: counted as read
  EXPECT_EQ(zone.read_energy_uj() - start_uj, 5 * kKilojouleUj);
  // Down by 1 kJ: no wrap, and no restart could have drawn the 4 kJ it holds in 1 s either.
  // Nothing is counted for the interval; counting goes on from the new value.
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 4 * kKilojouleUj);
  EXPECT_EQ(zone.read_energy_uj() - start_uj, 5 * kKilojouleUj);
  EXPECT_EQ(zone.health().resets, 2u);
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 4 * kKilojouleUj + 7'000'000);
  EXPECT_EQ(zone.read_energy_uj() - start_uj, 5 * kKilojouleUj + 7'000'000);
  EXPECT_EQ(zone.health().wraps, 0u);
  EXPECT_EQ(zone.health().gaps, 0u);
}

TEST_F(RaplTrackerTest, RawValueBeyondTheRangeThenLowerIsAReset) {
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 5000, 1000, 0);
  RaplZone zone(dir, clock_);
  clock_->advance_ns(kSecondNs);
  set_energy(dir, 10);
  EXPECT_EQ(zone.read_energy_uj(), 5010u);  // no underflow: a restart to 10
  EXPECT_EQ(zone.health().resets, 1u);
}

// ---- Clock jumps ----

TEST_F(RaplTrackerTest, ClockJumpPastSeveralWrapsIsCountedAsAGap) {
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, kKilojouleUj, 100'000'000);
  RaplZone zone(dir, clock_);
  clock_->advance_ns(9 * kSecondNs);  // less than one wrap (10 s): no gap
  set_energy(dir, 900 * 1'000'000);
  EXPECT_EQ(zone.read_energy_uj(), 900'000'000u);
  EXPECT_EQ(zone.health().gaps, 0u);
  clock_->advance_ns(35 * kSecondNs);  // 3.5 wraps: whole ranges may have gone unseen
  set_energy(dir, 950 * 1'000'000);
  EXPECT_EQ(zone.read_energy_uj(), 950'000'000u);
  EXPECT_EQ(zone.health().gaps, 1u);
  clock_->advance_ns(100 * kSecondNs);
  zone.read_energy_uj();
  EXPECT_EQ(zone.health().gaps, 2u);  // each one counted (the warning is given once)
}

TEST_F(RaplTrackerTest, TheReadThatStartsTrackingReportsNoGap) {
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, kKilojouleUj, 100'000'000);
  const auto tracker = manual_tracker(false);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  clock_->advance_ns(3600 * kSecondNs);  // discovered an hour before anyone measured
  const std::shared_ptr<void> tracking = found.cpus[0]->track_wraparound();
  EXPECT_EQ(found.cpus[0]->counter_health().gaps, 0u);
  clock_->advance_ns(36 * kSecondNs);  // the thread was held up past 3 wraps
  tracker->sweep();
  EXPECT_EQ(found.cpus[0]->counter_health().gaps, 1u);
}

// ---- Tracking: the figure is exact however often the counter wraps ----

TEST_F(RaplTrackerTest, CounterWrappingManyTimesInsideOneWindowIsExact) {
  WrappingRig rig(root_);
  const std::vector<std::shared_ptr<zeus::device::Cpu>> cpus = discover();
  ASSERT_EQ(cpus.size(), 1u);
  zeus::device::Cpu& cpu = *cpus[0];
  const std::shared_ptr<void> tracking = cpu.track_wraparound();
  EXPECT_EQ(tracker_->tracked_zones(), 2u);
  EXPECT_EQ(tracker_->period_ns(), kSecondNs);  // the DRAM zone's: 4 s / 4
  const std::uint64_t package_begin_uj = cpu.package_energy_uj();
  const std::uint64_t dram_begin_uj = cpu.dram_energy_uj();
  run(rig, 95);  // a sweep a second
  // 95 s: 9.5 kJ (9 wraps of the package counter) and 2375 J (23 wraps of the DRAM one).
  EXPECT_EQ(cpu.package_energy_uj() - package_begin_uj, 9'500'000'000u);
  EXPECT_EQ(cpu.dram_energy_uj() - dram_begin_uj, 2'375'000'000u);
  const zeus::device::CounterHealth health = cpu.counter_health();
  EXPECT_EQ(health.wraps, 9u + 23u);
  EXPECT_EQ(health.resets, 0u);
  EXPECT_EQ(health.gaps, 0u);
}

// What the tracker prevents: read only at both ends, the window loses whole ranges, and says so.
TEST_F(RaplTrackerTest, UntrackedWindowLosesRangesButSaysSo) {
  WrappingRig rig(root_);
  const zeus::device::CpuDiscovery found =
      zeus::device::discover_rapl_cpus(root_, manual_tracker(false));
  ASSERT_EQ(found.cpus.size(), 1u);
  zeus::device::Cpu& cpu = *found.cpus[0];
  const std::uint64_t begin_uj = cpu.package_energy_uj();
  for (int second = 0; second < 95; ++second) {
    rig.run_one_second();
  }
  clock_->advance_ns(95 * kSecondNs);
  EXPECT_EQ(cpu.package_energy_uj() - begin_uj, 500'000'000u);  // 9 kJ of 9.5 kJ lost
  EXPECT_EQ(cpu.counter_health().gaps, 1u);
}

TEST_F(RaplTrackerTest, ThreadReadsOnTheInjectedClockAndStopsWithTheLastHandle) {
  WrappingRig rig(root_);
  const auto tracker = manual_tracker(true);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  zeus::device::Cpu& cpu = *found.cpus[0];
  EXPECT_FALSE(tracker->running());  // nobody measures: no thread
  std::shared_ptr<void> tracking = cpu.track_wraparound();
  EXPECT_TRUE(tracker->running());
  const std::uint64_t begin_uj = cpu.package_energy_uj();
  for (int second = 0; second < 25; ++second) {
    rig.run_one_second();
    const std::uint64_t sweeps = tracker->sweeps();
    clock_->advance_ns(kSecondNs);
    tracker->wake();
    ASSERT_TRUE(zeus::testing::wait_until([&] { return tracker->sweeps() > sweeps; }))
        << "second " << second;
  }
  EXPECT_EQ(cpu.package_energy_uj() - begin_uj, 2'500'000'000u);  // 2.5 kJ: 2 wraps
  EXPECT_EQ(cpu.counter_health().gaps, 0u);
  tracking.reset();
  EXPECT_FALSE(tracker->running());
  EXPECT_EQ(tracker->tracked_zones(), 0u);
  EXPECT_EQ(tracker->period_ns(), 0);
}

TEST_F(RaplTrackerTest, ZoneThatVanishesWhileTrackedNeitherStopsTheSweepsNorHidesTheError) {
  make_real_layout();
  const std::vector<std::shared_ptr<zeus::device::Cpu>> cpus = discover();
  ASSERT_EQ(cpus.size(), 2u);
  const std::shared_ptr<void> tracking = zeus::device::track_wraparound(cpus);
  fs::remove_all(root_ / "intel-rapl:1");  // e.g. the driver was unloaded
  set_energy(root_ / "intel-rapl:0", 5000);
  clock_->advance_ns(tracker_->period_ns());
  EXPECT_NO_THROW(tracker_->sweep());
  EXPECT_NO_THROW(tracker_->sweep());  // warned once, then quiet
  EXPECT_EQ(tracker_->sweeps(), 2u);
  EXPECT_EQ(cpus[0]->package_energy_uj(), 5000u);  // the other zones are still read
  std::string what;
  catch_kind_or_fail([&] { cpus[1]->package_energy_uj(); }, zeus::ErrorKind::kNotFound, what);
}

TEST_F(RaplTrackerTest, HandlesAreReferenceCounted) {
  make_real_layout();
  const auto tracker = manual_tracker(true);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 2u);
  std::shared_ptr<void> first = found.cpus[0]->track_wraparound();  // package 0 and its DRAM
  std::shared_ptr<void> all = zeus::device::track_wraparound(found.cpus);
  EXPECT_EQ(tracker->tracked_zones(), 4u);  // each zone once
  first.reset();
  EXPECT_TRUE(tracker->running());
  EXPECT_EQ(tracker->tracked_zones(), 4u);
  all.reset();
  EXPECT_FALSE(tracker->running());
  EXPECT_EQ(tracker->tracked_zones(), 0u);
  // And again.
  first = found.cpus[1]->track_wraparound();
  EXPECT_TRUE(tracker->running());
  EXPECT_EQ(tracker->tracked_zones(), 2u);
}

TEST_F(RaplTrackerTest, StopWakesAThreadThatWouldSleepAMinute) {
  powered_zone("intel-rapl:0", "package-0", 0, kTypicalRangeUj, 250'000'000);
  const auto tracker = std::make_shared<RaplTracker>();  // the steady clock
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  std::shared_ptr<void> tracking = found.cpus[0]->track_wraparound();
  EXPECT_EQ(tracker->period_ns(), zeus::device::kRaplMaxReadPeriodNs);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  tracking.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(tracker->running());
}

TEST_F(RaplTrackerTest, ForegroundAndBackgroundReadsNeverSeeAFalseWrap) {
  // 1 J at 10 W: read every 25 ms by the thread, on the steady clock.
  const fs::path dir = powered_zone("intel-rapl:0", "package-0", 0, 1'000'000, 10'000'000);
  const auto tracker = std::make_shared<RaplTracker>();
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_, tracker);
  ASSERT_EQ(found.cpus.size(), 1u);
  const std::shared_ptr<zeus::device::Cpu> cpu = found.cpus[0];
  const std::shared_ptr<void> tracking = cpu->track_wraparound();
  EXPECT_EQ(tracker->period_ns(), 25'000'000);
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::thread reader([&] {
    std::uint64_t last_uj = 0;
    while (!done.load()) {
      const std::uint64_t now_uj = cpu->package_energy_uj();
      if (now_uj < last_uj || now_uj > 400'000) {
        ++failures;
      }
      last_uj = now_uj;
    }
  });
  for (std::uint64_t raw_uj = 1; raw_uj <= 400'000; raw_uj += 1000) {
    set_energy(dir, raw_uj);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  set_energy(dir, 400'000);
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cpu->package_energy_uj(), 400'000u);
  EXPECT_EQ(cpu->counter_health().wraps, 0u);
  EXPECT_EQ(cpu->counter_health().resets, 0u);
}

TEST_F(RaplTrackerTest, DiscoveryUsesTheProcessTrackerByDefault) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  const std::shared_ptr<RaplTracker> process = RaplTracker::process();
  const std::size_t before = process->tracked_zones();
  std::shared_ptr<void> tracking = found.cpus[0]->track_wraparound();
  EXPECT_EQ(process->tracked_zones(), before + 1);
  EXPECT_TRUE(process->running());
  tracking.reset();
  EXPECT_EQ(process->tracked_zones(), before);
}

}  // namespace
