// Jetson power rails from the INA3221 drivers' sysfs files (zeus/device/jetson.hpp).
//
// The two layouts, as the drivers write them:
// - L4T's out-of-tree `ina3221x` iio driver (L4T 32 and older: Nano, TX1/TX2, Xavier on L4T 32):
//   /sys/bus/i2c/drivers/ina3221x/<bus>-<addr>/iio:device<N>/ with rail_name_<i>,
//   in_power<i>_input (mW), in_current<i>_input (mA), in_voltage<i>_input (mV), i = 0..2.
// - the mainline `ina3221` hwmon driver (L4T 34 and newer: Orin, Xavier on L4T 35):
//   /sys/bus/i2c/drivers/ina3221/<bus>-<addr>/hwmon/hwmon<N>/ with in<i>_label, in<i>_input
//   (bus voltage, mV), curr<i>_input (mA), i = 1..3, and power<i>_input (µW) where the kernel
//   has it.
#include "zeus/device/jetson.hpp"

#include <sys/utsname.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "common/sysfs.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultModel = "NVIDIA Jetson";

bool has_token(const std::vector<std::string_view>& tokens, std::string_view wanted) {
  return std::find(tokens.begin(), tokens.end(), wanted) != tokens.end();
}

// Entries of `folder` whose names start with `prefix`, sorted; none when it cannot be listed.
std::vector<fs::path> entries_starting(const fs::path& folder, std::string_view prefix) {
  std::error_code error;
  std::vector<fs::path> found = sysfs::list_entries(folder, error);
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const fs::path& entry) {
                               return entry.filename().string().rfind(prefix, 0) != 0;
                             }),
              found.end());
  std::sort(found.begin(), found.end());
  return found;
}

bool present(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

// The rail's name from `label_file`, or nullopt for a channel that is absent or not connected.
std::optional<std::string> rail_label(const fs::path& label_file) {
  if (!present(label_file)) {
    return std::nullopt;
  }
  std::string label = std::string(text::trim(sysfs::read_text(label_file)));
  if (label.empty() || text::ascii_iequals(label, "NC")) {
    return std::nullopt;
  }
  return label;
}

struct Channel {
  fs::path label;
  fs::path power;
  fs::path voltage;
  fs::path current;
};

// The rails of one chip's channels; `skipped` collects why a channel was left out.
void add_rails(RailLayout layout, const std::vector<Channel>& channels,
               std::vector<PowerRail>& rails, std::vector<std::string>& skipped) {
  for (const Channel& channel : channels) {
    PowerRail rail;
    try {
      const std::optional<std::string> name = rail_label(channel.label);
      if (!name) {
        continue;
      }
      rail.name = *name;
    } catch (const Error& error) {
      skipped.push_back(error.what());
      continue;
    }
    rail.kind = classify_rail(rail.name);
    rail.layout = layout;
    if (present(channel.power)) {
      rail.power_file = channel.power;
    } else if (present(channel.voltage) && present(channel.current)) {
      rail.voltage_file = channel.voltage;
      rail.current_file = channel.current;
    } else {
      skipped.push_back(rail.name + ": no power file, nor voltage and current files, in " +
                        channel.label.parent_path().string());
      continue;
    }
    const bool duplicate = std::any_of(rails.begin(), rails.end(),
                                       [&](const PowerRail& r) { return r.name == rail.name; });
    if (duplicate) {
      skipped.push_back(rail.name + " in " + channel.label.parent_path().string() +
                        ": a rail of that name was found first");
      continue;
    }
    rails.push_back(std::move(rail));
  }
}

std::vector<PowerRail> find_rails(const fs::path& root, std::vector<std::string>& skipped) {
  std::vector<PowerRail> rails;
  const fs::path drivers = root / "sys/bus/i2c/drivers";
  for (const fs::path& chip : entries_starting(drivers / "ina3221x", "")) {
    for (const fs::path& device : entries_starting(chip, "iio:device")) {
      std::vector<Channel> channels;
      for (int i = 0; i < 3; ++i) {
        const std::string n = std::to_string(i);
        channels.push_back({device / ("rail_name_" + n), device / ("in_power" + n + "_input"),
                            device / ("in_voltage" + n + "_input"),
                            device / ("in_current" + n + "_input")});
      }
      add_rails(RailLayout::kIna3221x, channels, rails, skipped);
    }
  }
  for (const fs::path& chip : entries_starting(drivers / "ina3221", "")) {
    for (const fs::path& hwmon : entries_starting(chip / "hwmon", "hwmon")) {
      std::vector<Channel> channels;
      for (int i = 1; i <= 3; ++i) {
        const std::string n = std::to_string(i);
        channels.push_back({hwmon / ("in" + n + "_label"), hwmon / ("power" + n + "_input"),
                            hwmon / ("in" + n + "_input"), hwmon / ("curr" + n + "_input")});
      }
      add_rails(RailLayout::kHwmon, channels, rails, skipped);
    }
  }
  return rails;
}

bool is_aarch64_linux() {
  utsname name{};
  return ::uname(&name) == 0 && std::string_view(name.sysname) == "Linux" &&
         std::string_view(name.machine) == "aarch64";
}

std::string board_model(const fs::path& root) {
  try {
    // The device tree's model ends in a NUL.
    std::string model = sysfs::read_text(root / "proc/device-tree/model");
    model.erase(std::find(model.begin(), model.end(), '\0'), model.end());
    model = std::string(text::trim(model));
    return model.empty() ? kDefaultModel : model;
  } catch (const Error&) {
    return kDefaultModel;
  }
}

}  // namespace

