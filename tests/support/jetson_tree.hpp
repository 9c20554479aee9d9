// Fake Jetson sysfs trees, modelled on the real boards' layouts (docs/devices.md, "Jetson"), in a
// folder the caller owns (a support/temp_dir.hpp TempDir, or a CLI test's folder): pass root()
// as discover_jetson's root or ZEUS_JETSON_ROOT. Header-only and free of zeus's libraries, so
// that the CLI tests, which link none, use it too.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace zeus::testing {

class JetsonTree {
 public:
  // A tree under `root` that declares a Jetson (etc/nv_tegra_release) of model `model`.
  explicit JetsonTree(std::filesystem::path root,
                      const std::string& model = "NVIDIA Jetson AGX Orin Developer Kit")
      : root_(std::move(root)) {
    write("etc/nv_tegra_release", "# R35 (release), REVISION: 4.1");
    write("proc/device-tree/model", model + std::string(1, '\0'));
  }

  const std::filesystem::path& root() const { return root_; }

  void write(const std::filesystem::path& relative, const std::string& content) {
    const std::filesystem::path path = root() / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }

  // A mainline ina3221 hwmon chip: rails named `labels` on channels 1.. with bus voltage
  // `voltage_mv` and current `current_ma` each; with `power_files`, power<i>_input (µW) too.
  std::filesystem::path add_hwmon(const std::string& chip, const std::vector<std::string>& labels,
                                  int voltage_mv, int current_ma, bool power_files = false) {
    const std::filesystem::path folder =
        std::filesystem::path("sys/bus/i2c/drivers/ina3221") / chip / "hwmon/hwmon3";
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::string n = std::to_string(i + 1);
      write(folder / ("in" + n + "_label"), labels[i] + "\n");
      write(folder / ("in" + n + "_input"), std::to_string(voltage_mv) + "\n");
      write(folder / ("curr" + n + "_input"), std::to_string(current_ma) + "\n");
      if (power_files) {
        write(folder / ("power" + n + "_input"),
              std::to_string(static_cast<long long>(voltage_mv) * current_ma) + "\n");
      }
    }
    return root() / folder;
  }

  // L4T's ina3221x iio driver: rails named `labels` on channels 0.. with in_power<i>_input
  // `power_mw` each (and voltage and current files that disagree with it, so that a reader of
  // the wrong file is caught).
  std::filesystem::path add_ina3221x(const std::string& chip,
                                     const std::vector<std::string>& labels, int power_mw) {
    const std::filesystem::path folder =
        std::filesystem::path("sys/bus/i2c/drivers/ina3221x") / chip / "iio:device0";
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::string n = std::to_string(i);
      write(folder / ("rail_name_" + n), labels[i] + "\n");
      write(folder / ("in_power" + n + "_input"), std::to_string(power_mw) + "\n");
      write(folder / ("in_voltage" + n + "_input"), "1\n");
      write(folder / ("in_current" + n + "_input"), "1\n");
    }
    return root() / folder;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace zeus::testing
