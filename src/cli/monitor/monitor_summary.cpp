// `zeus monitor`'s summary: a table of energy per device, or one JSON object (monitor_command.hpp).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "cli/arguments.hpp"
#include "cli/monitor/monitor_command.hpp"
#include "zeus/common/error.hpp"

namespace zeus::cli::monitor_command {
namespace {

std::string gpu_name(const device::Gpus& gpus, int index) {
  try {
    return gpus.at(index).name();
  } catch (const Error&) {
    return "?";
  }
}

std::string average_power(double energy_j, double time_s) {
  return time_s > 0.0 ? fmt::format("{:.1f} W", energy_j / time_s) : std::string("- W");
}

std::string outcome_text(const RunOutcome& outcome) {
  std::string text;
  if (outcome.child) {
    text = outcome.child->signal
               ? fmt::format("killed by {}, exit {}", signal_name(*outcome.child->signal),
                             outcome.child->exit_code)
               : fmt::format("exit {}", outcome.child->exit_code);
    if (outcome.limit_reached) {
      text += fmt::format(", sent SIGTERM at the {} time limit", format_duration(*outcome.limit_s));
    }
    if (!outcome.kill_reason.empty()) {
      text += ", " + outcome.kill_reason;
    }
  } else if (outcome.stop_signal) {
    text = fmt::format("interrupted by {}", signal_name(*outcome.stop_signal));
  }
  return text;
}

// With a module-scope GPU (a Grace superchip: GPU + CPU + memory), CPU and DRAM figures of the
// same window are already part of the GPU's: totals leave them out (docs/monitor.md).
bool cpu_in_gpu_energy(const monitor::Measurement& measured) {
  return measured.gpu_energy_includes_cpu() &&
         (!measured.cpu_energy_j.empty() || !measured.dram_energy_j.empty());
}

double combined(const monitor::Measurement& measured, double gpu, double cpu, double dram) {
  return cpu_in_gpu_energy(measured) ? gpu : gpu + cpu + dram;
}

}  // namespace

void write_text_summary(std::ostream& out, const MonitorArgs& args, const Summary& figures,
                        const device::Gpus& gpus, const device::CpuDiscovery& cpus) {
  const monitor::Measurement& measured = figures.measured;
  const RunOutcome& outcome = figures.outcome;
  const std::optional<monitor::CarbonEmissionMeasurement>& carbon = figures.carbon;
  const std::optional<monitor::EnergyCostMeasurement>& cost = figures.cost;
  const std::vector<std::string>& notes = figures.notes;
  const std::string status = outcome_text(outcome);
  if (outcome.child) {
    out << fmt::format("\n Energy of {} ({}), {:.3f} s:\n\n", shell_join(args.command), status,
                       measured.time_s);
  } else {
    out << fmt::format("\n Energy over {:.3f} s{}:\n\n", measured.time_s,
                       status.empty() ? "" : " (" + status + ")");
  }
  // A GPU row ends with its error bound (docs/monitor.md, "Error bounds").
  const auto row = [&](const std::string& label, const std::string& name, double energy_j,
                       std::optional<double> error_j = std::nullopt) {
    out << fmt::format("   {:<7} {:<24} {:>14.3f} J {:>10}{}\n", label, name, energy_j,
                       average_power(energy_j, measured.time_s),
                       error_j ? fmt::format("  ± {:.3f} J", *error_j) : std::string());
  };
  std::size_t rows = 0;
  double total_j = 0.0;
  const monitor::EnergyByIndex errors = measured.gpu_energy_error_j();
  for (const auto& [index, energy_j] : measured.gpu_energy_j) {
    row(fmt::format("GPU {}", index), gpu_name(gpus, index), energy_j,
        errors.contains(index) ? std::optional<double>(errors.at(index)) : std::nullopt);
    total_j += energy_j;
    ++rows;
    if (measured.gpu_energy_scope(index) == device::MeasuredScope::kModule) {
      out << "           module energy: GPU + CPU + memory of its superchip\n";
    }
  }
  const double gpu_total_j = total_j;
  const auto cpu_name = [&](int index) -> std::string {
    for (const auto& cpu : cpus.cpus) {
      if (cpu->index() == index) {
        return cpu->name();
      }
    }
    return "?";
  };
  for (const auto& [index, energy_j] : measured.cpu_energy_j) {
    row(fmt::format("CPU {}", index), cpu_name(index), energy_j);
    total_j += energy_j;
    ++rows;
  }
  for (const auto& [index, energy_j] : measured.dram_energy_j) {
    row(fmt::format("DRAM {}", index), cpu_name(index) + " DRAM", energy_j);
    total_j += energy_j;
    ++rows;
  }
  const bool cpu_in_gpu = cpu_in_gpu_energy(measured);
  if (rows > 1) {
    row("total", cpu_in_gpu ? "(GPU modules only)" : "", cpu_in_gpu ? gpu_total_j : total_j);
  }
  if (rows == 0 && !measured.soc_energy) {
    out << "   (no device measured)\n";
  }
  if (measured.soc_energy) {
    // Rails overlap (the input rail feeds the others): each stands alone, none joins the total.
    out << (rows > 0 ? "\n" : "");
    for (const monitor::RailEnergy& rail : measured.soc_energy->rails) {
      row("SoC", fmt::format("{} ({})", rail.name, device::rail_kind_name(rail.kind)),
          rail.energy_j);
    }
    if (measured.soc_energy->skipped_reads > 0) {
      out << fmt::format(
          "   {} SoC rail read(s) failed; each rail's last power was held over them\n",
          measured.soc_energy->skipped_reads);
    }
  }
  if (carbon) {
    out << fmt::format(
        "\n   carbon  {:.6g} gCO2eq (GPU {:.6g}, CPU {:.6g}, DRAM {:.6g}) at a mean "
        "{:.6g} gCO2eq/kWh\n",
        combined(measured, carbon->gpu_carbon_emission_g.sum(), carbon->cpu_carbon_emission_g.sum(),
                 carbon->dram_carbon_emission_g.sum()),
        carbon->gpu_carbon_emission_g.sum(), carbon->cpu_carbon_emission_g.sum(),
        carbon->dram_carbon_emission_g.sum(), carbon->mean_gco2eq_per_kwh);
  }
  if (cost) {
    const std::string unit = cost->currency.empty() ? "" : " " + cost->currency;
    out << fmt::format(
        "\n   cost    {:.6g}{} (GPU {:.6g}, CPU {:.6g}, DRAM {:.6g}) at a mean {:.6g}{}/kWh\n",
        combined(measured, cost->gpu_energy_cost.sum(), cost->cpu_energy_cost.sum(),
                 cost->dram_energy_cost.sum()),
        unit, cost->gpu_energy_cost.sum(), cost->cpu_energy_cost.sum(),
        cost->dram_energy_cost.sum(), cost->mean_price_per_kwh, unit);
  }
  for (const monitor::CounterPowerCheck& check : figures.cross_checks) {
    out << fmt::format(
        "\n   check   GPU {}: counter {:.3f} J, power {:.3f} J over {:.3f} s: {} ({:.1f}%), trust "
        "the {}\n",
        check.gpu_index, check.counter_energy_j, check.power_energy_j, check.duration_s,
        check.disagrees ? "disagree" : "agree", check.difference * 100.0,
        monitor::trust_name(check.trust));
  }
  if (cpu_in_gpu) {
    out << "\n   note: module-scope GPU energy already includes its superchip's CPU and memory: "
           "the CPU and DRAM figures are part of it, and the totals leave them out\n";
  }
  for (const std::string& note : notes) {
    out << "\n   note: " << note << "\n";
  }
  out << "\n";
}

namespace {

nlohmann::json energy_json(const monitor::EnergyByIndex& energy) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [index, energy_j] : energy) {
    object[std::to_string(index)] = energy_j;
  }
  return object;
}

}  // namespace

