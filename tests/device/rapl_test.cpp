// Tests of the RAPL backend against fake powercap trees built in a temporary folder.
#include <grp.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rapl_test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using namespace zeus::testing::rapl;

// ---- Discovery ----

TEST_F(RaplTest, TwoPackagesWithNestedDram) {
  make_real_layout();
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  EXPECT_EQ(found.root, root_);
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(found.cpus[0]->index(), 0);
  EXPECT_EQ(found.cpus[0]->name(), "package-0");
  EXPECT_TRUE(found.cpus[0]->has_dram());
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 1000u);
  EXPECT_EQ(found.cpus[0]->dram_energy_uj(), 200u);  // the dram zone, not core (intel-rapl:0:0)
  EXPECT_EQ(found.cpus[1]->index(), 1);
  EXPECT_EQ(found.cpus[1]->name(), "package-1");
  EXPECT_TRUE(found.cpus[1]->has_dram());
  EXPECT_EQ(found.cpus[1]->package_energy_uj(), 3000u);
  EXPECT_EQ(found.cpus[1]->dram_energy_uj(), 500u);
  EXPECT_THAT(found.message, HasSubstr("package-0"));
}

TEST_F(RaplTest, TopLevelSubZonesAndPackageWithoutDram) {
  make_zone(root_ / "intel-rapl:0", "package-0", 10);
  make_zone(root_ / "intel-rapl:0:0", "core", 1);
  make_zone(root_ / "intel-rapl:0:1", "dram", 7);
  make_zone(root_ / "intel-rapl:1", "package-1", 20);
  make_zone(root_ / "intel-rapl:1:0", "core", 2);
  make_zone(root_ / "intel-rapl:1:1", "uncore", 3);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_TRUE(found.cpus[0]->has_dram());
  EXPECT_EQ(found.cpus[0]->dram_energy_uj(), 7u);
  EXPECT_FALSE(found.cpus[1]->has_dram());
  EXPECT_EQ(found.cpus[1]->package_energy_uj(), 20u);
}

TEST_F(RaplTest, ControlTypeFolderLayoutWithTopLevelSymlinksCountsEachZoneOnce) {
  const fs::path folder = root_ / "intel-rapl";
  make_zone(folder / "intel-rapl:0", "package-0", 11);
  make_zone(folder / "intel-rapl:0" / "intel-rapl:0:0", "dram", 5);
  make_zone(folder / "intel-rapl:1", "package-1", 22);
  fs::create_directory_symlink(folder / "intel-rapl:0", root_ / "intel-rapl:0");
  fs::create_directory_symlink(folder / "intel-rapl:1", root_ / "intel-rapl:1");
  fs::create_directory_symlink(folder / "intel-rapl:0" / "intel-rapl:0:0",
                               root_ / "intel-rapl:0:0");
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(found.cpus[0]->index(), 0);
  EXPECT_TRUE(found.cpus[0]->has_dram());
  EXPECT_EQ(found.cpus[0]->dram_energy_uj(), 5u);
  EXPECT_EQ(found.cpus[1]->index(), 1);
  EXPECT_FALSE(found.cpus[1]->has_dram());
}

TEST_F(RaplTest, ControlTypeFolderOnly) {
  const fs::path folder = root_ / "intel-rapl";
  make_zone(folder / "intel-rapl:0", "package-0", 11);
  make_zone(folder / "intel-rapl:0" / "intel-rapl:0:0", "dram", 5);
  make_zone(folder / "intel-rapl:1", "package-1", 22);
  make_zone(folder / "intel-rapl:1:0", "dram", 6);  // a sub-zone at the folder's top level
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 11u);
  EXPECT_EQ(found.cpus[0]->dram_energy_uj(), 5u);
  EXPECT_EQ(found.cpus[1]->package_energy_uj(), 22u);
  EXPECT_EQ(found.cpus[1]->dram_energy_uj(), 6u);
}

