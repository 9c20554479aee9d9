#include "zeus/optimizer/power_limit_selector.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/shared_data.hpp"
#include "zeus/common/error.hpp"

namespace {

using zeus::optimizer::PowerLimitMeasurement;

std::vector<PowerLimitMeasurement> sample() {
  // Descending, as profiling produces them.
  return {{300, 100.0, 10.0}, {250, 80.0, 11.0}, {200, 80.0, 13.0}, {150, 90.0, 20.0}};
}

TEST(Selectors, EnergyAndTimeWithTiesToTheFirst) {
  EXPECT_EQ(zeus::optimizer::EnergySelector().select(sample()), 250);  // tie 250/200 -> first
  EXPECT_EQ(zeus::optimizer::TimeSelector().select(sample()), 300);
}

TEST(Selectors, ZeusCostUsesMaxLimitTimesWorldSize) {
  // eta = 1: energy only; eta = 0: time only.
  EXPECT_EQ(zeus::optimizer::ZeusCostSelector(1.0).select(sample()), 250);
  EXPECT_EQ(zeus::optimizer::ZeusCostSelector(0.0).select(sample()), 300);
  // eta = 0.5, max power 300 W: 300 -> 50+1500, 250 -> 40+1650.
  EXPECT_EQ(zeus::optimizer::ZeusCostSelector(0.5).select(sample()), 300);
  EXPECT_THROW(zeus::optimizer::ZeusCostSelector(1.5), zeus::Error);
  EXPECT_THROW(zeus::optimizer::ZeusCostSelector(0.5, 0), zeus::Error);
}

TEST(Selectors, ZeusCostWithAGivenMaxPower) {
  using zeus::optimizer::ZeusCostSelector;
  // The same as the measured maximum (300 W) or world size 2 (600 W) when given those.
  EXPECT_EQ(ZeusCostSelector::with_max_power(0.5, 300.0).select(sample()),
            ZeusCostSelector(0.5).select(sample()));
  std::vector<PowerLimitMeasurement> slow = sample();
  slow[0].time_s = 10.5;  // 300 W: 50 + 0.5 x MaxPower x 10.5
  EXPECT_EQ(ZeusCostSelector::with_max_power(0.5, 600.0).select(slow),
            ZeusCostSelector(0.5, 2).select(slow));
  // A small max power weighs time little: 250 W (40 + 5.5) beats 300 W (50 + 5) and 200 W.
  EXPECT_EQ(ZeusCostSelector::with_max_power(0.5, 1.0).select(sample()), 250);
  EXPECT_THROW(ZeusCostSelector::with_max_power(0.5, 0.0), zeus::Error);
  EXPECT_THROW(ZeusCostSelector::with_max_power(1.5, 300.0), zeus::Error);
}

TEST(Selectors, MaxSlowdownTakesTheLowestLimitWithinTheFactor) {
  EXPECT_EQ(zeus::optimizer::MaxSlowdownSelector(1.0).select(sample()), 300);
  EXPECT_EQ(zeus::optimizer::MaxSlowdownSelector(1.1).select(sample()), 250);
  EXPECT_EQ(zeus::optimizer::MaxSlowdownSelector(1.3).select(sample()), 200);
  EXPECT_EQ(zeus::optimizer::MaxSlowdownSelector(100).select(sample()), 150);
  EXPECT_THROW(zeus::optimizer::MaxSlowdownSelector(0.9), zeus::Error);
  EXPECT_THROW(zeus::optimizer::EnergySelector().select({}), zeus::Error);
}

// The profiling logs of ../shared/data/plo-profiles and the optima their selectors imply
// (tests/optimizer/data/selector_optima.csv; a new case is a new row).
TEST(Selectors, RealProfilingLogsGiveTheExpectedOptima) {
  const std::filesystem::path logs = zeus::testing::shared_data_dir() / "plo-profiles";
  if (!std::filesystem::exists(logs)) {
    GTEST_SKIP() << "../shared/data/plo-profiles is absent; skipping the real-log optima";
  }
  std::ifstream expected_file(std::filesystem::path(ZEUS_SOURCE_DIR) / "tests" / "optimizer" /
                              "data" / "selector_optima.csv");
  ASSERT_TRUE(expected_file);
  std::string line;
  int cases = 0;
  while (std::getline(expected_file, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    // The file name itself may contain commas: the last 15 fields are the optima.
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string field; std::getline(split, field, ',');) {
      fields.push_back(field);
    }
    ASSERT_GT(fields.size(), 15u);
    std::string name = fields[0];
    for (std::size_t i = 1; i + 15 < fields.size(); ++i) {
      name += "," + fields[i];
    }
    std::vector<int> optima;
    for (std::size_t i = fields.size() - 15; i < fields.size(); ++i) {
      optima.push_back(std::stoi(fields[i]));
    }

    std::ifstream log(logs / (name + ".csv"));
    ASSERT_TRUE(log) << name;
    std::string row;
    std::getline(log, row);
    std::vector<PowerLimitMeasurement> measurements;
    int gpus = 0;
    while (std::getline(log, row)) {
      std::vector<std::string> cells;
      std::stringstream cell_split(row);
      for (std::string cell; std::getline(cell_split, cell, ',');) {
        cells.push_back(cell);
      }
      PowerLimitMeasurement m;
      m.power_limit_w = std::stoi(cells[1].substr(cells[1].rfind('_') + 1));
      m.time_s = std::stod(cells[2]);
      gpus = static_cast<int>(cells.size()) - 3;
      for (std::size_t i = 3; i < cells.size(); ++i) {
        m.energy_j += std::stod(cells[i]);
      }
      measurements.push_back(m);
    }
    const double etas[] = {0.0, 0.25, 0.5, 0.75, 1.0};
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(zeus::optimizer::ZeusCostSelector(etas[i], gpus).select(measurements), optima[i])
          << name << " eta " << etas[i];
    }
    EXPECT_EQ(zeus::optimizer::EnergySelector().select(measurements), optima[5]) << name;
    EXPECT_EQ(zeus::optimizer::TimeSelector().select(measurements), optima[6]) << name;
    const double factors[] = {1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 100.0};
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(zeus::optimizer::MaxSlowdownSelector(factors[i]).select(measurements),
                optima[7 + i])
          << name << " factor " << factors[i];
    }
    ++cases;
  }
  EXPECT_EQ(cases, 12);
}

}  // namespace
