// SlurmMetrics: the running Slurm steps' GPU energy, caps and start times, from the SPANK
// plugin's state files and zeusd's counters (slurm_metrics.hpp).
#include "metrics/slurm_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "common/log.hpp"
#include "device/zeusd_connection.hpp"
#include "metrics/exposition.hpp"
#include "slurm/step_session.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::metrics {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kEnergy = "zeus_slurm_step_gpu_energy_joules";
constexpr std::string_view kPowerLimit = "zeus_slurm_step_gpu_power_limit_watts";
constexpr std::string_view kStart = "zeus_slurm_step_start_timestamp_seconds";
constexpr std::string_view kFailures = "zeus_slurm_collection_failures_total";

// The step state files in `dir` (as slurm::read_step_states picks them), counted up to one past
// `limit`. A missing directory has none (no step has run on this node yet).
std::size_t count_state_files(const std::string& dir, std::size_t limit) {
  std::error_code error;
  fs::directory_iterator entries(dir, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) {
      return 0;
    }
    throw Error(ErrorKind::kIo,
                fmt::format("cannot read the Slurm state directory {}: {}", dir, error.message()));
  }
  std::size_t count = 0;
  for (const fs::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) == 0 && entry.path().extension() == ".json" &&
        entry.is_regular_file(error) && ++count > limit) {
      break;
    }
  }
  return count;
}

std::string id_list(const std::set<int>& ids) {
  std::string out;
  for (const int id : ids) {
    out += (out.empty() ? "" : ",") + std::to_string(id);
  }
  return out;
}

// {"<id>": {"energy_mj": N}} -> id -> N, for the ids asked.
void read_energies(const std::string& body, const std::set<int>& ids,
                   std::map<int, std::uint64_t>& into) {
  const json parsed = json::parse(body);
  for (const int id : ids) {
    const auto gpu = parsed.find(std::to_string(id));
    if (gpu != parsed.end() && gpu->is_object() && gpu->contains("energy_mj") &&
        (*gpu)["energy_mj"].is_number_unsigned()) {
      into[id] = (*gpu)["energy_mj"].get<std::uint64_t>();
    }
  }
}

// zeusd's GPUs, and the current energy counter of each of `wanted` that it can count.
struct ZeusdGpus {
  std::set<int> known;
  std::map<int, std::uint64_t> energy_mj;
};

// Throws zeus::Error when zeusd cannot be reached, refuses the reads, or answers what cannot be
// read.
ZeusdGpus read_zeusd_gpus(device::ZeusdConnection& zeusd, const std::set<int>& wanted) {
  ZeusdGpus gpus;
  // Only the GPUs zeusd lists (with a counter, for the energy): a state file naming another
  // (stale, or not ours) must neither make zeusd refuse the reads of every step nor add series.
  std::set<int> ids;
  try {
    const json discovered = json::parse(zeusd.get("list zeusd's GPUs", "/discover"));
    for (const json& gpu : discovered.at("gpus")) {
      const int id = gpu.at("id").get<int>();
      gpus.known.insert(id);
      if (wanted.count(id) && gpu.value("cumulative_energy_available", false)) {
        ids.insert(id);
      }
    }
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo, fmt::format("zeusd at {} sent a /discover reply that cannot be "
                                            "read ({})",
                                            zeusd.config().describe(), error.what()));
  }
  std::map<int, std::uint64_t>& energies = gpus.energy_mj;
  if (ids.empty()) {
    return gpus;
  }
  const std::string operation = "read the energy counters";
  try {
    read_energies(zeusd.get(operation, "/gpu/get_cumulative_energy?gpu_ids=" + id_list(ids)), ids,
                  energies);
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo, fmt::format("zeusd at {} sent energy counters that cannot be "
                                            "read ({})",
                                            zeusd.config().describe(), error.what()));
  } catch (const Error& error) {
    // Unreachable, or no permission: the same for every GPU. A GPU whose read failed on the
    // daemon makes it refuse the whole list: ask for each GPU alone, so the others still count.
    if (error.kind() == ErrorKind::kIo || error.kind() == ErrorKind::kNoPermission ||
        ids.size() == 1) {
      throw;
    }
    for (const int id : ids) {
      try {
        read_energies(
            zeusd.get(operation, "/gpu/get_cumulative_energy?gpu_ids=" + std::to_string(id)), {id},
            energies);
      } catch (const json::exception&) {
        continue;
      } catch (const Error& one) {
        if (one.kind() == ErrorKind::kIo || one.kind() == ErrorKind::kNoPermission) {
          throw;
        }
      }
    }
  }
  return gpus;
}

}  // namespace

// Sample lines per family, rendered by the collecting thread.
struct SlurmMetrics::Rendered {
  std::string energy;
  std::string power_limit;
  std::string start;
};

SlurmMetrics::SlurmMetrics(SlurmMetricsOptions options)
    : options_(std::move(options)), rendered_(std::make_unique<Rendered>()) {
  if (!options_.clock) {
    options_.clock = steady_clock();
  }
  options_.zeusd.timeout_s = std::min(options_.zeusd.timeout_s, kSlurmZeusdTimeoutS);
  zeusd_ = std::make_unique<device::ZeusdConnection>(options_.zeusd);
  if (options_.start_thread) {
    thread_ = std::thread([this] { run(); });
  }
}