TEST_F(RaplTest, PsysAndOtherZonesAreSkipped) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  make_zone(root_ / "intel-rapl:1", "psys", 2);
  make_zone(root_ / "intel-rapl:2", "package-1", 3);
  make_zone(root_ / "intel-rapl-mmio:0", "package-0", 4);  // not a RAPL MSR zone
  make_zone(root_ / "intel-rapl:x", "package-9", 5);       // not a number
  write_file(root_ / "intel-rapl:3", "package-3");         // a file, not a zone folder
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_EQ(found.cpus[0]->index(), 0);
  EXPECT_EQ(found.cpus[0]->name(), "package-0");
  EXPECT_EQ(found.cpus[1]->index(), 2);
  EXPECT_EQ(found.cpus[1]->name(), "package-1");
}

TEST_F(RaplTest, PackagesAreSortedNumerically) {
  make_zone(root_ / "intel-rapl:10", "package-10", 100);
  make_zone(root_ / "intel-rapl:2", "package-2", 20);
  make_zone(root_ / "intel-rapl:1", "package-1", 10);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 3u);
  EXPECT_EQ(found.cpus[0]->index(), 1);
  EXPECT_EQ(found.cpus[1]->index(), 2);
  EXPECT_EQ(found.cpus[2]->index(), 10);
  EXPECT_EQ(found.cpus[2]->package_energy_uj(), 100u);
}

TEST_F(RaplTest, SubZoneOfAnotherPackageIsNotItsDram) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  make_zone(root_ / "intel-rapl:1", "package-1", 2);
  make_zone(root_ / "intel-rapl:1:0", "dram", 3);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 2u);
  EXPECT_FALSE(found.cpus[0]->has_dram());
  EXPECT_TRUE(found.cpus[1]->has_dram());
}

TEST_F(RaplTest, MissingRootIsNotAvailable) {
  const zeus::device::CpuDiscovery found =
      zeus::device::discover_rapl_cpus(base_ / "does-not-exist");
  EXPECT_FALSE(found.available);
  EXPECT_TRUE(found.cpus.empty());
  EXPECT_THAT(found.message, HasSubstr("RAPL is not available"));
  EXPECT_THAT(found.message, HasSubstr((base_ / "does-not-exist").string()));
  EXPECT_THAT(found.message, HasSubstr("intel_rapl"));
}

TEST_F(RaplTest, RootThatIsAFileIsNotAvailable) {
  write_file(base_ / "a-file", "x");
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(base_ / "a-file");
  EXPECT_FALSE(found.available);
  EXPECT_THAT(found.message, HasSubstr("RAPL is not available"));
}

TEST_F(RaplTest, EmptyRootIsNotAvailable) {
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  EXPECT_FALSE(found.available);
  EXPECT_TRUE(found.cpus.empty());
  EXPECT_THAT(found.message, HasSubstr("RAPL is not available"));
  EXPECT_THAT(found.message, HasSubstr("no powercap RAPL zones under " + root_.string()));
}

TEST_F(RaplTest, PsysOnlyIsNotAvailable) {
  make_zone(root_ / "intel-rapl:0", "psys", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  EXPECT_FALSE(found.available);
  EXPECT_THAT(found.message, HasSubstr("RAPL is not available"));
}

TEST_F(RaplTest, GarbageEnergyAtDiscoveryIsReportedNotThrown) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  write_file(root_ / "intel-rapl:0" / "energy_uj", "not-a-number");
  zeus::device::CpuDiscovery found;
  ASSERT_NO_THROW(found = zeus::device::discover_rapl_cpus(root_));
  EXPECT_FALSE(found.available);
  EXPECT_THAT(found.message, HasSubstr((root_ / "intel-rapl:0" / "energy_uj").string()));
}

TEST_F(RaplTest, GarbageMaxEnergyRangeSkipsTheZone) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  make_zone(root_ / "intel-rapl:1", "package-1", 1);
  write_file(root_ / "intel-rapl:1" / "max_energy_range_uj", "-5");
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_TRUE(found.available) << found.message;
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_EQ(found.cpus[0]->index(), 0);
  EXPECT_THAT(found.message, HasSubstr((root_ / "intel-rapl:1" / "max_energy_range_uj").string()));
}

