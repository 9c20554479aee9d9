#include "cli/sim/sim_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string_view>

#include "zeus/common/error.hpp"

namespace zeus::cli::sim_report {

using json = nlohmann::ordered_json;  // keys in the order written: workload, gpu, policy first

namespace {

json finite_or_null(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json drift_json(const sim::DriftSummary& d) {
  return json{
      {"at_recurrence", d.at_recurrence},
      {"old_oracle_batch_size", d.old_oracle_batch_size},
      {"old_oracle_power_limit_w", d.old_oracle_power_limit_w},
      {"old_oracle_expected_cost", d.old_oracle_expected_cost},
      {"new_oracle_batch_size", d.new_oracle_batch_size},
      {"new_oracle_power_limit_w", d.new_oracle_power_limit_w},
      {"new_oracle_expected_cost", d.new_oracle_expected_cost},
      {"settle_recurrences_mean", finite_or_null(d.settle_recurrences_mean)},
      {"settled_seeds", d.settled_seeds},
      {"unsettled_seeds", d.unsettled_seeds},
      {"regret_after_mean", d.regret_after_mean},
  };
}

json failed_seeds_json(const std::vector<sim::FailedSeed>& failed) {
  json out = json::array();
  for (const sim::FailedSeed& each : failed) {
    out.push_back({{"seed", each.seed}, {"error", each.error}});
  }
  return out;
}

json cell_json(const Cell& cell) {
  const sim::CellSummary& s = cell.summary;
  if (cell.error) {
    return json{{"workload", s.workload}, {"gpu", s.gpu},         {"policy", s.policy},
                {"seeds", s.seeds},       {"error", *cell.error}, {"notes", s.notes}};
  }
  return json{
      {"workload", s.workload},
      {"gpu", s.gpu},
      {"policy", s.policy},
      {"seeds", s.seeds},
      {"recurrences", s.recurrences},
      {"energy_saving_pct_mean", s.energy_saving_pct_mean},
      {"energy_saving_pct_std", s.energy_saving_pct_std},
      {"energy_saving_last10_pct_mean", s.energy_saving_last10_pct_mean},
      {"energy_saving_last10_pct_std", s.energy_saving_last10_pct_std},
      {"time_saving_pct_mean", s.time_saving_pct_mean},
      {"time_saving_pct_std", s.time_saving_pct_std},
      {"time_saving_last10_pct_mean", s.time_saving_last10_pct_mean},
      {"time_saving_last10_pct_std", s.time_saving_last10_pct_std},
      {"cost_saving_pct_mean", s.cost_saving_pct_mean},
      {"cost_saving_pct_std", s.cost_saving_pct_std},
      {"cum_regret_mean", s.cum_regret_mean},
      {"cum_regret_std", s.cum_regret_std},
      {"oracle_batch_size", s.oracle_batch_size},
      {"oracle_power_limit_w", s.oracle_power_limit_w},
      {"oracle_expected_cost", cell.oracle.expected_cost},
      {"oracle_expected_energy_j", cell.oracle.expected_energy_j},
      {"oracle_expected_time_s", cell.oracle.expected_time_s},
      {"target_metric", s.target_metric},
      {"final_batch_size", s.final_batch_size},
      {"final_power_limit_w", s.final_power_limit_w},
      {"final_expected_cost", finite_or_null(s.final_expected_cost)},
      {"final_expected_cost_mean", finite_or_null(s.final_expected_cost_mean)},
      {"final_matches_oracle_pct", s.final_matches_oracle_pct},
      {"failed_runs_mean", s.failed_runs_mean},
      {"drift", s.drift ? drift_json(*s.drift) : json(nullptr)},
      {"failed_seeds", failed_seeds_json(s.failed_seeds)},
      {"notes", s.notes},
  };
}

// Cost is eta * energy + (1 - eta) * MaxPower * time: joules either way.
std::string format_cost(double cost) {
  const double magnitude = std::fabs(cost);
  if (magnitude >= 1e9) {
    return fmt::format("{:.2f} GJ", cost / 1e9);
  }
  if (magnitude >= 1e6) {
    return fmt::format("{:.2f} MJ", cost / 1e6);
  }
  if (magnitude >= 1e3) {
    return fmt::format("{:.2f} kJ", cost / 1e3);
  }
  if (magnitude < 0.5) {
    return "0 J";  // not "-0 J"
  }
  return fmt::format("{:.0f} J", cost);
}

std::string mean_std(double mean, double std_dev) {
  return fmt::format("{:.1f} ± {:.1f}", mean, std_dev);
}

// Display columns of UTF-8 text (every character here is one column wide).
std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

// A table whose first `left_columns` columns are left-aligned and the others right-aligned. A row
// shorter than the longest one ends with text that spans the remaining columns.
class Table {
 public:
  explicit Table(std::size_t left_columns) : left_columns_(left_columns) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void write(std::ostream& out) const {
    std::size_t columns = 0;
    for (const auto& row : rows_) {
      columns = std::max(columns, row.size());
    }
    std::vector<std::size_t> widths(columns, 0);
    for (const auto& row : rows_) {
      for (std::size_t i = 0; i < row.size(); ++i) {
        if (row.size() == columns || i + 1 < row.size()) {  // spanning text widens nothing
          widths[i] = std::max(widths[i], display_width(row[i]));
        }
      }
    }
    for (const auto& row : rows_) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        const bool last = i + 1 == row.size();
        const bool spanning = last && row.size() < columns;
        const std::size_t width = spanning ? 0 : widths[i];
        const std::string padding(width - std::min(width, display_width(row[i])), ' ');
        line += i < left_columns_ || spanning ? row[i] + (last ? std::string() : padding)
                                              : padding + row[i];
        line += last ? "" : "  ";
      }
      out << " " << line << "\n";
    }
  }

