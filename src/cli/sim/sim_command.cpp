// `zeus sim`: the trace-driven simulator over (workload, GPU, policy) cells, with many seeds each,
// compared with the Default policy on the same seeds.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "cli/commands.hpp"
#include "cli/progress_bar.hpp"
#include "cli/sim/sim_args.hpp"
#include "cli/sim/sim_report.hpp"
#include "common/csv.hpp"
#include "common/output_file.hpp"
#include "common/text.hpp"
#include "sim/limits.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // keys in the order written: workload, gpu, policy first
using sim::PolicyKind;
using sim_args::DriftSpec;
using sim_args::parse_drift;
using sim_args::parse_seeds;
using sim_args::parse_target_metrics;
using sim_args::select_names;
using sim_report::Cell;
using sim_report::configurations_csv;
using sim_report::history_csv;
using sim_report::SimArgs;
using sim_report::summary_json;
using sim_report::write_text;

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const sim::Workload& workload : sim::paper_workloads()) {
    names.push_back(workload.dataset);
  }
  return names;
}

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const PolicyKind& policy : sim::all_policies()) {
    names.emplace_back(sim::policy_name(policy));
  }
  return names;
}

void check_args(const SimArgs& args) {
  if (!(args.eta >= 0.0 && args.eta <= 1.0)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("--eta {} is outside [0, 1] (0 optimizes time only, 1 energy only)", args.eta));
  }
  if (!std::isfinite(args.beta)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("--beta {} is not a finite number (<= 0 disables early stopping)", args.beta));
  }
  if (args.recurrences < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--recurrences {} is negative (0 means the default, 2 x batch sizes "
                            "x power limits)",
                            args.recurrences));
  }
  if (args.recurrences > sim::limits::kMaxRecurrences) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--recurrences {} is above the limit of {} (every recurrence of every "
                            "seed is kept in memory until its cell is done)",
                            args.recurrences, sim::limits::kMaxRecurrences));
  }
  if (args.window < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--window {} is negative (0 means every observation)", args.window));
  }
  if (args.window > sim::limits::kMaxWindow) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--window {} is above the limit of {} observations (0 means every "
                            "observation)",
                            args.window, sim::limits::kMaxWindow));
  }
  if (args.max_tries < 1 || args.max_tries > sim::limits::kMaxTries) {
    throw Error(ErrorKind::kInvalidArgument, fmt::format("--max-tries {} must be between 1 and {}",
                                                         args.max_tries, sim::limits::kMaxTries));
  }
  if (args.threads < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--threads {} is negative (0 means every core)", args.threads));
  }
  if (args.threads > sim::limits::kMaxThreads) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--threads {} is above the limit of {} (0 means every core)",
                            args.threads, sim::limits::kMaxThreads));
  }
}

// Every cell keeps each seed's history until it is done: refuse, before anything runs, a run
// whose histories would not fit (sim::run_cell checks the same for the default recurrences).
void check_cell_size(std::size_t seeds, std::size_t recurrences, std::string_view what) {
  if (recurrences > sim::limits::kMaxRecordsPerCell / std::max<std::size_t>(seeds, 1)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{} seeds x {} {} is above the limit of {} recurrences per cell (each "
                            "seed's history is kept in memory, about {} bytes per recurrence); "
                            "use fewer seeds or recurrences",
                            seeds, recurrences, what, sim::limits::kMaxRecordsPerCell,
                            sizeof(sim::RecurrenceRecord)));
  }
}

void check_trace_dir(const std::string& trace_dir) {
  std::error_code error;
  const fs::file_status status = fs::status(trace_dir, error);
  if (!fs::exists(status)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--trace-dir \"{}\" does not exist; it should hold the reference's "
                            "summary_train.csv and summary_power_<gpu>.csv files",
                            trace_dir));
  }
  if (!fs::is_directory(status)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--trace-dir \"{}\" is not a directory", trace_dir));
  }
}

