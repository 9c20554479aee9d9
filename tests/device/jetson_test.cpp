// The Jetson SoC's power rails against fake sysfs trees modelled on the boards' layouts.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "support/temp_dir.hpp"
#include "support/temp_jetson_tree.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/jetson.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using zeus::device::classify_rail;
using zeus::device::discover_jetson;
using zeus::device::RailKind;
using zeus::device::RailLayout;
using zeus::device::SocDiscovery;

using JetsonTree = zeus::testing::TempJetsonTree;

TEST(JetsonRails, ClassifiesTheBoardsRailNames) {
  // Orin (AGX, NX), Orin Nano, Xavier, Nano/TX2.
  EXPECT_EQ(classify_rail("VDD_GPU_SOC"), RailKind::kGpu);
  EXPECT_EQ(classify_rail("VDD_CPU_CV"), RailKind::kCpu);
  EXPECT_EQ(classify_rail("VIN_SYS_5V0"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("VDD_IN"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("VDD_CPU_GPU_CV"), RailKind::kOther);
  EXPECT_EQ(classify_rail("VDD_SOC"), RailKind::kSoc);
  EXPECT_EQ(classify_rail("GPU"), RailKind::kGpu);
  EXPECT_EQ(classify_rail("CPU"), RailKind::kCpu);
  EXPECT_EQ(classify_rail("SOC"), RailKind::kSoc);
  EXPECT_EQ(classify_rail("CV"), RailKind::kSoc);
  EXPECT_EQ(classify_rail("VDDRQ"), RailKind::kOther);
  EXPECT_EQ(classify_rail("SYS5V"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("POM_5V_IN"), RailKind::kTotal);
  EXPECT_EQ(classify_rail("POM_5V_GPU"), RailKind::kGpu);
  EXPECT_EQ(classify_rail("pom_5v_cpu"), RailKind::kCpu);
  EXPECT_EQ(classify_rail("VDD_INT"), RailKind::kOther);  // a token, not a prefix
}

TEST(JetsonRails, OrinHwmonWithoutPowerFilesMultipliesVoltageAndCurrent) {
  JetsonTree tree;
  tree.add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"}, 5000, 400);
  tree.add_hwmon("1-0041", {"NC", "VDDQ_VDD2_1V8AO"}, 1800, 100);
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  EXPECT_TRUE(found.is_jetson);
  EXPECT_EQ(found.soc->model(), "NVIDIA Jetson AGX Orin Developer Kit");
  ASSERT_EQ(found.soc->rails().size(), 4u);
  EXPECT_EQ(found.soc->rails()[0].name, "VDD_GPU_SOC");
  EXPECT_EQ(found.soc->rails()[0].layout, RailLayout::kHwmon);
  EXPECT_TRUE(found.soc->rails()[0].power_file.empty());
  EXPECT_DOUBLE_EQ(found.soc->rail_power_mw(0), 2000.0);     // 5 V x 0.4 A
  EXPECT_EQ(found.soc->rails()[3].name, "VDDQ_VDD2_1V8AO");  // "NC" is not connected
  EXPECT_DOUBLE_EQ(found.soc->rail_power_mw(3), 180.0);
  EXPECT_EQ(found.soc->rails_of(RailKind::kTotal), std::vector<std::size_t>{2});
  EXPECT_THAT(found.message, HasSubstr("VDD_CPU_CV (cpu)"));
}

TEST(JetsonRails, HwmonPowerFilesAreReadDirectlyInMicrowatts) {
  JetsonTree tree;
  const fs::path hwmon = tree.add_hwmon("1-0040", {"VDD_GPU_SOC"}, 5000, 400, true);
  tree.write(hwmon.lexically_relative(tree.root()) / "power1_input", "2500000\n");
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  EXPECT_FALSE(found.soc->rails()[0].power_file.empty());
  EXPECT_DOUBLE_EQ(found.soc->rail_power_mw(0), 2500.0);  // not 5 V x 0.4 A
}

TEST(JetsonRails, NanoIna3221xReadsPowerInMilliwatts) {
  JetsonTree tree("NVIDIA Jetson Nano Developer Kit");
  tree.add_ina3221x("6-0040", {"POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"}, 1234);
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  ASSERT_EQ(found.soc->rails().size(), 3u);
  EXPECT_EQ(found.soc->rails()[0].layout, RailLayout::kIna3221x);
  EXPECT_EQ(found.soc->rails()[0].kind, RailKind::kTotal);
  EXPECT_EQ(found.soc->rails()[1].kind, RailKind::kGpu);
  EXPECT_EQ(found.soc->rails()[2].kind, RailKind::kCpu);
  EXPECT_DOUBLE_EQ(found.soc->rail_power_mw(2), 1234.0);
}

TEST(JetsonRails, NegativeCurrentReadsAsZero) {
  JetsonTree tree;
  tree.add_hwmon("1-0040", {"VDD_GPU_SOC"}, 5000, -3);
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  EXPECT_DOUBLE_EQ(found.soc->rail_power_mw(0), 0.0);
}

TEST(JetsonRails, NotAJetsonWithoutTheMarkers) {
  zeus::testing::TempDir empty("zeus-not-jetson");
  const SocDiscovery found = discover_jetson(empty.path());
  EXPECT_FALSE(found.soc);
  EXPECT_FALSE(found.is_jetson);
  EXPECT_THAT(found.message, HasSubstr("not a Jetson"));
}

#if !defined(__aarch64__)
TEST(JetsonRails, TheRealRootOfAnX86MachineIsNoJetson) {
  const SocDiscovery found = discover_jetson("/");
  EXPECT_FALSE(found.soc);
  EXPECT_FALSE(found.is_jetson);
}
#endif

TEST(JetsonRails, ABoardWithoutPowerFilesHasNoSocAndSaysWhy) {
  JetsonTree tree;
  tree.write("sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_label", "VDD_GPU_SOC\n");
  const SocDiscovery found = discover_jetson(tree.root());
  EXPECT_TRUE(found.is_jetson);
  EXPECT_FALSE(found.soc);
  EXPECT_THAT(found.message, HasSubstr("no readable INA3221 power rail"));
  EXPECT_THAT(found.message, HasSubstr("VDD_GPU_SOC: no power file"));
}

TEST(JetsonRails, AValueThatIsNoNumberLeavesTheRailOutNamingTheFile) {
  JetsonTree tree;
  const fs::path hwmon = tree.add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV"}, 5000, 400);
  tree.write(hwmon.lexically_relative(tree.root()) / "curr2_input", "n/a\n");
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  ASSERT_EQ(found.soc->rails().size(), 1u);
  EXPECT_THAT(found.message, HasSubstr((hwmon / "curr2_input").string()));
  // A long value is quoted in part only.
  tree.write(hwmon.lexically_relative(tree.root()) / "curr1_input", std::string(4096, 'x'));
  const SocDiscovery long_value = discover_jetson(tree.root());
  EXPECT_FALSE(long_value.soc);
  EXPECT_THAT(long_value.message, HasSubstr(std::string(32, 'x') + "..."));
  EXPECT_EQ(long_value.message.find(std::string(33, 'x')), std::string::npos);
  // Once running, the same is an error naming the file.
  tree.write(hwmon.lexically_relative(tree.root()) / "curr1_input", "12.5\n");
  try {
    (void)found.soc->rail_power_mw(0);
    FAIL() << "a value that is not an integer was read";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kIo);
    EXPECT_THAT(error.what(), HasSubstr((hwmon / "curr1_input").string()));
  }
}

TEST(JetsonRails, ARailThatDisappearsIsAnErrorNamingTheFile) {
  JetsonTree tree;
  const fs::path hwmon = tree.add_hwmon("1-0040", {"VDD_GPU_SOC"}, 5000, 400);
  const SocDiscovery found = discover_jetson(tree.root());
  ASSERT_TRUE(found.soc) << found.message;
  fs::remove_all(hwmon);
  try {
    (void)found.soc->rail_power_mw(0);
    FAIL() << "a rail whose files are gone was read";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kNotFound);
    EXPECT_THAT(error.what(), HasSubstr("in1_input"));
  }
  EXPECT_THROW((void)found.soc->rail_power_mw(1), zeus::Error);  // out of range
}

TEST(JetsonRails, AFifoWhereAFileShouldBeDoesNotHang) {
  JetsonTree tree;
  const fs::path hwmon = tree.add_hwmon("1-0040", {"VDD_GPU_SOC", "VDD_CPU_CV"}, 5000, 400);
  const SocDiscovery before = discover_jetson(tree.root());
  ASSERT_TRUE(before.soc) << before.message;
  fs::remove(hwmon / "in1_input");
  ASSERT_EQ(::mkfifo((hwmon / "in1_input").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW((void)before.soc->rail_power_mw(0), zeus::Error);  // no writer: would block
  const SocDiscovery after = discover_jetson(tree.root());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(after.soc) << after.message;
  EXPECT_EQ(after.soc->rails().size(), 1u);
  EXPECT_THAT(after.message, HasSubstr("in1_input"));
}

TEST(JetsonRails, DiscoverSocReadsTheRootFromTheEnvironment) {
  JetsonTree tree;
  tree.add_hwmon("1-0040", {"VDD_GPU_SOC"}, 5000, 400);
  const std::string root = tree.root().string();
  const SocDiscovery found =
      zeus::device::discover_soc([&](const std::string& name) -> std::optional<std::string> {
        return name == "ZEUS_JETSON_ROOT" ? std::optional<std::string>(root) : std::nullopt;
      });
  ASSERT_TRUE(found.soc) << found.message;
  EXPECT_EQ(found.root, tree.root());
}

}  // namespace
