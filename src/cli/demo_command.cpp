// `zeus demo`: a recurring training job end to end on simulated GPUs, in virtual time, through
// the real pieces: a `zeus bso serve` child process (SQLite in a temporary directory), the C++
// batch-size-optimizer client, the just-in-time power-limit optimizer and ZeusMonitor. The job's
// epoch time, power draw and epochs to target come from the built-in workload models
// (docs/workload-models.md); time advances on a ManualClock. See docs/demo.md.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "cli/commands.hpp"
#include "common/log.hpp"
#include "common/process.hpp"
#include "common/signals.hpp"
#include "common/temp_dir.hpp"
#include "common/text.hpp"
#include "http/client.hpp"
#include "sim/limits.hpp"
#include "sim/scenario.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/outside_services.hpp"
#include "zeus/optimizer/rng.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct DemoArgs {
  int recurrences = 40;
  std::string workload = "librispeech";
  int gpus = 1;
  std::string gpu_model = "v100";
  double eta = 0.5;
  double beta = 2.0;
  std::uint64_t seed = 1;
  int max_tries = 20;
  bool keep_db = false;
  bool as_json = false;
  std::string server;  // an already running server instead of a child process
};

// ---- The server child process ----

// The server's log or port file; empty when it cannot be read (yet): it is only polled or quoted.
std::string read_text(const fs::path& path) {
  try {
    return text::read_file(path);
  } catch (const Error&) {
    return {};
  }
}

std::string tail_lines(const std::string& text, std::size_t count) {
  std::size_t start = text.size();
  for (std::size_t seen = 0; start > 0 && seen <= count;) {
    --start;
    if (text[start] == '\n' && start + 1 < text.size()) {
      ++seen;
    }
  }
  return text.substr(start == 0 ? 0 : start + 1);
}

// `zeus bso serve` as a child: this executable, its output in DIR/server.log, stopped with
// SIGTERM (and killed if it does not stop) when this object goes, and by the kernel if this
// process dies first.
class ServerProcess {
 public:
  ServerProcess(const fs::path& dir, const std::string& db_url)
      : log_path_(dir / "server.log"), port_path_(dir / "server.port") {
    std::error_code error;
    const fs::path exe = fs::read_symlink("/proc/self/exe", error);
    if (error) {
      throw Error(ErrorKind::kOperatingSystem,
                  "cannot find this executable (/proc/self/exe): " + error.message());
    }
    const std::vector<std::string> args = {exe.string(),
                                           "bso",
                                           "serve",
                                           "--db",
                                           db_url,
                                           "--host",
                                           "127.0.0.1",
                                           "--port",
                                           "0",
                                           "--port-file",
                                           port_path_.string(),
                                           "--threads",
                                           "8"};
    command_ = fmt::format("{}", fmt::join(args, " "));
    // Its own process group: Ctrl-C reaches the demo only, which then stops the server.
    auto started = ChildProcess::start(args, ChildProcessOptions{.search_path = false,
                                                                 .own_process_group = true,
                                                                 .output_file = log_path_,
                                                                 .parent_death_signal = SIGTERM});
    if (auto* failure = std::get_if<ChildProcess::StartFailure>(&started)) {
      throw Error(ErrorKind::kOperatingSystem, "cannot start the BSO server: " + failure->message);
    }
    child_.emplace(std::move(std::get<ChildProcess>(started)));
  }