std::string_view rail_kind_name(RailKind kind) {
  switch (kind) {
    case RailKind::kCpu:
      return "cpu";
    case RailKind::kGpu:
      return "gpu";
    case RailKind::kSoc:
      return "soc";
    case RailKind::kTotal:
      return "total";
    case RailKind::kOther:
      return "other";
  }
  return "other";
}

RailKind classify_rail(std::string_view name) {
  const std::string lower = text::ascii_lower(name);
  const std::vector<std::string_view> tokens = text::split(lower, '_');
  const bool cpu = has_token(tokens, "cpu");
  const bool gpu = has_token(tokens, "gpu");
  if (cpu && gpu) {
    return RailKind::kOther;  // a shared rail: neither the CPU's nor the GPU's alone
  }
  if (gpu) {
    return RailKind::kGpu;
  }
  if (cpu) {
    return RailKind::kCpu;
  }
  if (has_token(tokens, "soc") || has_token(tokens, "cv")) {
    return RailKind::kSoc;
  }
  const bool system = std::any_of(tokens.begin(), tokens.end(), [](std::string_view token) {
    return token.rfind("sys", 0) == 0;
  });
  if (system || has_token(tokens, "in") || has_token(tokens, "total")) {
    return RailKind::kTotal;
  }
  return RailKind::kOther;
}

JetsonSoc::JetsonSoc(std::string model, std::vector<PowerRail> rails)
    : model_(std::move(model)), rails_(std::move(rails)) {}

std::vector<std::size_t> JetsonSoc::rails_of(RailKind kind) const {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    if (rails_[i].kind == kind) {
      found.push_back(i);
    }
  }
  return found;
}

namespace {

double read_rail_mw(const PowerRail& target) {
  double power_mw = 0.0;
  if (!target.power_file.empty()) {
    const auto value = static_cast<double>(sysfs::read_int64(target.power_file));
    power_mw = target.layout == RailLayout::kHwmon ? value / 1000.0 : value;  // µW or mW
  } else {
    const auto voltage_mv = static_cast<double>(sysfs::read_int64(target.voltage_file));
    const auto current_ma = static_cast<double>(sysfs::read_int64(target.current_file));
    power_mw = voltage_mv * current_ma / 1000.0;
  }
  return std::max(power_mw, 0.0);
}

}  // namespace

double JetsonSoc::rail_power_mw(std::size_t rail) const {
  if (rail >= rails_.size()) {
    throw Error(ErrorKind::kInvalidArgument, "rail " + std::to_string(rail) +
                                                 " is out of range: the SoC has " +
                                                 std::to_string(rails_.size()) + " rail(s)");
  }
  return read_rail_mw(rails_[rail]);
}

SocDiscovery discover_jetson(const fs::path& root) {
  SocDiscovery result;
  result.root = root;
  const bool marked =
      present(root / "etc/nv_tegra_release") || present(root / "usr/lib/aarch64-linux-gnu/tegra");
  const bool real_root = root == fs::path("/");
  if (!marked || (real_root && !is_aarch64_linux())) {
    result.message = "no SoC: " + (marked ? std::string("this machine is not an aarch64 Linux one")
                                          : "not a Jetson (no etc/nv_tegra_release nor "
                                            "usr/lib/aarch64-linux-gnu/tegra under " +
                                                root.string() + ")");
    return result;
  }
  result.is_jetson = true;
  std::vector<std::string> skipped;
  std::vector<PowerRail> rails;
  for (PowerRail& rail : find_rails(root, skipped)) {
    try {
      (void)read_rail_mw(rail);  // a rail that cannot be read now is left out, and said why
      rails.push_back(std::move(rail));
    } catch (const Error& error) {
      skipped.push_back(rail.name + ": " + error.what());
    }
  }
  const std::string model = board_model(root);
  const std::string skipped_text =
      skipped.empty() ? std::string() : fmt::format("; left out: {}", fmt::join(skipped, "; "));
  if (rails.empty()) {
    result.message = "no SoC power: the " + model +
                     " has no readable INA3221 power rail (no sys/bus/i2c/drivers/ina3221x/*/"
                     "iio:device*/ nor sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/ channel under " +
                     root.string() + ")" + skipped_text;
    return result;
  }
  std::string names;
  for (const PowerRail& rail : rails) {
    names += (names.empty() ? "" : ", ") + rail.name + " (" +
             std::string(rail_kind_name(rail.kind)) + ")";
  }
  result.message =
      model + ": " + std::to_string(rails.size()) + " power rail(s): " + names + skipped_text;
  result.soc = std::make_shared<JetsonSoc>(model, std::move(rails));
  return result;
}

SocDiscovery discover_soc(const EnvLookup& env) {
  const std::optional<std::string> root = env("ZEUS_JETSON_ROOT");
  return discover_jetson(root && !root->empty() ? fs::path(*root) : fs::path("/"));
}

const SocDiscovery& get_soc() {
  static const SocDiscovery discovery = discover_soc();
  return discovery;
}

}  // namespace zeus::device
