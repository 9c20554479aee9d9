// The module loggers of common/log.hpp: named after the Python package's modules, chosen from the
// caller's source file, one level setter for all, and a forward that receives each line that its
// logger's level lets through (and only those).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/log.hpp"

namespace {

struct Seen {
  std::string module;
  spdlog::level::level_enum level;
  std::string text;
};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    zeus::set_log_forward(
        [this](std::string_view module, spdlog::level::level_enum level, std::string_view text) {
          seen.push_back(Seen{std::string(module), level, std::string(text)});
        });
  }
  void TearDown() override {
    zeus::set_log_forward({});
    zeus::set_log_level(spdlog::level::warn);
  }
  std::vector<Seen> seen;
};

TEST_F(LogTest, EveryModuleHasItsLoggerAndTheRestIsThePackages) {
  const auto names = zeus::log_module_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "zeus_cpp");
  for (const std::string_view name : names) {
    EXPECT_EQ(zeus::module_log(name).name(), name);
  }
  EXPECT_EQ(zeus::module_log("zeus_cpp.no_such_module").name(), "zeus_cpp");
  EXPECT_EQ(zeus::log().name(), "zeus_cpp");  // this file is not under src/
}

TEST_F(LogTest, TheModuleComesFromTheSourceFilesLayer) {
  EXPECT_EQ(zeus::log_module_of("/work/x/src/monitor/zeus_monitor.cpp"), "zeus_cpp.monitor");
  EXPECT_EQ(zeus::log_module_of("../../src/device/rapl_tracker.cpp"), "zeus_cpp.device");
  EXPECT_EQ(zeus::log_module_of("src/runtime/power_limit_optimizer.cpp"),
            "zeus_cpp.optimizer.power_limit");
  EXPECT_EQ(zeus::log_module_of("src/runtime/batch_size_optimizer.cpp"),
            "zeus_cpp.optimizer.batch_size");
  EXPECT_EQ(zeus::log_module_of("src/bso/transport.cpp"), "zeus_cpp.optimizer.batch_size");
  EXPECT_EQ(zeus::log_module_of("src/metrics/window_pusher.cpp"), "zeus_cpp.metric");
  EXPECT_EQ(zeus::log_module_of("src/daemon/main.cpp"), "zeus_cpp.zeusd");
  EXPECT_EQ(zeus::log_module_of("src/http/session.hpp"), "zeus_cpp.http");
  EXPECT_EQ(zeus::log_module_of("src/common/log.cpp"), "zeus_cpp");
  EXPECT_EQ(zeus::log_module_of("src/python/module.cpp"), "zeus_cpp");
  EXPECT_EQ(zeus::log_module_of("main.cpp"), "zeus_cpp");
  EXPECT_EQ(zeus::log_module_of("src/monitor"), "zeus_cpp.monitor");
}

TEST_F(LogTest, AForwardGetsTheModuleLevelAndTextOfEnabledLinesOnly) {
  zeus::module_log("zeus_cpp.monitor").warn("window '{}' {}", "w", 3);
  zeus::module_log("zeus_cpp.monitor").info("not at warn");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].module, "zeus_cpp.monitor");
  EXPECT_EQ(seen[0].level, spdlog::level::warn);
  EXPECT_EQ(seen[0].text, "window 'w' 3");
}

TEST_F(LogTest, SetLogLevelSetsEveryModule) {
  zeus::set_log_level(spdlog::level::debug);
  for (const std::string_view name : zeus::log_module_names()) {
    EXPECT_TRUE(zeus::module_log(name).should_log(spdlog::level::debug)) << name;
  }
  zeus::module_log("zeus_cpp.optimizer.power_limit").set_level(spdlog::level::err);
  zeus::module_log("zeus_cpp.optimizer.power_limit").warn("silenced");
  zeus::module_log("zeus_cpp.device").debug("shown");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].module, "zeus_cpp.device");
}

}  // namespace
