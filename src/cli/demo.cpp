// `zeus demo`: a recurring training job end to end on simulated GPUs, in virtual time, through
// the real pieces: a `zeus bso serve` child process (SQLite in a temporary directory), the C++
// batch-size-optimizer client, the just-in-time power-limit optimizer and ZeusMonitor. The job's
// epoch time, power draw and epochs to target come from the built-in workload models
// (docs/workload-models.md); time advances on a ManualClock. See docs/demo.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "common/log.hpp"
#include "zeus/bso/client.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/zeus_monitor.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/optimizer/rng.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"
#include "zeus/sim/simulator.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// GPU models that both the simulated-GPU layer and the built-in workload models know.
const std::vector<std::string> kDemoGpus = {"v100", "a40", "p100"};

// Training samples per epoch of each paper workload (the datasets' sizes, as in
// docs/workload-models.md): steps per epoch = ceil(samples / batch size).
int samples_per_epoch(const std::string& dataset) {
  static const std::vector<std::pair<std::string, int>> sizes = {
      {"librispeech", 281000}, {"squad", 88000},    {"sentiment140", 160000},
      {"imagenet", 1281167},   {"cifar100", 50000}, {"movielens-1m", 1000000}};
  for (const auto& [name, samples] : sizes) {
    if (name == dataset) {
      return samples;
    }
  }
  return 100000;
}

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

// ---- The workload model: time and power per (batch size, power limit), epochs per run ----

class WorkloadModel {
 public:
  explicit WorkloadModel(sim::WorkloadTrace trace)
      : trace_(std::move(trace)), samples_(samples_per_epoch(trace_.workload.dataset)) {}

  const sim::WorkloadTrace& trace() const { return trace_; }

  // Epoch time and average power of one GPU at `power_limit_w`, interpolated linearly between
  // the model's power limits (the power-limit optimizer's 25 W grid lands on them exactly).
  sim::PowerPoint at(int batch_size, double power_limit_w) const {
    const auto& points = trace_.at_batch_size(batch_size).power;  // ascending
    if (power_limit_w <= points.front().power_limit_w) {
      return points.front();
    }
    if (power_limit_w >= points.back().power_limit_w) {
      return points.back();
    }
    for (std::size_t i = 1; i < points.size(); ++i) {
      if (power_limit_w <= points[i].power_limit_w) {
        const sim::PowerPoint& low = points[i - 1];
        const sim::PowerPoint& high = points[i];
        const double f =
            (power_limit_w - low.power_limit_w) / (high.power_limit_w - low.power_limit_w);
        sim::PowerPoint point;
        point.power_limit_w = static_cast<int>(std::lround(power_limit_w));
        point.time_per_epoch_s =
            low.time_per_epoch_s + f * (high.time_per_epoch_s - low.time_per_epoch_s);
        point.average_power_w =
            low.average_power_w + f * (high.average_power_w - low.average_power_w);
        return point;
      }
    }
    return points.back();
  }

  int steps_per_epoch(int batch_size) const {
    return std::max(1, (samples_ + batch_size - 1) / batch_size);
  }
  std::size_t runs() const { return trace_.batch_sizes.front().target_epochs.size(); }
  // The epoch at which run `run` of `batch_size` reaches the target (nullopt: never).
  std::optional<int> target_epoch(int batch_size, std::size_t run) const {
    const auto& epochs = trace_.at_batch_size(batch_size).target_epochs;
    return epochs[run % epochs.size()];
  }
  int max_power_limit_w() const { return trace_.power_limits_w.back(); }

 private:
  sim::WorkloadTrace trace_;
  int samples_;
};

// The run (seed of the workload model) each try of a recurrence gets: the same stream for Zeus
// and for Default, so that both face the same luck.
optimizer::Rng run_stream(std::uint64_t seed, int recurrence) {
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(recurrence);
  return optimizer::Rng(optimizer::splitmix64(state));
}