  ~ServerProcess() {
    try {
      stop();
    } catch (const std::exception& error) {
      log().error("stopping the BSO server: {}", error.what());
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Waits until the server wrote its port and answers GET /healthz; returns its URL.
  std::string wait_ready(double timeout_s) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int port = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (exited()) {
        throw failure("exited before serving");
      }
      if (port == 0 && fs::exists(port_path_)) {
        port = std::atoi(read_text(port_path_).c_str());
      }
      if (port > 0) {
        http::Url url;
        url.host = "127.0.0.1";
        url.port = port;
        http::ClientOptions options;
        options.connect_timeout_s = 1.0;
        options.read_timeout_s = 2.0;
        options.total_timeout_s = outside_services::kProbeExchangeTimeoutS;
        options.max_body_bytes = outside_services::kProbeMaxBodyBytes;
        http::ClientRequest healthz;
        healthz.target = "/healthz";
        if (const http::Outcome result = http::Client(url, options).send(healthz);
            result.response && result.response->status == 200) {
          return "http://127.0.0.1:" + std::to_string(port);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw failure(fmt::format("did not answer GET /healthz within {} s", timeout_s));
  }

  // SIGTERM, then SIGKILL after 10 s. Returns the exit status (128 + signal when killed).
  int stop() {
    if (!child_) {
      return status_;
    }
    if (!exited()) {
      child_->send_signal(SIGTERM);
      std::optional<ChildExit> done = child_->wait_for(10.0);
      if (!done) {
        log().warn("the BSO server did not stop within 10 s of SIGTERM; killing it");
        child_->send_signal(SIGKILL);
        done = child_->wait();
      }
      status_ = done->exit_code;
    }
    child_.reset();
    return status_;
  }

  const fs::path& log_path() const { return log_path_; }
  const std::string& command() const { return command_; }

 private:
  bool exited() {
    if (!child_) {
      return true;
    }
    if (const std::optional<ChildExit> done = child_->try_wait()) {
      status_ = done->exit_code;
      child_.reset();
      return true;
    }
    return false;
  }
  Error failure(const std::string& what) {
    stop();
    return Error(ErrorKind::kIo,
                 fmt::format("the BSO server ({}) {}; its log ({}) ends with:\n{}", command_, what,
                             log_path_.string(), tail_lines(read_text(log_path_), 10)));
  }

  fs::path log_path_;
  fs::path port_path_;
  std::string command_;
  std::optional<ChildProcess> child_;  // unset once it exited
  int status_ = 0;
};

// ---- Output ----

std::string human_energy(double energy_j) {
  if (energy_j >= 1e6) {
    return fmt::format("{:.2f} MJ", energy_j / 1e6);
  }
  if (energy_j >= 1e3) {
    return fmt::format("{:.2f} kJ", energy_j / 1e3);
  }
  return fmt::format("{:.1f} J", energy_j);
}

std::string human_time(double time_s) {
  if (time_s >= 3600.0) {
    return fmt::format("{:.2f} h", time_s / 3600.0);
  }
  if (time_s >= 60.0) {
    return fmt::format("{:.1f} min", time_s / 60.0);
  }
  return fmt::format("{:.1f} s", time_s);
}

double saved_pct(double zeus, double baseline) {
  return baseline > 0.0 ? 100.0 * (baseline - zeus) / baseline : 0.0;
}

void check_args(const DemoArgs& args) {
  const auto bad = [](const std::string& message) {
    return Error(ErrorKind::kInvalidArgument, message);
  };
  if (args.recurrences < 1 || args.recurrences > 100000) {
    throw bad(fmt::format("--recurrences must be between 1 and 100000, not {}", args.recurrences));
  }
  if (args.gpus < 1 || args.gpus > 64) {
    throw bad(fmt::format("--gpus must be between 1 and 64, not {}", args.gpus));
  }
  if (!(args.eta >= 0.0 && args.eta <= 1.0)) {
    throw bad(fmt::format("--eta must be in [0, 1], not {}", args.eta));
  }
  if (!std::isfinite(args.beta)) {
    throw bad("--beta must be a number (<= 0 disables early stopping)");
  }
  if (args.max_tries < 1 || args.max_tries > sim::limits::kMaxTries) {
    throw bad(fmt::format("--max-tries must be between 1 and {}, not {}", sim::limits::kMaxTries,
                          args.max_tries));
  }
  const std::vector<std::string> gpus = sim::scenario_gpus();
  if (std::find(gpus.begin(), gpus.end(), args.gpu_model) == gpus.end()) {
    throw bad(
        fmt::format("--gpu-model \"{}\": the demo needs a GPU that both the simulated GPUs "
                    "and the workload models know: {}",
                    args.gpu_model, fmt::join(gpus, ", ")));
  }
}

json run_json(const sim::RunRecord& run) {
  json out;
  out["recurrence"] = run.recurrence;
  out["try"] = run.attempt;
  out["trial_number"] = run.trial_number;
  out["batch_size"] = run.batch_size;
  out["power_limit_w"] = run.power_limit_w;
  out["profiled"] = run.profiled;
  out["epochs"] = run.epochs;
  out["energy_j"] = run.energy_j;
  out["time_s"] = run.time_s;
  out["cost"] = run.cost;
  out["outcome"] = run.outcome;
  out["message"] = run.message;
  return out;
}

// "zeus bso: stopped after N requests" from the server's log.
std::optional<long> server_requests(const fs::path& log_path) {
  const std::string text = read_text(log_path);
  const std::string marker = "stopped after ";
  const auto at = text.rfind(marker);
  if (at == std::string::npos) {
    return std::nullopt;
  }
  return std::strtol(text.c_str() + at + marker.size(), nullptr, 10);
}

int run(const DemoArgs& args) {
  const auto wall_start = std::chrono::steady_clock::now();
  check_args(args);
  const sim::Workload& workload = sim::paper_workload(args.workload);
  sim::WorkloadModel model(sim::builtin_trace(args.gpu_model, workload));
  const sim::WorkloadTrace& trace = model.trace();

  // SIGINT and SIGTERM while the demo runs: recorded, and acted on between training runs so that
  // the server is stopped and the temporary directory removed.
  const SignalWatch signals;
  TempDir dir("zeus-demo");
  if (args.keep_db) {
    dir.keep();
  }
  const std::string db_url = "sqlite:///" + (dir.path() / "bso.db").string();
  std::unique_ptr<ServerProcess> server;
  std::string url = args.server;
  if (url.empty()) {
    server = std::make_unique<ServerProcess>(dir.path(), db_url);
    url = server->wait_ready(30.0);
  }

  sim::ScenarioConfig config;
  config.gpus = args.gpus;
  config.gpu_model = args.gpu_model;
  config.eta = args.eta;
  config.beta = args.beta;
  config.seed = args.seed;
  config.max_tries = args.max_tries;
  config.fixed_job_id = args.server.empty();
  sim::Scenario demo(config, model, url, dir.path());
  const std::string gpu_name = demo.gpus().at(0).name();
  const int b0 = trace.workload.default_batch_size;
  const int max_limit_w = model.max_power_limit_w();
  const std::string direction = trace.workload.higher_is_better ? ">=" : "<=";
  if (!args.as_json) {
    fmt::print(
        "\n zeus demo: {} ({}) on {} x simulated {}, {} recurrences, eta {}, beta {}, seed {}\n",
        trace.workload.dataset, trace.workload.network, args.gpus, gpu_name, args.recurrences,
        args.eta, args.beta > 0.0 ? fmt::format("{}", args.beta) : "off", args.seed);
    fmt::print(" BSO server: {}{}\n", url,
               server ? fmt::format(" (zeus bso serve, {})", db_url) : std::string());
    fmt::print(
        " Job: batch sizes {}, default {}; target metric {} {} within {} epochs; power "
        "limits {}-{} W\n\n",
        fmt::join(demo.spec().batch_sizes, ", "), b0, direction, trace.workload.target_metric,
        trace.workload.max_epochs, trace.power_limits_w.front(), max_limit_w);
    fmt::print(" {:>4} {:>3} {:>5} {:>6} {:>8} {:>6} {:>14} {:>12} {:>14}  {}\n", "rec", "try",
               "trial", "batch", "limit W", "epochs", "energy J", "time s", "cost", "outcome");
    std::fflush(stdout);
  }

  std::vector<sim::RunRecord> runs;
  sim::Totals zeus_totals;
  sim::Totals default_totals;
  sim::Totals zeus_last;
  sim::Totals default_last;
  const int last_count = std::min(10, args.recurrences);
  for (int recurrence = 1; recurrence <= args.recurrences; ++recurrence) {
    optimizer::Rng stream = sim::run_stream(args.seed, recurrence);
    sim::Totals zeus_recurrence;
    bool reached = false;
    for (int attempt = 1; attempt <= args.max_tries && !reached; ++attempt) {
      if (const std::optional<int> stop = signals.stop_signal()) {
        std::cerr << "zeus demo: stopped by " << (*stop == SIGINT ? "SIGINT" : "SIGTERM")
                  << " at recurrence " << recurrence << "\n";
        return 128 + *stop;
      }
      sim::RunRecord record = demo.train(recurrence, attempt, stream.below(model.runs()));
      reached = record.outcome == "reached";
      zeus_recurrence.add(record.energy_j, record.time_s, record.cost);
      if (!args.as_json) {
        fmt::print(" {:>4} {:>3} {:>5} {:>6} {:>8} {:>6} {:>14.0f} {:>12.1f} {:>14.0f}  {}{}\n",
                   record.recurrence, record.attempt, record.trial_number, record.batch_size,
                   record.power_limit_w, record.epochs, record.energy_j, record.time_s, record.cost,
                   record.outcome == "reached" ? "reached target" : "stopped: ",
                   record.outcome == "early-stopped" ? "cost above beta x min cost"
                   : record.outcome == "max-epochs"  ? "max epochs without reaching target"
                                                     : "");
        std::fflush(stdout);
      }
      runs.push_back(std::move(record));
    }
    if (!reached) {
      throw Error(ErrorKind::kUnknown,
                  fmt::format("recurrence {} did not reach the target in {} runs (--max-tries)",
                              recurrence, args.max_tries));
    }
    const sim::Totals baseline =
        sim::default_recurrence(model, config, recurrence, demo.max_power_w());
    zeus_totals.add(zeus_recurrence.energy_j, zeus_recurrence.time_s, zeus_recurrence.cost);
    default_totals.add(baseline.energy_j, baseline.time_s, baseline.cost);
    if (recurrence > args.recurrences - last_count) {
      zeus_last.add(zeus_recurrence.energy_j, zeus_recurrence.time_s, zeus_recurrence.cost);
      default_last.add(baseline.energy_j, baseline.time_s, baseline.cost);
    }
  }

  std::optional<long> requests;
  if (server) {
    if (const int status = server->stop(); status != 0) {
      log().warn("the BSO server exited with status {}; its log ends with:\n{}", status,
                 tail_lines(read_text(server->log_path()), 10));
    }
    requests = server_requests(server->log_path());
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const sim::Oracle oracle = sim::compute_oracle(trace, args.eta);
  // The configuration chosen most often by the last recurrences' successful runs.
  const std::pair<int, int> final_config = sim::most_chosen(runs, args.recurrences - last_count);
  const int failed = static_cast<int>(std::count_if(
      runs.begin(), runs.end(), [](const sim::RunRecord& r) { return r.outcome != "reached"; }));

  if (args.as_json) {
    json out;
    out["workload"] = trace.workload.dataset;
    out["network"] = trace.workload.network;
    out["gpu_model"] = args.gpu_model;
    out["gpu_name"] = gpu_name;
    out["gpus"] = args.gpus;
    out["recurrences"] = args.recurrences;
    out["eta"] = args.eta;
    out["beta"] = args.beta > 0.0 ? json(args.beta) : json(nullptr);
    out["seed"] = args.seed;
    out["server_url"] = url;
    out["database"] = server ? json(db_url) : json(nullptr);
    out["job_id"] = demo.spec().job_id.value_or("");
    json list = json::array();
    for (const sim::RunRecord& run : runs) {
      list.push_back(run_json(run));
    }
    out["runs"] = list;
    json summary;
    summary["training_runs"] = runs.size();
    summary["stopped_runs"] = failed;
    summary["zeus"] = {{"energy_j", zeus_totals.energy_j},
                       {"time_s", zeus_totals.time_s},
                       {"cost", zeus_totals.cost}};
    summary["default"] = {{"batch_size", b0},
                          {"power_limit_w", max_limit_w},
                          {"energy_j", default_totals.energy_j},
                          {"time_s", default_totals.time_s},
                          {"cost", default_totals.cost}};
    summary["energy_saved_pct"] = saved_pct(zeus_totals.energy_j, default_totals.energy_j);
    summary["time_saved_pct"] = saved_pct(zeus_totals.time_s, default_totals.time_s);
    summary["cost_saved_pct"] = saved_pct(zeus_totals.cost, default_totals.cost);
    summary["last_recurrences"] = last_count;
    summary["energy_saved_last_pct"] = saved_pct(zeus_last.energy_j, default_last.energy_j);
    summary["time_saved_last_pct"] = saved_pct(zeus_last.time_s, default_last.time_s);
    summary["final_batch_size"] = final_config.first;
    summary["final_power_limit_w"] = final_config.second;
    summary["oracle_batch_size"] = oracle.batch_size;
    summary["oracle_power_limit_w"] = oracle.power_limit_w;
    summary["server_requests"] = requests ? json(*requests) : json(nullptr);
    summary["virtual_time_s"] = zeus_totals.time_s;
    summary["wall_time_s"] = wall_s;
    out["summary"] = summary;
    if (args.keep_db) {
      out["kept_dir"] = dir.path().string();
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }

  fmt::print("\n Summary over {} recurrences ({} training runs, {} stopped by the server):\n",
             args.recurrences, runs.size(), failed);
  fmt::print("   {:<40} {:>12} {:>12} {:>14}\n", "", "energy", "time", "cost");
  fmt::print("   {:<40} {:>12} {:>12} {:>14.4g}\n", "Zeus (BSO server + power-limit optimizer)",
             human_energy(zeus_totals.energy_j), human_time(zeus_totals.time_s), zeus_totals.cost);
  fmt::print("   {:<40} {:>12} {:>12} {:>14.4g}\n",
             fmt::format("Default (batch size {} at {} W)", b0, max_limit_w),
             human_energy(default_totals.energy_j), human_time(default_totals.time_s),
             default_totals.cost);
  fmt::print("   {:<40} {:>11.1f}% {:>11.1f}% {:>13.1f}%\n", "saved",
             saved_pct(zeus_totals.energy_j, default_totals.energy_j),
             saved_pct(zeus_totals.time_s, default_totals.time_s),
             saved_pct(zeus_totals.cost, default_totals.cost));
  fmt::print("   {:<40} {:>11.1f}% {:>11.1f}%\n",
             fmt::format("saved over the last {} recurrences", last_count),
             saved_pct(zeus_last.energy_j, default_last.energy_j),
             saved_pct(zeus_last.time_s, default_last.time_s));
  fmt::print(
      " Chosen most often over the last {} recurrences: batch size {} at {} W (best in "
      "expectation under the model: {} at {} W)\n",
      last_count, final_config.first, final_config.second, oracle.batch_size, oracle.power_limit_w);
  fmt::print(
      " Simulated {} of training in {:.2f} s of wall-clock time{}.\n",
      human_time(zeus_totals.time_s), wall_s,
      requests ? fmt::format("; the BSO server answered {} requests", *requests) : std::string());
  if (args.keep_db) {
    fmt::print(" Kept {} (bso.db, server.log, power-limit profiles).\n", dir.path().string());
  }
  return kExitOk;
}

}  // namespace

void add_demo(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "demo",
      "Run a recurring training job end to end on simulated GPUs in virtual time: a `zeus bso "
      "serve` child picks batch sizes, the power-limit optimizer picks power limits, ZeusMonitor "
      "measures; prints each run and the energy and time saved over Default");
  auto args = std::make_shared<DemoArgs>();
  command->add_option("--recurrences", args->recurrences, "Recurrences of the job")
      ->capture_default_str();
  command
      ->add_option("--workload", args->workload,
                   "Workload model by dataset: librispeech, squad, sentiment140, imagenet, "
                   "cifar100, movielens-1m")
      ->capture_default_str();
  command->add_option("--gpus", args->gpus, "Simulated GPUs the job trains on (data parallel)")
      ->capture_default_str();
  command->add_option("--gpu-model", args->gpu_model, "Simulated GPU model: v100, a40, p100")
      ->capture_default_str();
  command
      ->add_option("--eta", args->eta,
                   "Energy-time knob in [0, 1]: cost = eta x energy + (1 - eta) x MaxPower x time")
      ->capture_default_str();
  command
      ->add_option("--beta", args->beta,
                   "Early stopping: the server stops a run whose cost exceeds beta x the best "
                   "cost so far (<= 0 disables it)")
      ->capture_default_str();
  command->add_option("--seed", args->seed, "Seed of the server's bandit and of the runs' luck")
      ->capture_default_str();
  command
      ->add_option("--max-tries", args->max_tries,
                   "Training runs a recurrence may take to reach the target")
      ->capture_default_str();
  command->add_flag("--keep-db", args->keep_db,
                    "Keep the temporary directory (database, server log, power-limit profiles)");
  command->add_flag("--json", args->as_json, "Print one JSON object instead of the table");
  command->add_option("--server", args->server,
                      "Use this running BSO server (http://host:port) instead of starting one");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