 private:
  std::size_t left_columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string seeds_text(const std::vector<std::uint64_t>& seeds, const std::string& spec) {
  return fmt::format("{} seed{} ({})", seeds.size(), seeds.size() == 1 ? "" : "s", spec);
}

// The drift table: per cell, the oracle before and after, and how soon the policy settled.
void write_drift(std::ostream& out, const SimArgs& args, const std::vector<Cell>& cells) {
  if (args.drift.empty()) {
    return;
  }
  out << fmt::format("\n Drift {}:\n\n", args.drift);
  Table table(3);
  table.add({"workload", "gpu", "policy", "oracle before", "oracle after", "settled after",
             "never settled", "regret after"});
  for (const Cell& cell : cells) {
    const sim::CellSummary& s = cell.summary;
    if (cell.error || !s.drift) {
      continue;
    }
    const sim::DriftSummary& d = *s.drift;
    table.add({s.workload, s.gpu, s.policy,
               fmt::format("{}, {}", d.old_oracle_batch_size, d.old_oracle_power_limit_w),
               fmt::format("{}, {}", d.new_oracle_batch_size, d.new_oracle_power_limit_w),
               std::isfinite(d.settle_recurrences_mean)
                   ? fmt::format("{:.1f}", d.settle_recurrences_mean)
                   : std::string("-"),
               fmt::format("{}/{}", d.unsettled_seeds, s.seeds), format_cost(d.regret_after_mean)});
  }
  table.write(out);
  out << fmt::format(
      "\n The oracle changes at recurrence {}; regret after it is against the new oracle (the\n"
      " main table's oracle is the new one). settled after: recurrences from the drift until the\n"
      " policy uses the new oracle's batch size and does so in at least {} of {} recurrences,\n"
      " mean over the seeds that settled; never settled: seeds that did not within the run.\n",
      cells.empty() || !cells.front().summary.drift ? 0
                                                    : cells.front().summary.drift->at_recurrence,
      sim::kSettleMatches, sim::kSettleWindow);
}

}  // namespace

std::string history_csv(const sim::CellSummary& summary, const std::vector<std::uint64_t>& seeds) {
  if (summary.runs.size() != seeds.size()) {
    throw Error(ErrorKind::kUnknown,
                fmt::format("the simulator returned {} histories for {} seeds ({}/{}/{})",
                            summary.runs.size(), seeds.size(), summary.workload, summary.gpu,
                            summary.policy));
  }
  std::string csv =
      "seed,recurrence,batch_size,power_limit_w,energy_j,time_s,cost,tries,profiled\n";
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    for (const sim::RecurrenceRecord& record : summary.runs[i].history) {
      fmt::format_to(std::back_inserter(csv), "{},{},{},{},{},{},{},{},{}\n", seeds[i],
                     record.recurrence, record.batch_size, record.power_limit_w, record.energy_j,
                     record.time_s, record.cost, record.tries, record.profiled ? 1 : 0);
    }
  }
  return csv;
}