TEST_F(RaplTest, ChoosePowercapRootFallsBackToTheContainerMount) {
  const fs::path host = base_ / "host";
  const fs::path container = base_ / "container";
  make_dir(host);
  make_zone(container / "intel-rapl:0", "package-0", 1);
  EXPECT_EQ(zeus::device::choose_powercap_root(host, container), container);
  EXPECT_EQ(zeus::device::choose_powercap_root(base_ / "missing", container), container);
  make_zone(host / "intel-rapl" / "intel-rapl:0", "package-0", 1);
  EXPECT_EQ(zeus::device::choose_powercap_root(host, container), host);
  EXPECT_EQ(zeus::device::choose_powercap_root(base_ / "missing", base_ / "missing-too"),
            base_ / "missing");
}

TEST(RaplDefaultRoot, NeverThrows) {
  fs::path root;
  ASSERT_NO_THROW(root = zeus::device::default_powercap_root());
  EXPECT_TRUE(root == "/sys/class/powercap" || root == "/zeus_sys/class/powercap") << root;
  ASSERT_NO_THROW(zeus::device::discover_rapl_cpus(root));
}

// ---- Reading ----

TEST_F(RaplTest, EveryCallReadsTheFile) {
  make_zone(root_ / "intel-rapl:0", "package-0", 100);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 100u);
  write_file(root_ / "intel-rapl:0" / "energy_uj", "250");
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 250u);
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 250u);
}

TEST_F(RaplTest, WraparoundKeepsTheCountMonotonic) {
  constexpr std::uint64_t kRangeUj = 1'000'000;
  make_zone(root_ / "intel-rapl:0", "package-0", kRangeUj - 100, kRangeUj);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  zeus::device::Cpu& cpu = *found.cpus[0];
  const std::uint64_t before_uj = cpu.package_energy_uj();
  write_file(root_ / "intel-rapl:0" / "energy_uj", "50");  // 100 up to the wrap, then 50
  const std::uint64_t after_uj = cpu.package_energy_uj();
  EXPECT_GT(after_uj, before_uj);
  EXPECT_EQ(after_uj - before_uj, 150u);
}

TEST_F(RaplTest, WraparoundWithTheTypicalRange) {
  make_zone(root_ / "intel-rapl:0", "package-0", kTypicalRangeUj - 1'000'000);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  const std::uint64_t before_uj = found.cpus[0]->package_energy_uj();
  write_file(root_ / "intel-rapl:0" / "energy_uj", "4000000");
  EXPECT_EQ(found.cpus[0]->package_energy_uj() - before_uj, 5'000'000u);
}

TEST_F(RaplTest, WrapBetweenDiscoveryAndFirstReadIsCounted) {
  constexpr std::uint64_t kRangeUj = 1000;
  make_zone(root_ / "intel-rapl:0", "package-0", 900, kRangeUj);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  write_file(root_ / "intel-rapl:0" / "energy_uj", "10");
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), kRangeUj + 10);
}

TEST_F(RaplTest, MultipleWrapsAcrossReads) {
  constexpr std::uint64_t kRangeUj = 1000;
  make_zone(root_ / "intel-rapl:0", "package-0", 0, kRangeUj);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  zeus::device::Cpu& cpu = *found.cpus[0];
  // Raw counter values seen by successive reads, and the true energy spent since the previous.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> steps = {
      {600, 600}, {950, 350}, {100, 150}, {700, 600}, {99, 399}, {999, 900}, {0, 1},
  };
  std::uint64_t expected_uj = cpu.package_energy_uj();
  EXPECT_EQ(expected_uj, 0u);
  for (const auto& [raw_uj, spent_uj] : steps) {
    write_file(root_ / "intel-rapl:0" / "energy_uj", std::to_string(raw_uj));
    const std::uint64_t previous_uj = expected_uj;
    expected_uj += spent_uj;
    const std::uint64_t read_uj = cpu.package_energy_uj();
    EXPECT_EQ(read_uj, expected_uj) << "raw " << raw_uj;
    EXPECT_GE(read_uj, previous_uj);
  }
  EXPECT_EQ(cpu.package_energy_uj(), 3 * kRangeUj);  // three wraps, raw 0
}