void write_json_summary(std::ostream& out, const MonitorArgs& args, const Summary& figures) {
  const monitor::Measurement& measured = figures.measured;
  const RunOutcome& outcome = figures.outcome;
  const std::optional<monitor::CarbonEmissionMeasurement>& carbon = figures.carbon;
  const std::optional<monitor::EnergyCostMeasurement>& cost = figures.cost;
  const std::vector<std::string>& notes = figures.notes;
  nlohmann::json summary;
  summary["command"] =
      args.command.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.command);
  summary["exit_code"] =
      outcome.child ? nlohmann::json(outcome.child->exit_code) : nlohmann::json(nullptr);
  summary["signal"] = outcome.child && outcome.child->signal
                          ? nlohmann::json(signal_name(*outcome.child->signal))
                      : outcome.stop_signal ? nlohmann::json(signal_name(*outcome.stop_signal))
                                            : nlohmann::json(nullptr);
  summary["killed"] = !outcome.kill_reason.empty();
  summary["time_s"] = measured.time_s;
  summary["gpu_energy_j"] = energy_json(measured.gpu_energy_j);
  summary["gpu_energy_error_j"] = energy_json(measured.gpu_energy_error_j());
  summary["cpu_energy_j"] = energy_json(measured.cpu_energy_j);
  summary["dram_energy_j"] = energy_json(measured.dram_energy_j);
  // What each GPU's energy covers ("gpu", "module": GPU + CPU + memory of a superchip).
  nlohmann::json scopes = nlohmann::json::object();
  for (const auto& [index, energy_j] : measured.gpu_energy_j) {
    scopes[std::to_string(index)] = device::measured_scope_name(measured.gpu_energy_scope(index));
  }
  summary["gpu_energy_scope"] = std::move(scopes);
  summary["cpu_energy_in_gpu_energy"] = cpu_in_gpu_energy(measured);
  if (measured.soc_energy) {
    nlohmann::json rails = nlohmann::json::object();
    for (const monitor::RailEnergy& rail : measured.soc_energy->rails) {
      rails[rail.name] = {{"kind", device::rail_kind_name(rail.kind)}, {"energy_j", rail.energy_j}};
    }
    summary["soc"] = {{"rails", std::move(rails)},
                      {"skipped_reads", measured.soc_energy->skipped_reads}};
  }
  if (!args.carbon_intensity.empty()) {
    // null when the provider could not say (a note says why).
    summary["carbon"] = nullptr;
    if (carbon) {
      summary["carbon"] = {{"gco2eq", combined(measured, carbon->gpu_carbon_emission_g.sum(),
                                               carbon->cpu_carbon_emission_g.sum(),
                                               carbon->dram_carbon_emission_g.sum())},
                           {"mean_gco2eq_per_kwh", carbon->mean_gco2eq_per_kwh},
                           {"gpu_gco2eq", energy_json(carbon->gpu_carbon_emission_g)},
                           {"cpu_gco2eq", energy_json(carbon->cpu_carbon_emission_g)},
                           {"dram_gco2eq", energy_json(carbon->dram_carbon_emission_g)}};
    }
  }
  if (!args.price.empty()) {
    summary["cost"] = nullptr;
    if (cost) {
      summary["cost"] = {
          {"total", combined(measured, cost->gpu_energy_cost.sum(), cost->cpu_energy_cost.sum(),
                             cost->dram_energy_cost.sum())},
          {"currency",
           cost->currency.empty() ? nlohmann::json(nullptr) : nlohmann::json(cost->currency)},
          {"mean_price_per_kwh", cost->mean_price_per_kwh},
          {"gpu", energy_json(cost->gpu_energy_cost)},
          {"cpu", energy_json(cost->cpu_energy_cost)},
          {"dram", energy_json(cost->dram_energy_cost)}};
    }
  }
  if (args.cross_check) {
    nlohmann::json checks = nlohmann::json::array();
    for (const monitor::CounterPowerCheck& check : figures.cross_checks) {
      checks.push_back({{"gpu", check.gpu_index},
                        {"duration_s", check.duration_s},
                        {"counter_energy_j", check.counter_energy_j},
                        {"power_energy_j", check.power_energy_j},
                        {"power_samples", check.power_samples},
                        {"difference", check.difference},
                        {"disagrees", check.disagrees},
                        {"trust", monitor::trust_name(check.trust)},
                        {"reason", check.reason}});
    }
    summary["cross_check"] = std::move(checks);
  }
  summary["notes"] = notes;
  if (!outcome.kill_reason.empty()) {
    summary["notes"].push_back("zeus " + outcome.kill_reason);
  }
  out << summary.dump(2) << "\n";
}

}  // namespace zeus::cli::monitor_command
