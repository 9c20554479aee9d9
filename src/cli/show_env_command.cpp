// `zeus show-env`: what zeus finds on this machine and why.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli/commands.hpp"
#include "device/privileges.hpp"
#include "zeus/common/env.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/jetson.hpp"
#include "zeus/device/sensor_probe.hpp"
#include "zeus/version.hpp"

namespace zeus::cli {
namespace {

struct GpuRow {
  int index = 0;
  int physical_index = 0;
  std::string name, uuid, backend, pci_bus_id, architecture;
  std::optional<double> min_w, max_w, current_w, default_w;
  bool energy_counter = false;
  // The counter's refresh period as measured now (probe_energy_counter), and in words.
  std::optional<double> counter_refresh_s;
  std::string counter_refresh;
  bool can_set_power_limit = false;
  // What its power and energy figures cover: "gpu", "module" (a Grace superchip) or "unknown".
  std::string power_scope, energy_scope;
  std::vector<std::string> problems;  // fields that could not be read, and why
};

template <typename Getter>
auto read_or_note(GpuRow& row, const char* what, Getter getter)
    -> std::optional<decltype(getter())> {
  try {
    return getter();
  } catch (const Error& error) {
    row.problems.push_back(std::string(what) + ": " + error.what());
    return std::nullopt;
  }
}

GpuRow describe_gpu(const device::Gpus& gpus, int index, bool sys_admin) {
  device::Gpu& gpu = gpus.at(index);
  GpuRow row;
  row.index = index;
  row.physical_index = gpus.physical_index(index);
  row.backend = std::string(device::gpu_backend_name(gpu.backend()));
  row.name = read_or_note(row, "name", [&] { return gpu.name(); }).value_or("?");
  row.uuid = read_or_note(row, "uuid", [&] { return gpu.uuid(); }).value_or("?");
  row.pci_bus_id = read_or_note(row, "pci bus id", [&] { return gpu.pci_bus_id(); }).value_or("?");
  row.architecture =
      read_or_note(row, "architecture", [&] { return gpu.architecture(); }).value_or("unknown");
  if (const auto range = read_or_note(row, "power limit range",
                                      [&] { return gpu.power_limit_constraints_mw(); })) {
    row.min_w = units::watts_from_milliwatts(range->min_mw);
    row.max_w = units::watts_from_milliwatts(range->max_mw);
  }
  if (const auto limit = read_or_note(row, "power limit", [&] { return gpu.power_limit_mw(); })) {
    row.current_w = units::watts_from_milliwatts(*limit);
  }
  if (const auto value =
          read_or_note(row, "default power limit", [&] { return gpu.default_power_limit_mw(); })) {
    row.default_w = units::watts_from_milliwatts(*value);
  }
  row.energy_counter = gpu.supports_energy_counter();
  row.power_scope = std::string(device::measured_scope_name(gpu.power_scope()));
  row.energy_scope = std::string(device::measured_scope_name(gpu.energy_scope()));
  row.can_set_power_limit = gpu.backend() == device::GpuBackend::kSimulated || sys_admin;
  return row;
}

// Measures every GPU's counter refresh period at once (one thread each): at most about a second
// in all, however many GPUs. A GPU whose counter cannot be read says why.
void probe_counters(const device::Gpus& gpus, std::vector<GpuRow>& rows) {
  constexpr double kMaxProbeS = 1.2;   // a 100 ms counter shows 6 changes well within it
  constexpr std::size_t kChanges = 6;  // 5 intervals: their median is the period
  std::vector<std::thread> threads;
  for (GpuRow& row : rows) {
    if (!row.energy_counter) {
      continue;
    }
    threads.emplace_back([&gpus, &row] {
      try {
        const device::CounterProbe probe = device::probe_energy_counter(
            gpus.at(row.index), *steady_clock(), kMaxProbeS, 0.0005, kChanges);
        if (probe.counter.period_s && !probe.counter.changed_every_poll) {
          row.counter_refresh_s = probe.counter.period_s;
        }
        row.counter_refresh = device::describe_counter_probe(probe);
      } catch (const Error& error) {
        row.counter_refresh = std::string("not measured: ") + error.what();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
}

std::string watts(const std::optional<double>& value) {
  return value ? fmt::format("{:g}", *value) : std::string("?");
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// The SoC's rails with one power reading each (nullopt: the read failed, said in `problems`).
struct RailRow {
  std::string name;
  std::string kind;
  std::string source;  // the file(s) read
  std::optional<double> power_w;
  std::string problem;
};

std::vector<RailRow> describe_rails(const device::SocDiscovery& soc) {
  std::vector<RailRow> rows;
  if (!soc.soc) {
    return rows;
  }
  for (std::size_t i = 0; i < soc.soc->rails().size(); ++i) {
    const device::PowerRail& rail = soc.soc->rails()[i];
    RailRow row{rail.name, std::string(device::rail_kind_name(rail.kind)),
                rail.power_file.empty()
                    ? rail.voltage_file.string() + " x " + rail.current_file.string()
                    : rail.power_file.string(),
                std::nullopt, ""};
    try {
      row.power_w = soc.soc->rail_power_mw(i) / 1000.0;
    } catch (const Error& error) {
      row.problem = error.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json soc_json(const device::SocDiscovery& soc, const std::vector<RailRow>& rails) {
  nlohmann::json out = {{"root", soc.root.string()},
                        {"jetson", soc.is_jetson},
                        {"available", soc.soc != nullptr},
                        {"model", soc.soc ? nlohmann::json(soc.soc->model()) : nullptr},
                        {"message", soc.message},
                        {"rails", nlohmann::json::array()}};
  for (const RailRow& rail : rails) {
    out["rails"].push_back({{"name", rail.name},
                            {"kind", rail.kind},
                            {"source", rail.source},
                            {"power_w", optional_json(rail.power_w)},
                            {"problem", rail.problem}});
  }
  return out;
}

void print_soc(const device::SocDiscovery& soc, const std::vector<RailRow>& rails) {
  std::cout << fmt::format("\nSoC (Jetson power rails under {}):\n", soc.root.string());
  if (!soc.soc) {
    std::cout << "  " << soc.message << "\n";
    return;
  }
  std::cout << fmt::format("  {}\n  {:<20} {:<6} {:<9} {}\n", soc.soc->model(), "rail", "kind",
                           "power W", "read from");
  for (const RailRow& rail : rails) {
    std::cout << fmt::format("  {:<20} {:<6} {:<9} {}\n", rail.name, rail.kind, watts(rail.power_w),
                             rail.source);
    if (!rail.problem.empty()) {
      std::cout << "        ! " << rail.problem << "\n";
    }
  }
}

int run(bool as_json, bool probe_counter, const std::string& powercap_root_option) {
  const device::GpuDiscovery discovery = device::discover_gpus();
  const std::filesystem::path powercap_root = powercap_root_option.empty()
                                                  ? device::default_powercap_root()
                                                  : std::filesystem::path(powercap_root_option);
  const device::CpuDiscovery cpus = device::discover_rapl_cpus(powercap_root);
  const bool sys_admin = device::has_sys_admin();
  const device::SocDiscovery soc = device::discover_soc();
  const std::vector<RailRow> rails = describe_rails(soc);

  std::vector<GpuRow> rows;
  for (int i = 0; i < static_cast<int>(discovery.gpus.size()); ++i) {
    rows.push_back(describe_gpu(discovery.gpus, i, sys_admin));
  }
  if (probe_counter) {
    probe_counters(discovery.gpus, rows);
  }

  if (as_json) {
    nlohmann::json out;
    out["zeus_version"] = ZEUS_VERSION_STRING;
    out["backends"] = nlohmann::json::array();
    for (const device::BackendProbe& probe : discovery.probes) {
      out["backends"].push_back({{"backend", probe.backend},
                                 {"loaded", probe.loaded},
                                 {"library_path", probe.library_path},
                                 {"driver_version", probe.driver_version},
                                 {"library_version", probe.library_version},
                                 {"device_count", probe.device_count},
                                 {"message", probe.message}});
    }
    out["backend"] = discovery.backend
                         ? nlohmann::json(std::string(device::gpu_backend_name(*discovery.backend)))
                         : nlohmann::json(nullptr);
    out["visible_devices"] = {
        {"variable", discovery.visible_devices_variable},
        {"value", discovery.visible_devices_value ? nlohmann::json(*discovery.visible_devices_value)
                                                  : nlohmann::json(nullptr)}};
    out["gpus"] = nlohmann::json::array();
    for (const GpuRow& row : rows) {
      out["gpus"].push_back({{"index", row.index},
                             {"physical_index", row.physical_index},
                             {"name", row.name},
                             {"uuid", row.uuid},
                             {"backend", row.backend},
                             {"pci_bus_id", row.pci_bus_id},
                             {"architecture", row.architecture},
                             {"power_limit_min_w", optional_json(row.min_w)},
                             {"power_limit_max_w", optional_json(row.max_w)},
                             {"power_limit_w", optional_json(row.current_w)},
                             {"default_power_limit_w", optional_json(row.default_w)},
                             {"energy_counter", row.energy_counter},
                             {"counter_refresh_s", optional_json(row.counter_refresh_s)},
                             {"counter_refresh", row.counter_refresh},
                             {"can_set_power_limit", row.can_set_power_limit},
                             {"power_scope", row.power_scope},
                             {"energy_scope", row.energy_scope},
                             {"problems", row.problems}});
    }
    out["gpu_message"] = discovery.message;
    out["cpus"] = nlohmann::json::array();
    for (const auto& cpu : cpus.cpus) {
      out["cpus"].push_back(
          {{"index", cpu->index()}, {"name", cpu->name()}, {"dram", cpu->has_dram()}});
    }
    out["rapl"] = {
        {"root", cpus.root.string()}, {"available", cpus.available}, {"message", cpus.message}};
    out["soc"] = soc_json(soc, rails);
    out["sys_admin"] = sys_admin;
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }

  std::cout << "zeus " << ZEUS_VERSION_STRING << "\n\nGPU backends (tried in order):\n";
  for (const device::BackendProbe& probe : discovery.probes) {
    std::string detail;
    if (probe.loaded) {
      detail =
          fmt::format("loaded {}{}{}, {} GPU(s)",
                      probe.library_path.empty() ? "(built in)" : probe.library_path,
                      probe.driver_version.empty() ? "" : ", driver " + probe.driver_version,
                      probe.library_version.empty() ? "" : ", library " + probe.library_version,
                      probe.device_count);
      if (!probe.message.empty()) {
        detail += "; " + probe.message;
      }
    } else {
      detail = "not available: " + probe.message;
    }
    std::cout << fmt::format("  {:<10} {}\n", probe.backend, detail);
  }
  std::cout << "\n";
  if (discovery.backend) {
    std::cout << fmt::format(
        "GPUs ({} visible, {}={}):\n", rows.size(), discovery.visible_devices_variable,
        discovery.visible_devices_value ? "\"" + *discovery.visible_devices_value + "\"" : "unset");
  }
  if (rows.empty()) {
    std::cout << "  " << discovery.message << "\n";
  } else {
    std::cout << fmt::format("  {:<5} {:<8} {:<24} {:<42} {:<9} {:<20} {:<7} {}\n", "index",
                             "physical", "name", "uuid", "backend", "power limit W (range)",
                             "energy", "may set limits");
    for (const GpuRow& row : rows) {
      std::cout << fmt::format(
          "  {:<5} {:<8} {:<24} {:<42} {:<9} {:<20} {:<7} {}\n", row.index, row.physical_index,
          row.name, row.uuid, row.backend,
          watts(row.current_w) + " (" + watts(row.min_w) + "-" + watts(row.max_w) + ")",
          row.energy_counter ? "yes" : "no",
          row.can_set_power_limit ? "yes"
                                  : "no (needs root or CAP_SYS_ADMIN, or the zeusd daemon)");
      if (row.power_scope != "gpu" || row.energy_scope != "gpu") {
        std::cout << fmt::format(
            "        measures: power {}, energy {} (module = GPU + CPU + memory of the "
            "superchip)\n",
            row.power_scope, row.energy_scope);
      }
      if (!row.counter_refresh.empty()) {
        std::cout << "        energy counter refresh: " << row.counter_refresh << "\n";
      }
      for (const std::string& problem : row.problems) {
        std::cout << "        ! " << problem << "\n";
      }
    }
  }
  std::cout << fmt::format("\nCPUs (RAPL under {}):\n", cpus.root.string());
  if (cpus.cpus.empty()) {
    std::cout << "  " << cpus.message << "\n";
  } else {
    if (!cpus.available) {
      std::cout << "  " << cpus.message << "\n";
    }
    for (const auto& cpu : cpus.cpus) {
      std::cout << fmt::format("  {:<5} {:<12} DRAM {}\n", cpu->index(), cpu->name(),
                               cpu->has_dram() ? "yes" : "no");
    }
  }
  print_soc(soc, rails);
  return kExitOk;
}

}  // namespace

void add_show_env(CLI::App& app, Action& action) {
  CLI::App* command =
      app.add_subcommand("show-env",
                         "Show the GPU and CPU backends zeus finds, every GPU and CPU package, a "
                         "Jetson's power rails, and whether this process may change power limits");
  auto as_json = std::make_shared<bool>(false);
  auto powercap_root = std::make_shared<std::string>();
  auto no_probe = std::make_shared<bool>(false);
  command->add_flag("--json", *as_json, "Print one JSON object instead of text");
  command->add_flag("--no-probe", *no_probe,
                    "Do not measure each GPU's energy counter refresh period (about a second)");
  command->add_option("--powercap-root", *powercap_root,
                      "Powercap sysfs root to search for RAPL zones (default /sys/class/powercap)");
  command->callback([&action, as_json, no_probe, powercap_root] {
    action = [as_json, no_probe, powercap_root] {
      return run(*as_json, !*no_probe, *powercap_root);
    };
  });
}

}  // namespace zeus::cli
