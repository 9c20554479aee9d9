// The power-limit profile file (load_power_limit_profile, save_power_limit_profile) on hostile
// input: limits past an int, a FIFO in its place, a link to it, bad entries (skipped on request,
// never written).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "zeus/common/error.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("zeus-plo-" + std::to_string(getpid()) + "-" + name);
}

// A power limit that does not fit an int used to wrap (4294967496 -> 200 W) and load as a valid
// profile (found by fuzz/plo_profile.cpp; fuzz/regressions/plo_profile/).
TEST(PowerLimitOptimizerErrors, PowerLimitOutOfIntRangeIsRefused) {
  const fs::path bad = temp_path("wide.json");
  for (const std::string limit : {"4294967496", "14294967096", "-4294967096", "2147483648",
                                  "18446744073709551615", "-9223372036854775808"}) {
    std::ofstream(bad) << R"({"measurements": [{"power_limit": 250, "energy": 1, "time": 1},)"
                       << R"( {"power_limit": )" << limit << R"(, "energy": 2, "time": 2}]})";
    try {
      const auto profile = zeus::runtime::load_power_limit_profile(bad);
      ADD_FAILURE() << limit << " read as " << profile.measurements.back().power_limit_w << " W";
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
      const std::string message = error.what();
      EXPECT_NE(message.find(bad.string()), std::string::npos) << message;
      EXPECT_NE(message.find("measurement 1: power_limit " + limit + " is out of range"),
                std::string::npos)
          << message;
    }
  }
  // The largest int still loads (and is then just a very high limit).
  std::ofstream(bad)
      << R"({"measurements": [{"power_limit": 2147483647, "energy": 1, "time": 1}]})";
  EXPECT_EQ(zeus::runtime::load_power_limit_profile(bad).measurements.at(0).power_limit_w,
            2147483647);
  fs::remove(bad);
}

// A FIFO as the profile used to block the loader forever; saving goes through a link and puts the
// profile in place whole.
TEST(PowerLimitOptimizerErrors, AFifoProfileIsRefusedAndSavingKeepsLinks) {
  const fs::path fifo = temp_path("fifo-profile.json");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    zeus::runtime::load_power_limit_profile(fifo);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("the power-limit profile " + fifo.string()),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("named pipe"), std::string::npos) << error.what();
  }
  fs::remove(fifo);
  const fs::path real = temp_path("real-profile.json");
  const fs::path link = temp_path("linked-profile.json");
  fs::remove(real);
  fs::remove(link);
  fs::create_symlink(real, link);
  zeus::runtime::save_power_limit_profile(link, {{{250, 10.0, 1.0}, {100, 5.0, 2.0}}});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(zeus::runtime::load_power_limit_profile(real).measurements.size(), 2u);
  fs::remove(link);
  fs::remove(real);
}

// An entry that measured 0 J (issue 31): refused by save (nothing written); on load an error, or
// with `skipped` a message naming the file and the entry while the others load.
TEST(PowerLimitOptimizerErrors, BadEntriesAreNeverWrittenAndSkippedOnRequest) {
  const fs::path path = temp_path("zero.json");
  fs::remove(path);
  EXPECT_THROW(zeus::runtime::save_power_limit_profile(path, {{{250, 10.0, 1.0}, {200, 0.0, 1.0}}}),
               zeus::Error);
  EXPECT_THROW(zeus::runtime::save_power_limit_profile(path, {{{250, 10.0, 1.0}, {250, 9.0, 1.0}}}),
               zeus::Error);
  EXPECT_THROW(zeus::runtime::save_power_limit_profile(path, {}), zeus::Error);
  EXPECT_FALSE(fs::exists(path));
  std::ofstream(path) << R"({"measurements": [{"power_limit": 250, "energy": 10, "time": 1},)"
                      << R"( {"power_limit": 200, "energy": 0, "time": 1}, {"time": 1},)"
                      << R"( {"power_limit": 150, "energy": 4, "time": 2}]})";
  EXPECT_THROW(zeus::runtime::load_power_limit_profile(path), zeus::Error);
  std::vector<std::string> skipped;
  const auto profile = zeus::runtime::load_power_limit_profile(path, &skipped);
  ASSERT_EQ(profile.measurements.size(), 2u);
  EXPECT_EQ(profile.measurements[1].power_limit_w, 150);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find(path.string() + ": measurement 1: energy (0 J)"), std::string::npos)
      << skipped[0];
  EXPECT_NE(skipped[1].find("measurement 2: needs power_limit"), std::string::npos) << skipped[1];
  fs::remove(path);
}

}  // namespace