TEST_F(RaplTest, DramWrapsIndependently) {
  constexpr std::uint64_t kPackageRangeUj = 10'000;
  constexpr std::uint64_t kDramRangeUj = 2'000;
  make_zone(root_ / "intel-rapl:0", "package-0", 5'000, kPackageRangeUj);
  make_zone(root_ / "intel-rapl:0" / "intel-rapl:0:0", "dram", 1'900, kDramRangeUj);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  zeus::device::Cpu& cpu = *found.cpus[0];
  write_file(root_ / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj", "100");
  EXPECT_EQ(cpu.dram_energy_uj(), kDramRangeUj + 100);
  EXPECT_EQ(cpu.package_energy_uj(), 5'000u);
}

TEST_F(RaplTest, GarbageEnergyOnReadThrowsIoNamingTheFile) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  write_file(root_ / "intel-rapl:0" / "energy_uj", "12abc");
  std::string what;
  catch_kind_or_fail([&] { found.cpus[0]->package_energy_uj(); }, zeus::ErrorKind::kIo, what);
  EXPECT_THAT(what, HasSubstr((root_ / "intel-rapl:0" / "energy_uj").string()));
  // The counter is still usable once the file is sane again.
  write_file(root_ / "intel-rapl:0" / "energy_uj", "5");
  EXPECT_EQ(found.cpus[0]->package_energy_uj(), 5u);
}

// An energy_uj that is a folder cannot be read by anyone, root included.
TEST_F(RaplTest, EnergyFileThatIsAFolderThrowsIo) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  const fs::path energy = root_ / "intel-rapl:0" / "energy_uj";
  fs::remove(energy);
  make_dir(energy);
  std::string what;
  catch_kind_or_fail([&] { found.cpus[0]->package_energy_uj(); }, zeus::ErrorKind::kIo, what);
  EXPECT_THAT(what, HasSubstr(energy.string()));

  const zeus::device::CpuDiscovery again = zeus::device::discover_rapl_cpus(root_);
  EXPECT_FALSE(again.available);
  EXPECT_THAT(again.message, HasSubstr(energy.string()));
}

TEST_F(RaplTest, VanishedZoneThrowsNotFound) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  fs::remove_all(root_ / "intel-rapl:0");
  std::string what;
  catch_kind_or_fail([&] { found.cpus[0]->package_energy_uj(); }, zeus::ErrorKind::kNotFound, what);
}

TEST_F(RaplTest, DramOnPackageWithoutDramThrowsNotSupported) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  make_zone(root_ / "intel-rapl:0" / "intel-rapl:0:0", "core", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  EXPECT_FALSE(found.cpus[0]->has_dram());
  std::string what;
  catch_kind_or_fail([&] { found.cpus[0]->dram_energy_uj(); }, zeus::ErrorKind::kNotSupported,
                     what);
  EXPECT_THAT(what, HasSubstr("DRAM"));
}

TEST_F(RaplTest, ConcurrentReadersNeverSeeAFalseWrap) {
  constexpr std::uint64_t kFinalUj = 2'000;
  make_zone(root_ / "intel-rapl:0", "package-0", 0, 1'000'000);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  std::shared_ptr<zeus::device::Cpu> cpu = found.cpus[0];
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      std::uint64_t last_uj = 0;
      while (!done.load()) {
        try {
          const std::uint64_t now_uj = cpu->package_energy_uj();
          if (now_uj < last_uj || now_uj > kFinalUj) {
            ++failures;
          }
          last_uj = now_uj;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (std::uint64_t raw_uj = 1; raw_uj <= kFinalUj; ++raw_uj) {
    replace_file(root_ / "intel-rapl:0" / "energy_uj", std::to_string(raw_uj));
  }
  done = true;
  for (std::thread& reader : readers) {
    reader.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cpu->package_energy_uj(), kFinalUj);  // no wrap was counted
}

}  // namespace

// Python and other callers tell CPU errors from GPU errors by Error::subject().
TEST_F(RaplTest, ReadErrorsAreAboutACpu) {
  make_zone(root_ / "intel-rapl:0", "package-0", 1);
  const zeus::device::CpuDiscovery found = zeus::device::discover_rapl_cpus(root_);
  ASSERT_EQ(found.cpus.size(), 1u);
  try {
    found.cpus[0]->dram_energy_uj();
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kCpu);
  }
  fs::remove_all(root_ / "intel-rapl:0");
  try {
    found.cpus[0]->package_energy_uj();
    FAIL() << "no error";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_EQ(error.subject(), zeus::ErrorSubject::kCpu);
  }
}