// Creates `out` before anything runs, so that a bad --out fails at once, not after the simulation.
void prepare_out_dir(const std::string& out) {
  std::error_code error;
  if (fs::exists(out, error) && !fs::is_directory(out, error)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--out \"{}\" exists and is not a directory", out));
  }
  fs::create_directories(out, error);
  if (error) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--out \"{}\": cannot create the directory: {}", out, error.message()));
  }
  if (access(out.c_str(), W_OK | X_OK) != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--out \"{}\": cannot write there: {}", out, std::strerror(errno)));
  }
}

// Each result file is put in place whole (docs/cli.md, "Input and output files").
void write_file(const fs::path& path, const std::string& content) {
  OutputFileOptions options;
  options.what = "--out";
  write_output_file(path, content, std::move(options));
}

std::vector<std::string> merged_notes(const std::vector<std::string>& first,
                                      const std::vector<std::string>& second) {
  std::vector<std::string> notes = first;
  for (const std::string& note : second) {
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) {
      notes.push_back(note);
    }
  }
  return notes;
}

int run(const SimArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  // Every argument is checked before anything runs.
  check_args(args);
  const std::vector<std::string> gpus = select_names(args.gpu, sim::trace_gpus(), "--gpu", "GPU");
  const std::vector<std::string> workloads =
      select_names(args.workload, workload_names(), "--workload", "workload");
  std::vector<PolicyKind> policies;
  for (const std::string& name : select_names(args.policy, policy_names(), "--policy", "policy")) {
    policies.push_back(sim::parse_policy(name));
  }
  const std::vector<std::optional<double>> targets =
      parse_target_metrics(args.target_metric, workloads);
  const std::vector<std::uint64_t> seeds = parse_seeds(args.seeds);
  check_cell_size(seeds.size(), static_cast<std::size_t>(args.recurrences), "--recurrences");
  if (!args.trace_dir.empty()) {
    check_trace_dir(args.trace_dir);
  }
  if (!args.out.empty()) {
    prepare_out_dir(args.out);
  }

  sim::SimulationConfig config;
  config.eta = args.eta;
  config.beta = args.beta;
  config.recurrences = args.recurrences;
  config.window_size = args.window;
  config.max_tries = args.max_tries;
  if (!args.arrivals.empty()) {
    config.arrivals = sim::load_arrivals(args.arrivals);
    check_cell_size(seeds.size(), config.arrivals.size(), "jobs in --arrivals");
  }
  std::optional<DriftSpec> drift;
  if (!args.drift.empty()) {
    drift = parse_drift(args.drift);
    if (!args.arrivals.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--drift applies to sequential recurrences; it cannot be combined with "
                  "--arrivals");
    }
    if (drift->target_metric && workloads.size() != 1) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--drift {}: a target metric is one workload's; select one with "
                              "--workload",
                              args.drift));
    }
    if (args.recurrences > 0 && drift->at_recurrence >= args.recurrences) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--drift {}: the drift's recurrence must be between 1 and {} (the "
                              "--recurrences {} are numbered from 0)",
                              args.drift, args.recurrences - 1, args.recurrences));
    }
    if (drift->best_batch_size_factor && !args.trace_dir.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--drift {}: best*F and best/F move the built-in models' best batch "
                              "size, which trace files do not have; with --trace-dir, drift the "
                              "target instead (AT:target=X, a target the traces record), or "
                              "leave out --trace-dir",
                              args.drift));
    }
  }

  // A trace directory that lacks a file is the user's mistake too: a usage error, like a
  // malformed file (which the library reports as kInvalidArgument with file and line).
  const auto as_usage_error = [&](const auto& load) {
    try {
      return load();
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::kNotFound) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("--trace-dir \"{}\": {}", args.trace_dir, error.what()));
      }
      throw;
    }
  };
  std::optional<sim::TraceDirectory> trace_directory;
  if (!args.trace_dir.empty()) {
    trace_directory.emplace(
        as_usage_error([&] { return sim::TraceDirectory(fs::path(args.trace_dir)); }));
  }

  const std::size_t total_cells = workloads.size() * gpus.size() * policies.size();
  ProgressBar progress;
  std::vector<Cell> cells;
  for (std::size_t w = 0; w < workloads.size(); ++w) {
    const std::string& workload_name = workloads[w];
    sim::Workload workload = sim::paper_workload(workload_name);
    if (targets[w]) {
      workload.target_metric = *targets[w];
    }
    for (const std::string& gpu : gpus) {
      const sim::WorkloadTrace trace =
          trace_directory ? as_usage_error([&] { return trace_directory->load(gpu, workload); })
                          : sim::builtin_trace(gpu, workload);
      sim::SimulationConfig cell_config = config;
      // A drift this (workload, GPU) cannot take (e.g. its b0 misses the target after it) fails
      // its cells only, as a cell that exceeds --max-tries does: --workload all still runs.
      std::optional<std::string> drift_error;
      if (drift) {
        sim::Workload after = workload;
        if (drift->target_metric) {
          after.target_metric = *drift->target_metric;
        }
        const sim::ConvergenceShift shift{drift->best_batch_size_factor.value_or(1.0)};
        // recurrences 0 means 2 x |batch sizes| x |power limits| (SimulationConfig).
        const int recurrences = args.recurrences > 0
                                    ? args.recurrences
                                    : 2 * static_cast<int>(trace.batch_sizes.size()) *
                                          static_cast<int>(trace.power_limits_w.size());
        try {
          cell_config.drift =
              sim::Drift{drift->at_recurrence,
                         std::make_shared<const sim::WorkloadTrace>(
                             trace_directory
                                 ? as_usage_error([&] { return trace_directory->load(gpu, after); })
                                 : sim::builtin_trace(gpu, after, shift))};
          sim::check_drift(trace, *cell_config.drift, recurrences);
        } catch (const Error& error) {
          drift_error = fmt::format("--drift {}: {}", args.drift, error.what());
          cell_config.drift.reset();
        }
      }
      const sim::Oracle oracle =
          sim::compute_oracle(cell_config.drift ? *cell_config.drift->trace : trace, config.eta);
      if (!args.out.empty()) {
        write_file(fs::path(args.out) / fmt::format("configurations_{}_{}.csv", workload_name, gpu),
                   configurations_csv(trace, sim::compute_oracle(trace, config.eta), config.eta));
      }
      for (const PolicyKind& policy : policies) {
        progress.show(cells.size(), total_cells,
                      fmt::format("{}/{} cells  {:.1f} s  {}/{}/{}", cells.size(), total_cells,
                                  elapsed_s(), workload_name, gpu, sim::policy_name(policy)));
        Cell cell;
        try {
          if (drift_error) {
            throw Error(ErrorKind::kInvalidArgument, *drift_error);
          }
          cell.summary =
              sim::run_cell(trace, policy, cell_config, seeds, static_cast<unsigned>(args.threads));
        } catch (const Error& error) {
          // One cell that cannot be simulated (e.g. a policy that exceeds --max-tries) does not
          // stop the others; it is reported with its error and the exit code is 1.
          cell.error = error.what();
          cell.summary.workload = workload_name;
          cell.summary.gpu = gpu;
          cell.summary.policy = std::string(sim::policy_name(policy));
          cell.summary.seeds = static_cast<int>(seeds.size());
          cell.summary.target_metric = workload.target_metric;
        }
        cell.summary.notes = merged_notes(trace.notes, cell.summary.notes);
        cell.oracle = oracle;
        if (!args.out.empty() && !cell.error) {
          write_file(fs::path(args.out) /
                         fmt::format("{}_{}_{}.csv", workload_name, gpu, sim::policy_name(policy)),
                     history_csv(cell.summary, seeds));
        }
        cell.summary.runs.clear();  // the histories are written; keep memory flat
        cells.push_back(std::move(cell));
      }
    }
  }
  progress.clear();

  const double wall_s = elapsed_s();
  const json summary = summary_json(args, seeds, cells, wall_s);
  if (!args.out.empty()) {
    write_file(fs::path(args.out) / "summary.json", summary.dump(2) + "\n");
  }
  if (args.as_json) {
    std::cout << summary.dump(2) << std::endl;
  } else {
    write_text(std::cout, args, seeds, cells, wall_s);
    std::cout.flush();
  }
  const auto failed = std::count_if(cells.begin(), cells.end(),
                                    [](const Cell& cell) { return cell.error.has_value(); });
  std::size_t failed_seeds = 0;
  for (const Cell& cell : cells) {
    failed_seeds += cell.summary.failed_seeds.size();
  }
  if (failed_seeds > 0) {
    std::cerr << fmt::format(
        "zeus: error: {} seeds failed; each cell lists its failed seeds and reports the "
        "others\n",
        failed_seeds);
  }
  if (failed > 0) {
    for (const Cell& cell : cells) {
      if (cell.error) {
        std::cerr << fmt::format("zeus: error: {}/{}/{}: {}\n", cell.summary.workload,
                                 cell.summary.gpu, cell.summary.policy, *cell.error);
      }
    }
    std::cerr << fmt::format("zeus: error: {} of {} cells failed; the others are reported\n",
                             failed, cells.size());
    return kExitError;
  }
  return failed_seeds > 0 ? kExitError : kExitOk;
}

}  // namespace

