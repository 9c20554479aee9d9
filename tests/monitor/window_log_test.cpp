// The window log (src/monitor/window_log.hpp): the bytes ZeusMonitor writes, read back equal by
// the reader ReplayMonitor and `zeus report` share. (Malformed logs: replay_monitor_test.cpp.)
#include "monitor/window_log.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "test_support.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace {

namespace fs = std::filesystem;
namespace window_log = zeus::monitor::window_log;
using zeus::monitor::EnergyByIndex;
using zeus::testing::TempDir;

EnergyByIndex energies(std::initializer_list<std::pair<int, double>> values) {
  EnergyByIndex energy;
  for (const auto& [index, joules] : values) {
    energy.set(index, joules);
  }
  return energy;
}

TEST(WindowLog, WritesTheReferenceFormat) {
  EXPECT_EQ(window_log::header_line({0, 2}),
            "start_time,window_name,elapsed_time,gpu0_energy,gpu2_energy\n");
  EXPECT_EQ(window_log::header_line({}), "start_time,window_name,elapsed_time\n");
  EXPECT_EQ(window_log::row_line(1700000000.5, "epoch", 12.25, {0, 2},
                                 energies({{0, 3010.5}, {2, 2990.0}})),
            "1700000000.5,epoch,12.25,3010.5,2990\n");
  // Numbers in their shortest exact form.
  EXPECT_EQ(window_log::row_line(1700000000.123456, "w", 0.1, {1}, energies({{1, 1e-7}})),
            "1700000000.123456,w,0.1,1e-07\n");
}

TEST(WindowLog, WhatIsWrittenIsReadBack) {
  TempDir dir;
  const fs::path path = dir.path() / "log.csv";
  // GPUs in the order the monitor was given them, which need not be ascending.
  const std::vector<int> gpus = {2, 0};
  struct Window {
    double start_s;
    std::string name;
    double elapsed_s;
    EnergyByIndex energy;
  };
  const std::vector<Window> windows = {
      {1700000000.25, "__PowerLimit_700", 1.5, energies({{0, 100.125}, {2, 200.0}})},
      {1700000002.0, "step \"2\"; ok", 0.000125, energies({{0, 0.0}, {2, 1e-9}})},
      {0.0, "", 3.0, energies({{0, 12345678.9}, {2, 0.1}})}};
  {
    std::ofstream out(path);
    out << window_log::header_line(gpus);
    for (const Window& window : windows) {
      out << window_log::row_line(window.start_s, window.name, window.elapsed_s, gpus,
                                  window.energy);
    }
  }
  const window_log::Log log = window_log::read(path);
  EXPECT_EQ(log.gpu_indices, gpus);
  ASSERT_EQ(log.rows.size(), windows.size());
  for (std::size_t i = 0; i < windows.size(); ++i) {
    EXPECT_EQ(log.rows[i].start_time_s, windows[i].start_s) << i;
    EXPECT_EQ(log.rows[i].window_name, windows[i].name) << i;
    EXPECT_EQ(log.rows[i].elapsed_time_s, windows[i].elapsed_s) << i;
    EXPECT_EQ(log.rows[i].gpu_energy_j,
              (std::vector<double>{windows[i].energy.at(2), windows[i].energy.at(0)}))
        << i;
  }
}

// Each energy under its GPU's column, whatever order the monitor was given the GPUs in (rows
// used to follow the ascending indices while the header followed the given order).
TEST(WindowLog, ZeusMonitorWritesEachGpuUnderItsColumn) {
  TempDir dir;
  zeus::testing::SimulatedRig rig(2, "h100");
  zeus::monitor::ZeusMonitorOptions options;
  options.clock = rig.clock;
  options.start_sampler_thread = false;
  options.gpu_indices = std::vector<int>{1, 0};
  options.log_file = dir.path() / "log.csv";
  zeus::monitor::Measurement measured;
  {
    zeus::monitor::ZeusMonitor monitor(rig.set, {}, options);
    monitor.begin_window("w");
    rig.gpus[0]->set_utilization(0.9);
    rig.gpus[1]->set_utilization(0.1);
    rig.clock->advance_s(2.0);
    measured = monitor.end_window("w");
  }
  ASSERT_NE(measured.gpu_energy_j.at(0), measured.gpu_energy_j.at(1));
  const window_log::Log log = window_log::read(dir.path() / "log.csv");
  EXPECT_EQ(log.gpu_indices, (std::vector<int>{1, 0}));
  ASSERT_EQ(log.rows.size(), 1u);
  EXPECT_EQ(log.rows[0].gpu_energy_j,
            (std::vector<double>{measured.gpu_energy_j.at(1), measured.gpu_energy_j.at(0)}));
}

TEST(WindowLog, RefusesNamesTheLogCannotHold) {
  for (const std::string name : {"a,b", "a\nb", "a\rb", ","}) {
    try {
      window_log::check_window_name(name);
      ADD_FAILURE() << "accepted " << name;
    } catch (const zeus::Error& error) {
      EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument);
      EXPECT_EQ(std::string(error.what()), "window name '" + name +
                                               "' contains a comma or line break, which the CSV "
                                               "log cannot hold");
    }
  }
  EXPECT_NO_THROW(window_log::check_window_name("step \"1\"; epoch 2\t"));
  EXPECT_NO_THROW(window_log::check_window_name(""));
}

TEST(WindowLog, TellsAWindowLogFromOtherFiles) {
  EXPECT_TRUE(window_log::recognises({"start_time", "window_name", "elapsed_time"}));
  EXPECT_TRUE(window_log::recognises({"window_name"}));
  EXPECT_FALSE(window_log::recognises({"timestamp", "device", "domain", "watts"}));
  EXPECT_FALSE(window_log::recognises({}));
}

}  // namespace