// Every (batch size, power limit) that reaches the target, with its expected time, energy and
// cost per recurrence, and whether it is Default's, the oracle's, and on the time-energy Pareto
// front (no other configuration is at least as good in both and better in one).
std::string configurations_csv(const sim::WorkloadTrace& trace, const sim::Oracle& oracle,
                               double eta) {
  struct Row {
    int batch_size;
    int power_limit_w;
    sim::Oracle expected;
  };
  std::vector<Row> rows;
  for (const sim::BatchSizeTrace& batch : trace.batch_sizes) {
    for (const sim::PowerPoint& point : batch.power) {
      try {
        rows.push_back({batch.batch_size, point.power_limit_w,
                        sim::expected_fixed(trace, batch.batch_size, point.power_limit_w, eta)});
      } catch (const Error&) {
        // never reaches the target: not a configuration one can run
      }
    }
  }
  const int default_limit_w = trace.power_limits_w.empty() ? 0 : trace.power_limits_w.back();
  std::string csv = "batch_size,power_limit_w,time_s,energy_j,cost,default,oracle,pareto\n";
  for (const Row& row : rows) {
    const bool dominated = std::any_of(rows.begin(), rows.end(), [&](const Row& other) {
      const auto& a = other.expected;
      const auto& b = row.expected;
      return a.expected_time_s <= b.expected_time_s && a.expected_energy_j <= b.expected_energy_j &&
             (a.expected_time_s < b.expected_time_s || a.expected_energy_j < b.expected_energy_j);
    });
    fmt::format_to(
        std::back_inserter(csv), "{},{},{},{},{},{},{},{}\n", row.batch_size, row.power_limit_w,
        row.expected.expected_time_s, row.expected.expected_energy_j, row.expected.expected_cost,
        row.batch_size == trace.workload.default_batch_size && row.power_limit_w == default_limit_w
            ? 1
            : 0,
        row.batch_size == oracle.batch_size && row.power_limit_w == oracle.power_limit_w ? 1 : 0,
        dominated ? 0 : 1);
  }
  return csv;
}

json summary_json(const SimArgs& args, const std::vector<std::uint64_t>& seeds,
                  const std::vector<Cell>& cells, double wall_s) {
  json out{
      {"source", args.trace_dir.empty() ? std::string("builtin") : args.trace_dir},
      {"eta", args.eta},
      {"beta", args.beta},
      {"recurrences", args.recurrences},
      {"arrivals", args.arrivals.empty() ? json(nullptr) : json(args.arrivals)},
      {"window_size", args.window},
      {"max_tries", args.max_tries},
      {"drift", args.drift.empty() ? json(nullptr) : json(args.drift)},
      {"seed_list", seeds},
      {"cells", json::array()},
      {"wall_s", wall_s},
  };
  for (const Cell& cell : cells) {
    out["cells"].push_back(cell_json(cell));
  }
  return out;
}