SlurmMetrics::~SlurmMetrics() {
  stop();
}

void SlurmMetrics::stop() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void SlurmMetrics::run() {
  const auto period = std::chrono::duration<double>(options_.interval_s);
  std::unique_lock lock(stop_mutex_);
  do {
    lock.unlock();
    collect_once();
    lock.lock();
  } while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; }));
}

void SlurmMetrics::collect_once() {
  auto next = std::make_unique<Rendered>();
  std::optional<std::string> failure;
  try {
    collect(*next);
  } catch (const std::exception& error) {
    failure = error.what();
    next = std::make_unique<Rendered>();  // no Slurm series rather than some of them
  }
  {
    const std::lock_guard lock(mutex_);
    rendered_ = std::move(next);
    last_failure_ = failure;
    if (failure) {
      ++failures_;
    }
  }
  if (failure) {
    note_failure(*failure);
  }
}

void SlurmMetrics::note_failure(const std::string& reason) {
  const std::int64_t now_ns = options_.clock->now_ns();
  if (last_log_ns_ && units::seconds_from_nanoseconds(now_ns - *last_log_ns_) < kSlurmLogEveryS) {
    return;
  }
  last_log_ns_ = now_ns;
  log().warn("exporter: no Slurm series from {}: {} (said at most once a minute)",
             options_.state_dir, reason);
}

void SlurmMetrics::collect(Rendered& into) {
  const std::size_t files = count_state_files(options_.state_dir, options_.max_state_files);
  if (files > options_.max_state_files) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("more than {} step state files in {} (the most read at once); "
                            "remove those of steps no longer running",
                            options_.max_state_files, options_.state_dir));
  }
  if (files == 0) {
    return;
  }
  // The running steps, each (job, step, node) once: a dead owner's file is the epilog's to clean.
  std::vector<slurm::StepState> steps;
  std::set<std::tuple<std::uint32_t, std::string, std::string>> seen;
  for (slurm::StepState& state :
       slurm::read_step_states(options_.state_dir, options_.max_state_files)) {
    if (slurm::owner_alive(state) && seen.emplace(state.job_id, state.step, state.node).second) {
      steps.push_back(std::move(state));
    }
  }
  if (steps.empty()) {
    return;
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
    return std::tie(a.job_id, a.step, a.node) < std::tie(b.job_id, b.step, b.node);
  });
  std::set<int> counted;
  for (const slurm::StepState& step : steps) {
    for (const slurm::StepGpu& gpu : step.gpus) {
      if (gpu.start_energy_mj) {
        counted.insert(gpu.index);
      }
    }
  }
  const ZeusdGpus zeusd_gpus = read_zeusd_gpus(*zeusd_, counted);
  const std::map<int, std::uint64_t>& now_mj = zeusd_gpus.energy_mj;

  const auto line = [](std::string& out, std::string_view name, const std::string& labels,
                       double value) {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, format_value(value));
  };
  for (const slurm::StepState& step : steps) {
    const std::string labels =
        fmt::format("job_id=\"{}\",step=\"{}\",node=\"{}\"", step.job_id,
                    escape_label_value(step.step), escape_label_value(step.node));
    line(into.start, kStart, labels, step.start_unix_s);
    std::set<int> gpus_seen;
    for (const slurm::StepGpu& gpu : step.gpus) {
      if (!zeusd_gpus.known.count(gpu.index) || !gpus_seen.insert(gpu.index).second) {
        continue;
      }
      const std::string gpu_labels =
          fmt::format("{},gpu=\"{}\",user=\"{}\"", labels, gpu.index, step.uid);
      if (const auto it = now_mj.find(gpu.index);
          gpu.start_energy_mj && it != now_mj.end() && it->second >= *gpu.start_energy_mj) {
        line(
            into.energy, kEnergy, gpu_labels,
            units::joules_from_millijoules(static_cast<double>(it->second - *gpu.start_energy_mj)));
      }
      if (gpu.cap_mw) {
        line(into.power_limit, kPowerLimit, gpu_labels,
             units::watts_from_milliwatts(static_cast<double>(*gpu.cap_mw)));
      }
    }
  }
}

void SlurmMetrics::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  write_family_header(out, kEnergy, "gauge",
                      "GPU energy of a running Slurm step since it started, in joules");
  out += rendered_->energy;
  write_family_header(out, kPowerLimit, "gauge",
                      "The power limit a running Slurm step holds its GPU at, in watts");
  out += rendered_->power_limit;
  write_family_header(out, kStart, "gauge", "When a running Slurm step started, in Unix seconds");
  out += rendered_->start;
  write_family_header(out, kFailures, "counter",
                      "Collections that gave no Slurm series (zeusd unreachable or refusing, "
                      "too many state files)");
  fmt::format_to(std::back_inserter(out), "{} {}\n", kFailures,
                 format_value(static_cast<double>(failures_)));
}

std::optional<std::string> SlurmMetrics::last_failure() const {
  const std::lock_guard lock(mutex_);
  return last_failure_;
}

}  // namespace zeus::metrics