void add_sim(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "sim",
      "Simulate recurring training jobs under a batch-size/power-limit policy (Zeus, low-regret, "
      "Default, "
      "Grid, Oracle) on the paper's workloads, and report energy and time saved over Default");
  auto args = std::make_shared<SimArgs>();
  command->add_option("--trace-dir", args->trace_dir,
                      "Directory with the reference's trace files (summary_train.csv, "
                      "summary_power_<gpu>.csv); default: the built-in workload models");
  command
      ->add_option("--gpu", args->gpu,
                   "GPU model(s): v100, a40, rtx6000, p100, a comma-separated list, or all")
      ->capture_default_str();
  command
      ->add_option("--workload", args->workload,
                   "Workload(s) by dataset: librispeech, squad, sentiment140, imagenet, "
                   "cifar100, movielens-1m, a comma-separated list, or all")
      ->capture_default_str();
  command
      ->add_option(
          "--policy", args->policy,
          "Policy(ies): zeus, low-regret, default, grid, oracle, a comma-separated list, or all")
      ->capture_default_str();
  command
      ->add_option("--seeds", args->seeds,
                   "Seeds, one simulated recurring job each: e.g. 1-50, 7, 1,2,5-9")
      ->capture_default_str();
  command
      ->add_option("--eta", args->eta,
                   "Energy-time knob in [0, 1]: cost = eta x energy + (1 - eta) x MaxPower x time")
      ->capture_default_str();
  command
      ->add_option("--beta", args->beta,
                   "Early stopping: stop a run whose cost exceeds beta x the best cost so far "
                   "(<= 0 disables it)")
      ->capture_default_str();
  command
      ->add_option("--recurrences", args->recurrences,
                   "Recurrences per seed (0: 2 x batch sizes x power limits)")
      ->capture_default_str();
  command
      ->add_option("--window", args->window,
                   "Thompson Sampling window in observations (0: all observations)")
      ->capture_default_str();
  command
      ->add_option("--max-tries", args->max_tries,
                   "Runs a recurrence may take before its cell fails (runs that miss the target "
                   "are retried)")
      ->capture_default_str();
  command->add_option(
      "--arrivals", args->arrivals,
      "Concurrent-submission mode: replay the jobs of this CSV "
      "(start_time,end_time[,runtime_ratio], seconds) instead of sequential "
      "recurrences; jobs that start while others run use the best batch size known");
  command->add_option(
      "--target-metric", args->target_metric,
      "Override the target metric: a number for the one selected workload, or DATASET=X,... "
      "(trace files: one of the targets they record; built-in models: any target their "
      "learning curves reach)");
  command->add_option(
      "--drift", args->drift,
      "Drift scenario AT:HOW: from recurrence AT (0-based) on, best*F / best/F moves the built-in "
      "models' best batch size by the factor F, target=X makes the target metric X; reports how "
      "many recurrences each policy takes to settle on the new oracle's batch size");
  command->add_option("--threads", args->threads, "Worker threads (0: every core)")
      ->capture_default_str();
  command->add_flag("--json", args->as_json, "Print one JSON object instead of the table");
  command->add_option("--out", args->out,
                      "Write each cell's per-recurrence history "
                      "(<workload>_<gpu>_<policy>.csv), each (workload, GPU)'s configurations "
                      "(configurations_<workload>_<gpu>.csv) and summary.json to this directory");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
