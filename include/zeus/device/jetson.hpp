// NVIDIA Jetson boards: the power rails of their INA3221 monitors, read from sysfs
// (docs/devices.md, "Jetson"). A rail's power is read directly where the driver exposes it, else as
// voltage x current. Discovery never throws: why there is no SoC, or no rail, goes into its
// message.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/common/env.hpp"

namespace zeus::device {

// What a rail feeds, from its name (classify_rail).
enum class RailKind {
  kCpu,    // a name with the token CPU: "VDD_CPU_CV", "POM_5V_CPU", "CPU"
  kGpu,    // GPU: "VDD_GPU_SOC", "POM_5V_GPU", "GPU"
  kSoc,    // SOC or CV without CPU or GPU: "VDD_SOC", "SOC", "CV"
  kTotal,  // the board's input: IN, SYS..., TOTAL: "VIN_SYS_5V0", "POM_5V_IN", "SYS5V", "VDD_IN"
  kOther,  // anything else ("VDDRQ"), and a rail naming both CPU and GPU ("VDD_CPU_GPU_CV")
};

// "cpu", "gpu", "soc", "total", "other".
std::string_view rail_kind_name(RailKind kind);
// The kind of the rail named `name` (case-insensitive, by its '_'-separated tokens).
RailKind classify_rail(std::string_view name);

// Where a rail's readings come from.
enum class RailLayout {
  kIna3221x,  // L4T's out-of-tree iio driver: in_power<i>_input (mW), in_current<i>_input (mA),
              // in_voltage<i>_input (mV), rail_name_<i>
  kHwmon,     // the mainline ina3221 hwmon driver: in<i>_label, in<i>_input (mV),
              // curr<i>_input (mA), on some kernels power<i>_input (µW)
};

struct PowerRail {
  std::string name;  // as the board labels it
  RailKind kind = RailKind::kOther;
  RailLayout layout = RailLayout::kHwmon;
  std::filesystem::path power_file;  // direct power; empty when the driver has none
  std::filesystem::path voltage_file;
  std::filesystem::path current_file;
};

class JetsonSoc {
 public:
  JetsonSoc(std::string model, std::vector<PowerRail> rails);

  // The board's model (/proc/device-tree/model), or "NVIDIA Jetson" when it has none.
  const std::string& model() const { return model_; }
  const std::vector<PowerRail>& rails() const { return rails_; }
  // The rails of one kind, in rails() order.
  std::vector<std::size_t> rails_of(RailKind kind) const;

  // One reading of rail `rail` (an index into rails()) in milliwatts: the power file, else
  // voltage x current. Throws Error(kNotFound) when a file vanished, Error(kIo) naming the file
  // for a value that is not an integer, a FIFO or a device node, and Error(kInvalidArgument)
  // for a rail index out of range. A negative reading (current flowing back) reads as 0.
  double rail_power_mw(std::size_t rail) const;

 private:
  std::string model_;
  std::vector<PowerRail> rails_;
};

struct SocDiscovery {
  std::shared_ptr<JetsonSoc> soc;  // null when there is none, or it has no readable rail
  bool is_jetson = false;          // the root declares a Jetson (whether or not it has rails)
  std::filesystem::path root;      // the root that was searched
  std::string message;             // why there is no SoC, or what was found
};

// The rails of the Jetson under `root` (the file system's root on a real board; a fake tree in
// tests). A Jetson is a root holding /etc/nv_tegra_release or /usr/lib/aarch64-linux-gnu/tegra;
// at "/" it must also be an aarch64 Linux machine. Rails: /sys/bus/i2c/drivers/ina3221x/*/
// iio:device*/ (kIna3221x), /sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/ (kHwmon); channels
// without a name, named "NC", or without readable power files are left out, and so is a
// channel whose files exist but hold no integer (said in the message).
SocDiscovery discover_jetson(const std::filesystem::path& root);

// discover_jetson() under ZEUS_JETSON_ROOT when set (a fake tree declares a Jetson on any
// architecture), else under "/".
SocDiscovery discover_soc(const EnvLookup& env = process_env());

// Process-wide SoC (discover_soc(), once).
const SocDiscovery& get_soc();

}  // namespace zeus::device
