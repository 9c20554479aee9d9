// Linux RAPL through the powercap sysfs interface (see docs/rapl.md).
//
// Layout handled (entries are often symlinks into /sys/devices/virtual/powercap):
//   <root>/intel-rapl:N               package zone N (its `name` starts with "package")
//   <root>/intel-rapl:N:M             sub-zone M of package N (dram, core, uncore...)
//   <root>/intel-rapl:N/intel-rapl:N:M   the same sub-zone, nested in its package
//   <root>/intel-rapl/intel-rapl:N[/intel-rapl:N:M]   the control-type folder layout
// Only these fixed depths are visited, so symlink loops in sysfs cannot make discovery hang.
#include "zeus/device/rapl.hpp"

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/log.hpp"
#include "common/sysfs.hpp"
#include "device/rapl_zone.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/rapl_tracker.hpp"

namespace zeus::device {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kZonePrefix = "intel-rapl:";
constexpr std::string_view kControlTypeFolder = "intel-rapl";

std::string not_available_message(const fs::path& root, std::string_view detail) {
  std::string message = "RAPL is not available: no powercap RAPL zones under " + root.string();
  if (!detail.empty()) {
    message += " (";
    message += detail;
    message += ")";
  }
  message +=
      ". CPU energy needs Linux on an Intel or AMD CPU with the intel_rapl driver loaded "
      "(modules intel_rapl_msr / intel_rapl_common).";
  return message;
}

// Parses a non-negative decimal number that makes up the whole of `text`.
std::optional<int> parse_index(std::string_view text) {
  if (text.empty() || text.size() > 6) {
    return std::nullopt;
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

// "intel-rapl:N" -> {N, nullopt}; "intel-rapl:N:M" -> {N, M}; anything else -> nullopt.
struct ZoneId {
  int package = 0;
  std::optional<int> sub;
};

std::optional<ZoneId> parse_zone_id(std::string_view entry_name) {
  if (entry_name.substr(0, kZonePrefix.size()) != kZonePrefix) {
    return std::nullopt;
  }
  const std::string_view rest = entry_name.substr(kZonePrefix.size());
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos) {
    const auto package = parse_index(rest);
    if (!package) {
      return std::nullopt;
    }
    return ZoneId{*package, std::nullopt};
  }
  const auto package = parse_index(rest.substr(0, colon));
  const auto sub = parse_index(rest.substr(colon + 1));
  if (!package || !sub) {
    return std::nullopt;
  }
  return ZoneId{*package, *sub};
}

bool is_directory_noexcept(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);  // follows symlinks
}

// The zone folders found below a powercap root, keyed by their numbers (first path found wins,
// so a top-level symlink and the nested folder it points to count once).
struct ZoneTree {
  std::map<int, fs::path> packages;                  // intel-rapl:N
  std::map<std::pair<int, int>, fs::path> subzones;  // intel-rapl:N:M
  std::error_code root_error;                        // listing the root itself failed
};

void collect_zones(const fs::path& dir, ZoneTree& tree) {
  std::error_code ec;
  for (const fs::path& entry : sysfs::list_entries(dir, ec)) {
    const auto id = parse_zone_id(entry.filename().string());
    if (!id || !is_directory_noexcept(entry)) {
      continue;
    }
    if (id->sub) {
      tree.subzones.emplace(std::make_pair(id->package, *id->sub), entry);
    } else {
      tree.packages.emplace(id->package, entry);
    }
  }
}

ZoneTree scan_zone_tree(const fs::path& root) {
  ZoneTree tree;
  sysfs::list_entries(root, tree.root_error);
  if (tree.root_error) {
    return tree;
  }
  collect_zones(root, tree);
  const fs::path control_type = root / kControlTypeFolder;
  if (is_directory_noexcept(control_type)) {
    collect_zones(control_type, tree);
  }
  // Sub-zones nested inside their package folder.
  for (const auto& [package, package_dir] : tree.packages) {
    std::error_code ec;
    for (const fs::path& entry : sysfs::list_entries(package_dir, ec)) {
      const auto id = parse_zone_id(entry.filename().string());
      if (!id || !id->sub || id->package != package || !is_directory_noexcept(entry)) {
        continue;
      }
      tree.subzones.emplace(std::make_pair(id->package, *id->sub), entry);
    }
  }
  return tree;
}

// The zone's `name`, or nullopt when it cannot be read (the reason goes to `why`).
std::optional<std::string> read_zone_name(const fs::path& zone_dir, std::string& why) {
  try {
    return sysfs::read_text(zone_dir / "name");
  } catch (const Error& error) {
    why = error.what();
    return std::nullopt;
  }
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

class RaplCpu final : public Cpu {
 public:
  RaplCpu(int index, std::string name, std::shared_ptr<RaplZone> package,
          std::shared_ptr<RaplZone> dram, std::shared_ptr<RaplTracker> tracker)
      : index_(index),
        name_(std::move(name)),
        package_(std::move(package)),
        dram_(std::move(dram)),
        tracker_(std::move(tracker)) {}

  int index() const override { return index_; }
  std::string name() const override { return name_; }
  std::uint64_t package_energy_uj() override { return package_->read_energy_uj(); }
  bool has_dram() const override { return dram_ != nullptr; }
  std::uint64_t dram_energy_uj() override {
    if (!dram_) {
      throw Error(ErrorKind::kNotSupported,
                  "CPU " + std::to_string(index_) + " (" + name_ + ") has no RAPL DRAM zone",
                  ErrorSubject::kCpu);
    }
    return dram_->read_energy_uj();
  }
  std::shared_ptr<void> track_wraparound() override {
    std::vector<std::shared_ptr<RaplZone>> zones = {package_};
    if (dram_) {
      zones.push_back(dram_);
    }
    return tracker_->track(zones);
  }
  CounterHealth counter_health() const override {
    CounterHealth health = package_->health();
    if (dram_) {
      const CounterHealth dram = dram_->health();
      health.wraps += dram.wraps;
      health.resets += dram.resets;
      health.gaps += dram.gaps;
    }
    return health;
  }

 private:
  const int index_;
  const std::string name_;
  const std::shared_ptr<RaplZone> package_;
  const std::shared_ptr<RaplZone> dram_;
  const std::shared_ptr<RaplTracker> tracker_;
};

// The DRAM counter of package `package`, or null when it has none that can be read.
std::shared_ptr<RaplZone> find_dram(const ZoneTree& tree, int package,
                                    const std::shared_ptr<const Clock>& clock) {
  for (auto it = tree.subzones.lower_bound({package, 0});
       it != tree.subzones.end() && it->first.first == package; ++it) {
    std::string why;
    const auto name = read_zone_name(it->second, why);
    if (!name || *name != "dram") {
      continue;
    }
    try {
      return std::make_shared<RaplZone>(it->second, clock);
    } catch (const Error& error) {
      log().warn("RAPL DRAM zone {} is not usable: {}", it->second.string(), error.what());
      return nullptr;
    }
  }
  return nullptr;
}

bool has_package_zone(const ZoneTree& tree) {
  for (const auto& [package, dir] : tree.packages) {
    std::string why;
    const auto name = read_zone_name(dir, why);
    if (name && starts_with(*name, "package")) {
      return true;
    }
  }
  return false;
}

}  // namespace

fs::path choose_powercap_root(const fs::path& primary, const fs::path& fallback) {
  if (has_package_zone(scan_zone_tree(primary))) {
    return primary;
  }
  if (has_package_zone(scan_zone_tree(fallback))) {
    return fallback;
  }
  return primary;
}

fs::path default_powercap_root() {
  return choose_powercap_root("/sys/class/powercap", "/zeus_sys/class/powercap");
}

CpuDiscovery discover_rapl_cpus(const fs::path& powercap_root,
                                std::shared_ptr<RaplTracker> tracker) {
  if (!tracker) {
    tracker = RaplTracker::process();
  }
  CpuDiscovery result;
  result.root = powercap_root;
  try {
    const ZoneTree tree = scan_zone_tree(powercap_root);
    if (tree.root_error) {
      result.message = not_available_message(
          powercap_root, tree.root_error == std::errc::no_such_file_or_directory
                             ? "the folder does not exist"
                             : "cannot list the folder: " + tree.root_error.message());
      log().debug("{}", result.message);
      return result;
    }

    std::vector<std::string> problems;
    bool permission_denied = false;
    std::string summary;
    for (const auto& [package, dir] : tree.packages) {
      std::string why;
      const auto name = read_zone_name(dir, why);
      if (!name) {
        problems.push_back(why);
        continue;
      }
      if (!starts_with(*name, "package")) {
        log().debug("RAPL zone {} is \"{}\", not a package; skipped", dir.string(), *name);
        continue;
      }
      std::shared_ptr<RaplZone> package_counter;
      try {
        package_counter = std::make_shared<RaplZone>(dir, tracker->clock());
      } catch (const Error& error) {
        permission_denied = permission_denied || error.kind() == ErrorKind::kNoPermission;
        problems.push_back(error.what());
        continue;
      }
      auto dram_counter = find_dram(tree, package, tracker->clock());
      summary += summary.empty() ? "" : ", ";
      summary += *name + " (" + dir.filename().string() + (dram_counter ? ", with DRAM)" : ")");
      result.cpus.push_back(std::make_shared<RaplCpu>(package, *name, std::move(package_counter),
                                                      std::move(dram_counter), tracker));
    }

    std::string problem_text;
    for (const std::string& problem : problems) {
      problem_text += problem_text.empty() ? "" : "; ";
      problem_text += problem;
    }
    if (!result.cpus.empty()) {
      result.available = true;
      result.message = "Found " + std::to_string(result.cpus.size()) +
                       " RAPL package zone(s) under " + powercap_root.string() + ": " + summary;
      if (!problem_text.empty()) {
        result.message += ". Skipped: " + problem_text;
      }
      if (permission_denied) {
        result.message += ". " + rapl_permission_advice();
      }
      log().debug("{}", result.message);
      return result;
    }
    result.permission_denied = permission_denied;
    if (permission_denied) {
      result.message = "RAPL zones exist under " + powercap_root.string() +
                       " but cannot be read: " + problem_text + ". " + rapl_permission_advice();
    } else if (!problem_text.empty()) {
      result.message = "RAPL is not available: no usable RAPL package zone under " +
                       powercap_root.string() + " (" + problem_text + ")";
    } else {
      result.message = not_available_message(powercap_root, "");
    }
    log().debug("{}", result.message);
    return result;
  } catch (const std::exception& error) {
    // Nothing above is expected to throw (zone errors are caught), but discovery must not.
    result.cpus.clear();
    result.available = false;
    result.message = not_available_message(powercap_root, error.what());
    return result;
  }
}

}  // namespace zeus::device
