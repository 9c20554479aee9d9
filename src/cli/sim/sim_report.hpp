// What `zeus sim` writes: the table on standard output, summary.json and the --out CSV files.
// Kept apart from the command (sim_command.cpp: arguments, running the cells) along that seam.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::cli::sim_report {

constexpr int kLastRecurrences = 10;  // CellSummary's "last 10" columns

struct SimArgs {
  std::string trace_dir;
  std::string arrivals;
  std::string gpu = "all";
  std::string workload = "all";
  std::string policy = "zeus";
  std::string seeds = "1-10";
  double eta = 0.5;
  double beta = 2.0;
  int recurrences = 0;
  int window = 0;
  int threads = 0;
  int max_tries = sim::SimulationConfig{}.max_tries;
  std::string target_metric;  // "X" (one workload) or "dataset=X,..."; empty: the paper's
  std::string drift;          // "AT:best*F", "AT:best/F" or "AT:target=X"; empty: none
  bool as_json = false;
  std::string out;
};

struct Cell {
  sim::CellSummary summary;  // only workload, gpu, policy, seeds and notes when `error` is set
  sim::Oracle oracle;
  std::optional<std::string> error;  // why the simulation of this cell failed
};

// One cell's per-seed history: seed,recurrence,batch_size,power_limit_w,energy_j,time_s,...
std::string history_csv(const sim::CellSummary& summary, const std::vector<std::uint64_t>& seeds);
// Every configuration that reaches the target with its expected time, energy and cost, and
// whether it is Default's, the oracle's and on the time-energy Pareto front.
std::string configurations_csv(const sim::WorkloadTrace& trace, const sim::Oracle& oracle,
                               double eta);
// The JSON object of --json and summary.json.
nlohmann::ordered_json summary_json(const SimArgs& args, const std::vector<std::uint64_t>& seeds,
                                    const std::vector<Cell>& cells, double wall_s);
// The table, its legend, the notes and the errors.
void write_text(std::ostream& out, const SimArgs& args, const std::vector<std::uint64_t>& seeds,
                const std::vector<Cell>& cells, double wall_s);

}  // namespace zeus::cli::sim_report
