// The RAPL tests' fixture (rapl_test.cpp, rapl_permission_test.cpp): a fake powercap tree in a
// temporary folder, one zone at a time.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"
#include "zeus/device/rapl_tracker.hpp"

namespace zeus::testing::rapl {

// A typical max_energy_range_uj of an Intel package zone.
inline constexpr std::uint64_t kTypicalRangeUj = 262'143'328'850;

inline void write_file(const std::filesystem::path& path, const std::string& content) {
  {
    std::ofstream out(path, std::ios::trunc);
    ASSERT_TRUE(out) << "cannot create " << path;
    out << content << '\n';
  }
  std::filesystem::permissions(path, std::filesystem::perms(0644));
}

// Replaces the file atomically (write + rename), so that concurrent readers never see it empty.
inline void replace_file(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path temporary = path.string() + ".new";
  write_file(temporary, content);
  std::filesystem::rename(temporary, path);
}

inline void make_dir(const std::filesystem::path& path) {
  std::filesystem::create_directories(path);
  std::filesystem::permissions(path, std::filesystem::perms(0755));
}

// One zone folder with name, energy_uj and max_energy_range_uj.
inline std::filesystem::path make_zone(const std::filesystem::path& dir, const std::string& name,
                                       std::uint64_t energy_uj,
                                       std::uint64_t max_energy_range_uj = kTypicalRangeUj) {
  make_dir(dir);
  write_file(dir / "name", name);
  write_file(dir / "energy_uj", std::to_string(energy_uj));
  write_file(dir / "max_energy_range_uj", std::to_string(max_energy_range_uj));
  return dir;
}

inline constexpr std::uint64_t kKilojouleUj = 1'000'000'000;

// Sets a zone's energy_uj (atomically: a reader in another thread never sees it half written).
inline void set_energy(const std::filesystem::path& zone_dir, std::uint64_t raw_uj) {
  replace_file(zone_dir / "energy_uj", std::to_string(raw_uj));
}

// Drives a package zone (1 kJ at 100 W: wraps every 10 s) and its DRAM zone (100 J at 25 W:
// every 4 s) at their maximum power.
class WrappingRig {
 public:
  explicit WrappingRig(const std::filesystem::path& root)
      : package_(make_zone(root / "intel-rapl:0", "package-0", 0, kKilojouleUj)),
        dram_(make_zone(root / "intel-rapl:0" / "intel-rapl:0:0", "dram", 0, kKilojouleUj / 10)) {
    write_file(package_ / "constraint_0_max_power_uw", "100000000");
    write_file(dram_ / "constraint_0_max_power_uw", "25000000");
  }
  void run_one_second() {
    package_uj_ += 100'000'000;
    dram_uj_ += 25'000'000;
    set_energy(package_, package_uj_ % kKilojouleUj);
    set_energy(dram_, dram_uj_ % (kKilojouleUj / 10));
  }

 private:
  std::filesystem::path package_;
  std::filesystem::path dram_;
  std::uint64_t package_uj_ = 0;
  std::uint64_t dram_uj_ = 0;
};

// Runs `action`, expects a zeus::Error of kind `expected` and stores its text in `what`.
inline void catch_kind_or_fail(const std::function<void()>& action, zeus::ErrorKind expected,
                               std::string& what) {
  try {
    action();
  } catch (const zeus::Error& error) {
    what = error.what();
    EXPECT_EQ(error.kind(), expected) << error.what();
    return;
  }
  ADD_FAILURE() << "no zeus::Error thrown";
}

class RaplTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    base_ = std::filesystem::temp_directory_path() /
            ("zeus-rapl-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
             "-" + info->name());
    std::filesystem::remove_all(base_);
    root_ = base_ / "powercap";
    make_dir(root_);
    std::filesystem::permissions(base_, std::filesystem::perms(0755));
  }

  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }

  // Two packages; package 0 has core + dram nested, package 1 only dram nested. Top-level
  // symlinks to every zone, as /sys/class/powercap has.
  void make_real_layout() {
    make_zone(root_ / "intel-rapl:0", "package-0", 1000);
    make_zone(root_ / "intel-rapl:0" / "intel-rapl:0:0", "core", 400);
    make_zone(root_ / "intel-rapl:0" / "intel-rapl:0:1", "dram", 200);
    make_zone(root_ / "intel-rapl:1", "package-1", 3000);
    make_zone(root_ / "intel-rapl:1" / "intel-rapl:1:0", "dram", 500);
    std::filesystem::create_directory_symlink(root_ / "intel-rapl:0" / "intel-rapl:0:0",
                                              root_ / "intel-rapl:0:0");
    std::filesystem::create_directory_symlink(root_ / "intel-rapl:0" / "intel-rapl:0:1",
                                              root_ / "intel-rapl:0:1");
    std::filesystem::create_directory_symlink(root_ / "intel-rapl:1" / "intel-rapl:1:0",
                                              root_ / "intel-rapl:1:0");
  }

  std::filesystem::path base_;
  std::filesystem::path root_;
};

// A fake tree whose zones are tracked by a tracker of the fixture's own, on a ManualClock and
// swept by hand (no thread): what a measurement over a WrappingRig needs.
class TrackedRaplTest : public RaplTest {
 protected:
  // The CPUs under root_, timed and tracked by tracker_.
  std::vector<std::shared_ptr<zeus::device::Cpu>> discover() {
    return zeus::device::discover_rapl_cpus(root_, tracker_).cpus;
  }
  // `seconds` of the rig's load, with one sweep a second (what the tracker's thread does then).
  void run(WrappingRig& rig, int seconds) {
    for (int second = 0; second < seconds; ++second) {
      rig.run_one_second();
      clock_->advance_s(1.0);
      tracker_->sweep();
    }
  }

  std::shared_ptr<zeus::ManualClock> clock_ = std::make_shared<zeus::ManualClock>();
  std::shared_ptr<zeus::device::RaplTracker> tracker_ = std::make_shared<zeus::device::RaplTracker>(
      zeus::device::RaplTrackerOptions{clock_, /*start_thread=*/false});
};

}  // namespace zeus::testing::rapl