void write_text(std::ostream& out, const SimArgs& args, const std::vector<std::uint64_t>& seeds,
                const std::vector<Cell>& cells, double wall_s) {
  out << fmt::format(
      "\n Simulated recurring jobs on {}\n {}, eta {:g}, beta {:g}, {}{}; savings are relative "
      "to the Default policy\n (b0 at the maximum power limit) on the same seeds, mean ± std over "
      "seeds.\n\n",
      args.trace_dir.empty() ? std::string("the built-in workload models")
                             : fmt::format("the traces in \"{}\"", args.trace_dir),
      seeds_text(seeds, args.seeds), args.eta, args.beta,
      !args.arrivals.empty()
          ? fmt::format("concurrent submissions replayed from \"{}\"", args.arrivals)
          : (args.recurrences == 0 ? std::string("2 x |B| x |P| recurrences")
                                   : fmt::format("{} recurrences", args.recurrences)),
      args.window == 0 ? std::string() : fmt::format(", window {}", args.window));
  // The targets that are not the paper's, once per workload.
  std::vector<std::string> targets;
  for (const Cell& cell : cells) {
    const sim::CellSummary& s = cell.summary;
    const double paper = sim::paper_workload(s.workload).target_metric;
    const std::string text =
        fmt::format("{} {:g} (the paper's: {:g})", s.workload, s.target_metric, paper);
    if (s.target_metric != paper &&
        std::find(targets.begin(), targets.end(), text) == targets.end()) {
      targets.push_back(text);
    }
  }
  if (!targets.empty()) {
    out << fmt::format(" Target metric: {}.\n\n", fmt::join(targets, ", "));
  }
  Table table(3);
  table.add({"workload", "gpu", "policy", "rec", "energy saved %", "last 10", "time saved %",
             "cost saved %", "regret", "final bs,W", "oracle bs,W", "=oracle %", "failed"});
  for (const Cell& cell : cells) {
    const sim::CellSummary& s = cell.summary;
    if (cell.error) {
      table.add({s.workload, s.gpu, s.policy, "failed: see the errors below"});
      continue;
    }
    table.add({s.workload, s.gpu, s.policy, std::to_string(s.recurrences),
               mean_std(s.energy_saving_pct_mean, s.energy_saving_pct_std),
               mean_std(s.energy_saving_last10_pct_mean, s.energy_saving_last10_pct_std),
               mean_std(s.time_saving_pct_mean, s.time_saving_pct_std),
               mean_std(s.cost_saving_pct_mean, s.cost_saving_pct_std),
               format_cost(s.cum_regret_mean),
               fmt::format("{}, {}", s.final_batch_size, s.final_power_limit_w),
               fmt::format("{}, {}", s.oracle_batch_size, s.oracle_power_limit_w),
               fmt::format("{:.0f}", s.final_matches_oracle_pct),
               fmt::format("{:.2f}", s.failed_runs_mean)});
  }
  table.write(out);
  out << fmt::format(
      "\n rec: recurrences per seed. last 10: energy saved % over the last {} recurrences.\n"
      " regret: cumulative cost above the oracle's expected cost, where cost = eta x energy +\n"
      "   (1 - eta) x MaxPower x time.\n"
      " final: the (batch size, power limit W) chosen most over the last {} recurrences, the most\n"
      "   common over seeds. =oracle %: seeds whose final batch size is the oracle's.\n"
      " failed: runs per seed that did not reach the target (early-stopped or never converged).\n",
      kLastRecurrences, kLastRecurrences);
  write_drift(out, args, cells);
  std::vector<std::string> printed;
  for (const Cell& cell : cells) {
    for (const std::string& note : cell.summary.notes) {
      const std::string line =
          fmt::format("   {}/{}: {}", cell.summary.workload, cell.summary.gpu, note);
      if (std::find(printed.begin(), printed.end(), line) != printed.end()) {
        continue;  // trace notes repeat for every policy of a (workload, GPU)
      }
      out << (printed.empty() ? "\n Notes:\n" : "") << line << "\n";
      printed.push_back(line);
    }
  }
  bool any_failed_seed = false;
  for (const Cell& cell : cells) {
    const sim::CellSummary& s = cell.summary;
    if (cell.error || s.failed_seeds.empty()) {
      continue;
    }
    std::vector<std::uint64_t> failed;
    for (const sim::FailedSeed& each : s.failed_seeds) {
      failed.push_back(each.seed);
    }
    out << (any_failed_seed ? "" : "\n Failed seeds (the cell's figures are the other seeds'):\n")
        << fmt::format("   {}/{}/{}: {} of {} (seeds {}); seed {}: {}\n", s.workload, s.gpu,
                       s.policy, failed.size(), s.seeds, fmt::join(failed, ", "), failed.front(),
                       s.failed_seeds.front().error);
    any_failed_seed = true;
  }
  bool any_error = false;
  for (const Cell& cell : cells) {
    if (cell.error) {
      out << (any_error ? "" : "\n Errors:\n")
          << fmt::format("   {}/{}/{}: {}\n", cell.summary.workload, cell.summary.gpu,
                         cell.summary.policy, *cell.error);
      any_error = true;
    }
  }
  out << fmt::format("\n Wall time: {:.2f} s\n\n", wall_s);
}

}  // namespace zeus::cli::sim_report