// ---- The server child process ----

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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
    std::vector<char*> argv;
    for (const std::string& arg : args) {
      argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    const std::string log = log_path_.string();
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      throw Error(ErrorKind::kOperatingSystem,
                  std::string("cannot start the BSO server: fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
      // Only async-signal-safe calls until exec.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) {
        ::_exit(127);
      }
      // Its own process group: Ctrl-C reaches the demo only, which then stops the server.
      ::setpgid(0, 0);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (out < 0 || in < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) {
        ::_exit(127);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
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
        httplib::Client client("127.0.0.1", port);
        client.set_connection_timeout(1, 0);
        client.set_read_timeout(2, 0);
        if (const auto result = client.Get("/healthz"); result && result->status == 200) {
          return "http://127.0.0.1:" + std::to_string(port);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw failure(fmt::format("did not answer GET /healthz within {} s", timeout_s));
  }

  // SIGTERM, then SIGKILL after 10 s. Returns the exit status (128 + signal when killed).
  int stop() {
    if (pid_ <= 0) {
      return status_;
    }
    if (!exited()) {
      ::kill(pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!exited()) {
        if (std::chrono::steady_clock::now() > deadline) {
          log().warn("the BSO server did not stop within 10 s of SIGTERM; killing it");
          ::kill(pid_, SIGKILL);
          int raw = 0;
          ::waitpid(pid_, &raw, 0);
          record(raw);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    pid_ = -1;
    return status_;
  }

  const fs::path& log_path() const { return log_path_; }
  const std::string& command() const { return command_; }

 private:
  bool exited() {
    if (pid_ <= 0) {
      return true;
    }
    int raw = 0;
    const pid_t done = ::waitpid(pid_, &raw, WNOHANG);
    if (done == pid_) {
      record(raw);
      pid_ = -1;
      return true;
    }
    return false;
  }
  void record(int raw) {
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
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
  pid_t pid_ = -1;
  int status_ = 0;
};

// A temporary directory, removed at the end unless kept.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "zeus-demo-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorKind::kIo, "cannot create a temporary directory from " + pattern + ": " +
                                      std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    if (!keep_) {
      std::error_code ignored;
      fs::remove_all(path_, ignored);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  fs::path path_;
  bool keep_ = false;
};

// SIGINT and SIGTERM while the demo runs: recorded, and acted on between training runs so that
// the server is stopped and the temporary directory removed.
volatile std::sig_atomic_t g_stop_signal = 0;

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = [](int signal) { g_stop_signal = signal; };
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// ---- One training run ----

struct RunRecord {
  int recurrence = 0;  // 1-based
  int attempt = 0;     // 1-based try within the recurrence
  int trial_number = 0;
  int batch_size = 0;
  int power_limit_w = 0;
  bool profiled = false;  // this run profiled the power limits (first run of its batch size)
  int epochs = 0;
  double energy_j = 0.0;  // all GPUs
  double time_s = 0.0;
  double cost = 0.0;
  std::string outcome;  // "reached", "early-stopped", "max-epochs"
  std::string message;  // the server's
};

struct Totals {
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
  void add(double energy, double time, double cost_value) {
    energy_j += energy;
    time_s += time;
    cost += cost_value;
  }
};

class Demo {
 public:
  Demo(const DemoArgs& args, WorkloadModel model, std::string url, fs::path work_dir)
      : args_(args), model_(std::move(model)), url_(std::move(url)), dir_(std::move(work_dir)) {
    const SimulatedGpuModel& gpu_model = simulated_gpu_model(args_.gpu_model);
    std::vector<std::shared_ptr<Gpu>> as_gpus;
    std::vector<int> physical;
    for (int i = 0; i < args_.gpus; ++i) {
      sim_gpus_.push_back(std::make_shared<SimulatedGpu>(gpu_model, i, clock_));
      as_gpus.push_back(sim_gpus_.back());
      physical.push_back(i);
    }
    gpus_ = Gpus(as_gpus, physical);
    ZeusMonitorOptions options;
    options.clock = clock_;
    options.cpu_indices = std::vector<int>{};
    options.start_sampler_thread = false;  // counter-less GPUs are sampled at every change
    monitor_ = std::make_shared<ZeusMonitor>(gpus_, std::vector<std::shared_ptr<Cpu>>{}, options);
    if (monitor_->sampler() != nullptr) {
      monitor_->sampler()->sample_once();
    }

    const sim::WorkloadTrace& trace = model_.trace();
    spec_.job_id_prefix = "demo-" + trace.workload.dataset;
    if (args_.server.empty()) {
      spec_.job_id = spec_.job_id_prefix;  // a fresh database: a fixed, readable id
    }
    for (const auto& batch : trace.batch_sizes) {
      spec_.batch_sizes.push_back(batch.batch_size);
    }
    spec_.default_batch_size = trace.workload.default_batch_size;
    spec_.eta_knob = args_.eta;
    spec_.beta_knob = args_.beta > 0.0 ? std::optional<double>(args_.beta) : std::nullopt;
    spec_.target_metric = trace.workload.target_metric;
    spec_.higher_is_better_metric = trace.workload.higher_is_better;
    spec_.max_epochs = trace.workload.max_epochs;
    spec_.mab_seed = static_cast<std::int64_t>(args_.seed & 0x7fffffffffffffffULL);

    client_options_.retry.max_attempts = 4;
    client_options_.retry.initial_delay_s = 0.05;
    client_options_.retry.max_delay_s = 1.0;
  }

  const Gpus& gpus() const { return gpus_; }
  const bso::JobSpec& spec() const { return spec_; }

  // One training run of recurrence `recurrence`, as a training script would do it.
  RunRecord train(int recurrence, int attempt, std::size_t run) {
    RunRecord record;
    record.recurrence = recurrence;
    record.attempt = attempt;

    bso::BatchSizeOptimizer bso(monitor_, gpus_, url_, spec_, client_options_);
    spec_.job_id = bso.job().job_id;  // the server's id when it assigned one
    max_power_w_ = bso.job().max_power_w;
    const int batch_size = bso.get_batch_size();
    record.batch_size = batch_size;
    record.trial_number = bso.trial()->trial_number;

    const int steps = model_.steps_per_epoch(batch_size);
    PowerLimitOptimizerOptions plo_options;
    plo_options.selector = std::make_shared<optimizer::ZeusCostSelector>(args_.eta, args_.gpus);
    // Short enough that every limit fits in one epoch even with few steps per epoch.
    plo_options.warmup_steps = std::clamp(steps / 20, 1, 10);
    plo_options.profile_steps = std::clamp(steps / 10, 2, 40);
    plo_options.profile_path = dir_ / fmt::format("plo-profile-bs{}.json", batch_size);
    plo_options.restore_on_signal = false;  // simulated GPUs: nothing to restore
    record.profiled = !fs::exists(plo_options.profile_path);
    PowerLimitOptimizer plo(monitor_, gpus_, plo_options);

    const std::optional<int> target_epoch = model_.target_epoch(batch_size, run);
    bso.on_train_begin();
    for (int epoch = 1;; ++epoch) {
      train_epoch(plo, batch_size, steps);
      plo.on_epoch_end();
      record.epochs = epoch;
      try {
        const bso::ReportResponse response = bso.on_evaluate(metric(epoch, target_epoch));
        if (response.stop_train) {
          record.outcome = "reached";
          record.message = response.message;
          break;
        }
      } catch (const bso::TrainFailedError& error) {
        record.message = error.response().message;
        record.outcome = record.message.find("cost upper bound") != std::string::npos
                             ? "early-stopped"
                             : "max-epochs";
        break;
      }
      if (epoch > spec_.max_epochs) {
        throw Error(ErrorKind::kUnknown,
                    fmt::format("the BSO server did not stop trial {} after {} epochs (max_epochs "
                                "is {})",
                                record.trial_number, epoch, spec_.max_epochs));
      }
    }
    record.power_limit_w = static_cast<int>(
        plo.optimal_power_limit_mw().value_or(sim_gpus_[0]->power_limit_mw()) / 1000);
    record.energy_j = bso.energy_j();
    record.time_s = bso.time_s();
    record.cost = optimizer::zeus_cost(record.energy_j, record.time_s, args_.eta, max_power_w_);
    return record;  // the optimizers go: the limit is restored, the trial ended (PATCH /trials)
  }

  double max_power_w() const { return max_power_w_; }

 private:
  // The validation metric after `epoch` epochs of a run that reaches the target at
  // `target_epoch`: it crosses the target exactly there.
  double metric(int epoch, std::optional<int> target_epoch) const {
    const double target = spec_.target_metric;
    const bool higher = spec_.higher_is_better_metric;
    if (!target_epoch) {  // never reaches it: approaches it from the wrong side
      const double gap = 0.05 + 0.5 / epoch;
      return higher ? target * (1.0 - gap) : target * (1.0 + gap);
    }
    const double progress = static_cast<double>(epoch) / *target_epoch;  // 1.0 exactly at target
    return higher ? target * progress : target / progress;
  }

  // Makes every GPU draw the model's power for `batch_size` at its current power limit.
  void apply_power(int batch_size, int steps) {
    const std::uint32_t limit_mw = sim_gpus_[0]->power_limit_mw();
    if (limit_mw == applied_limit_mw_ && batch_size == applied_batch_size_) {
      return;
    }
    const sim::PowerPoint point = model_.at(batch_size, limit_mw / 1000.0);
    for (const auto& gpu : sim_gpus_) {
      const SimulatedGpuModel& m = gpu->model();
      gpu->set_utilization((point.average_power_w * 1000.0 - m.idle_power_mw) /
                           (static_cast<double>(m.peak_power_mw) - m.idle_power_mw));
    }
    if (monitor_->sampler() != nullptr) {
      monitor_->sampler()->sample_once();
    }
    step_time_s_ = point.time_per_epoch_s / steps;
    applied_limit_mw_ = limit_mw;
    applied_batch_size_ = batch_size;
  }

  // One epoch: step by step while the power-limit optimizer profiles, then the rest at once.
  void train_epoch(PowerLimitOptimizer& plo, int batch_size, int steps) {
    for (int step = 0; step < steps; ++step) {
      const bool profiling = !plo.optimal_power_limit_mw().has_value();
      if (step == 0 || profiling) {
        plo.on_step_begin();
        apply_power(batch_size, steps);
        clock_->advance_s(step_time_s_);
        continue;
      }
      apply_power(batch_size, steps);
      clock_->advance_s(step_time_s_ * (steps - step));
      break;
    }
  }

  const DemoArgs& args_;
  WorkloadModel model_;
  std::string url_;
  fs::path dir_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::vector<std::shared_ptr<SimulatedGpu>> sim_gpus_;
  Gpus gpus_;
  std::shared_ptr<ZeusMonitor> monitor_;
  bso::JobSpec spec_;
  bso::ClientOptions client_options_;
  double max_power_w_ = 0.0;
  std::uint32_t applied_limit_mw_ = 0;
  int applied_batch_size_ = 0;
  double step_time_s_ = 0.0;
};

// Default: b0 at the maximum power limit, every recurrence, with the same runs as Zeus got;
// a run that misses the target costs max_epochs and is retried.
Totals default_recurrence(const WorkloadModel& model, const DemoArgs& args, int recurrence,
                          double max_power_w) {
  const sim::WorkloadTrace& trace = model.trace();
  const int b0 = trace.workload.default_batch_size;
  const sim::PowerPoint point = model.at(b0, model.max_power_limit_w());
  optimizer::Rng stream = run_stream(args.seed, recurrence);
  Totals totals;
  for (int attempt = 1; attempt <= args.max_tries; ++attempt) {
    const std::optional<int> target = model.target_epoch(b0, stream.below(model.runs()));
    const bool reached = target && *target <= trace.workload.max_epochs;
    const int epochs = reached ? *target : trace.workload.max_epochs;
    const double energy_j = epochs * point.energy_per_epoch_j() * args.gpus;
    const double time_s = epochs * point.time_per_epoch_s;
    totals.add(energy_j, time_s, optimizer::zeus_cost(energy_j, time_s, args.eta, max_power_w));
    if (reached) {
      break;
    }
  }
  return totals;
}

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
  if (args.max_tries < 1) {
    throw bad("--max-tries must be at least 1");
  }
  if (std::find(kDemoGpus.begin(), kDemoGpus.end(), args.gpu_model) == kDemoGpus.end()) {
    throw bad(
        fmt::format("--gpu-model \"{}\": the demo needs a GPU that both the simulated GPUs "
                    "and the workload models know: {}",
                    args.gpu_model, fmt::join(kDemoGpus, ", ")));
  }
}

json run_json(const RunRecord& run) {
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
  WorkloadModel model(sim::builtin_trace(args.gpu_model, workload));
  const sim::WorkloadTrace& trace = model.trace();

  const StopSignals signals;
  TempDir dir;
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

  Demo demo(args, model, url, dir.path());
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

  std::vector<RunRecord> runs;
  Totals zeus_totals;
  Totals default_totals;
  Totals zeus_last;
  Totals default_last;
  const int last_count = std::min(10, args.recurrences);
  for (int recurrence = 1; recurrence <= args.recurrences; ++recurrence) {
    optimizer::Rng stream = run_stream(args.seed, recurrence);
    Totals zeus_recurrence;
    bool reached = false;
    for (int attempt = 1; attempt <= args.max_tries && !reached; ++attempt) {
      if (g_stop_signal != 0) {
        std::cerr << "zeus demo: stopped by " << (g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM")
                  << " at recurrence " << recurrence << "\n";
        return 128 + g_stop_signal;
      }
      RunRecord record = demo.train(recurrence, attempt, stream.below(model.runs()));
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
    const Totals baseline = default_recurrence(model, args, recurrence, demo.max_power_w());
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
  // The configuration chosen most often by the last recurrences' successful runs (ties: the
  // latest).
  std::pair<int, int> final_config{0, 0};
  {
    std::vector<std::pair<int, int>> chosen;
    for (const RunRecord& run : runs) {
      if (run.outcome == "reached" && run.recurrence > args.recurrences - last_count) {
        chosen.emplace_back(run.batch_size, run.power_limit_w);
      }
    }
    long best = 0;
    for (const auto& config : chosen) {
      const long count = std::count(chosen.begin(), chosen.end(), config);
      if (count >= best) {
        best = count;
        final_config = config;
      }
    }
  }
  const int failed = static_cast<int>(std::count_if(
      runs.begin(), runs.end(), [](const RunRecord& r) { return r.outcome != "reached"; }));

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
    for (const RunRecord& run : runs) {
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
