#include "zeus/sim/trace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "device/gpu_models.hpp"
#include "trace_internal.hpp"
#include "trace_tables.hpp"
#include "zeus/common/error.hpp"

namespace zeus::sim {

// ---- Workload and GPU catalogues ----

const std::vector<Workload>& paper_workloads() {
  static const std::vector<Workload> workloads = {
      {"librispeech", "deepspeech2", "adamw", 40.0, 16, 192, /*higher_is_better=*/false},
      {"squad", "bert_base_uncased", "adamw", 84.0, 6, 32, true},
      {"sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128, true},
      {"imagenet", "resnet50", "adadelta", 0.65, 100, 256, true},
      {"cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024, true},
      {"movielens-1m", "ncf", "adam", 0.41, 100, 1024, true},
  };
  return workloads;
}

const Workload& paper_workload(std::string_view dataset) {
  std::string names;
  for (const Workload& workload : paper_workloads()) {
    if (workload.dataset == dataset) {
      return workload;
    }
    names += (names.empty() ? "" : ", ") + workload.dataset;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown workload '" + std::string(dataset) + "': choose one of " + names);
}

const std::vector<std::string>& trace_gpus() {
  static const std::vector<std::string> gpus = [] {
    std::vector<std::string> keys;
    for (const device::GpuModelEntry& entry : device::gpu_models()) {
      if (entry.public_traces) {
        keys.push_back(entry.key);
      }
    }
    return keys;
  }();
  return gpus;
}

void check_trace_gpu(std::string_view gpu) {
  const auto& gpus = trace_gpus();
  if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
    return;
  }
  std::string names;
  for (const std::string& name : gpus) {
    names += (names.empty() ? "" : ", ") + name;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown GPU model '" + std::string(gpu) + "': choose one of " + names);
}

// ---- Trace structures ----

const PowerPoint* BatchSizeTrace::at_power_limit(int power_limit_w) const {
  const auto it = std::lower_bound(
      power.begin(), power.end(), power_limit_w,
      [](const PowerPoint& point, int limit_w) { return point.power_limit_w < limit_w; });
  if (it == power.end() || it->power_limit_w != power_limit_w) {
    return nullptr;
  }
  return &*it;
}

const BatchSizeTrace& WorkloadTrace::at_batch_size(int batch_size) const {
  for (const BatchSizeTrace& entry : batch_sizes) {
    if (entry.batch_size == batch_size) {
      return entry;
    }
  }
  std::vector<int> sizes;
  for (const BatchSizeTrace& entry : batch_sizes) {
    sizes.push_back(entry.batch_size);
  }
  throw Error(ErrorKind::kInvalidArgument, "batch size " + std::to_string(batch_size) +
                                               " is not in the trace of " +
                                               detail::workload_label(workload) + " on " + gpu +
                                               " (it has " + detail::join_ints(sizes) + ")");
}

// ---- Helpers shared with the built-in models ----

namespace detail {

std::string workload_label(const Workload& workload) {
  return workload.dataset + "/" + workload.network + "/" + workload.optimizer;
}

bool same_metric(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max({1e-12, std::fabs(a), std::fabs(b)});
}

std::string join_ints(const std::vector<int>& values) {
  std::string text;
  for (const int value : values) {
    text += (text.empty() ? "" : ", ") + std::to_string(value);
  }
  return text;
}

void collect_power_limits(WorkloadTrace& trace) {
  std::set<int> limits;
  for (const BatchSizeTrace& entry : trace.batch_sizes) {
    for (const PowerPoint& point : entry.power) {
      limits.insert(point.power_limit_w);
    }
  }
  trace.power_limits_w.assign(limits.begin(), limits.end());
}

void cap_default_batch_size(WorkloadTrace& trace, const std::string& origin) {
  const int b0 = trace.workload.default_batch_size;
  int capped = 0;
  std::vector<int> sizes;
  for (const BatchSizeTrace& entry : trace.batch_sizes) {
    sizes.push_back(entry.batch_size);
    if (entry.batch_size == b0) {
      return;
    }
    if (entry.batch_size < b0) {
      capped = std::max(capped, entry.batch_size);
    }
  }
  if (capped == 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "the default batch size " + std::to_string(b0) + " of " +
                    workload_label(trace.workload) + " on " + trace.gpu +
                    " is smaller than every batch size in " + origin + " (" + join_ints(sizes) +
                    "); choose one of those");
  }
  trace.workload.default_batch_size = capped;
  trace.notes.push_back("b0 " + std::to_string(b0) + " is not in " + origin + "; capped to " +
                        std::to_string(capped) + " (the largest batch size below it)");
}

namespace {
bool within_max_epochs(const Workload& workload, const std::optional<int>& epoch) {
  return epoch && (workload.max_epochs <= 0 || *epoch <= workload.max_epochs);
}
}  // namespace

void check_target_reached(const WorkloadTrace& trace, const std::string& hint) {
  const Workload& workload = trace.workload;
  for (const BatchSizeTrace& batch : trace.batch_sizes) {
    for (const std::optional<int>& epoch : batch.target_epochs) {
      if (within_max_epochs(workload, epoch)) {
        return;
      }
    }
  }
  std::ostringstream message;
  message << "no batch size of " << workload_label(workload) << " on " << trace.gpu
          << " reaches the target metric " << workload.target_metric;
  if (workload.max_epochs > 0) {
    message << " within " << workload.max_epochs << " epochs";
  }
  message << " in any run (source: " << trace.source << "); " << hint;
  throw Error(ErrorKind::kInvalidArgument, message.str());
}

void check_default_converges(const WorkloadTrace& trace) {
  const Workload& workload = trace.workload;
  const BatchSizeTrace& b0 = trace.at_batch_size(workload.default_batch_size);
  for (const std::optional<int>& epoch : b0.target_epochs) {
    if (within_max_epochs(workload, epoch)) {
      return;
    }
  }
  std::ostringstream message;
  message << "the default batch size " << workload.default_batch_size << " of "
          << workload_label(workload) << " on " << trace.gpu << " never reaches the target metric "
          << workload.target_metric;
  if (workload.max_epochs > 0) {
    message << " within " << workload.max_epochs << " epochs";
  }
  message << " in any of its " << b0.target_epochs.size()
          << " runs; the simulation starts from b0, so it must converge (source: " << trace.source
          << ")";
  throw Error(ErrorKind::kInvalidArgument, message.str());
}

}  // namespace detail

// ---- CSV parsing ----

namespace {

constexpr std::string_view kTrainFile = "summary_train.csv";

std::string power_file_name(std::string_view gpu) {
  return "summary_power_" + std::string(gpu) + ".csv";
}

using detail::key_label;
using detail::parse_power;
using detail::parse_train;
using detail::PowerRow;
using detail::PowerTable;
using detail::TrainRow;
using detail::TrainTable;
using detail::workload_key;

template <typename Table>
std::string available_workloads(const Table& table) {
  std::set<std::string> labels;
  for (const auto& [key, rows] : table.rows) {
    labels.insert(key_label(key));
  }
  std::string text;
  for (const std::string& label : labels) {
    text += (text.empty() ? "" : ", ") + label;
  }
  return text;
}

void check_gpu_name(std::string_view gpu) {
  const bool valid =
      !gpu.empty() && gpu != "." && gpu != ".." && std::all_of(gpu.begin(), gpu.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.';
      });
  if (!valid) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "GPU model name '" + std::string(gpu) +
            "' must be letters, digits, '_', '-' or '.' (it names summary_power_<gpu>.csv)");
  }
}

// What to do when no run reaches the workload's target: the hardest target that some run of a
// batch size in both files does reach within max_epochs, if any.
template <typename PowerRows>
std::string hardest_reached_hint(const std::vector<TrainRow>& rows, const PowerRows& power_rows,
                                 const Workload& workload) {
  std::optional<double> hardest;
  for (const TrainRow& row : rows) {
    const bool reached =
        row.target_epoch && (workload.max_epochs <= 0 || *row.target_epoch <= workload.max_epochs);
    if (!reached || power_rows.count(row.batch_size) == 0) {
      continue;
    }
    if (!hardest ||
        (workload.higher_is_better ? row.target_metric > *hardest : row.target_metric < *hardest)) {
      hardest = row.target_metric;
    }
  }
  std::ostringstream hint;
  if (hardest) {
    hint << "the hardest target some run reaches is " << *hardest << "; choose an easier one";
  } else {
    hint << "no run of it reaches any target of the trace";
  }
  return hint.str();
}

WorkloadTrace build_trace(const TrainTable& train, const PowerTable& power,
                          const std::filesystem::path& dir, std::string_view gpu,
                          const Workload& workload) {
  const std::string key = workload_key(workload.dataset, workload.network, workload.optimizer);
  const std::string label = detail::workload_label(workload);
  const std::string where = "workload " + label + " on " + std::string(gpu) + ": ";

  const auto train_it = train.rows.find(key);
  if (train_it == train.rows.end()) {
    throw Error(ErrorKind::kInvalidArgument, where + train.path + " has no rows for it (it has " +
                                                 available_workloads(train) + ")");
  }
  const auto power_it = power.rows.find(key);
  if (power_it == power.rows.end()) {
    throw Error(ErrorKind::kInvalidArgument, where + power.path + " has no rows for it (it has " +
                                                 available_workloads(power) + ")");
  }

  // Train rows at the target metric: batch size -> (run, epoch), duplicates rejected.
  std::map<int, std::vector<const TrainRow*>> runs_by_size;
  std::set<double> metrics;
  for (const TrainRow& row : train_it->second) {
    metrics.insert(row.target_metric);
    if (detail::same_metric(row.target_metric, workload.target_metric)) {
      runs_by_size[row.batch_size].push_back(&row);
    }
  }
  if (runs_by_size.empty()) {
    std::ostringstream message;
    message << where << train.path << " has no rows at target_metric " << workload.target_metric
            << " (it has";
    for (const double metric : metrics) {
      message << " " << metric;
    }
    message << ")";
    throw Error(ErrorKind::kInvalidArgument, message.str());
  }

  std::map<int, std::vector<const PowerRow*>> points_by_size;
  for (const PowerRow& row : power_it->second) {
    points_by_size[row.batch_size].push_back(&row);
  }

  WorkloadTrace trace;
  trace.workload = workload;
  trace.gpu = std::string(gpu);
  trace.source = dir.string();
  trace.max_power_w = power.max_power_limit_w;
  std::vector<int> train_only;
  std::vector<int> power_only;
  for (const auto& [batch_size, points] : points_by_size) {
    if (runs_by_size.count(batch_size) == 0) {
      power_only.push_back(batch_size);
    }
  }
  for (auto& [batch_size, runs] : runs_by_size) {
    const auto points_it = points_by_size.find(batch_size);
    if (points_it == points_by_size.end()) {
      train_only.push_back(batch_size);
      continue;
    }
    BatchSizeTrace entry;
    entry.batch_size = batch_size;
    std::stable_sort(runs.begin(), runs.end(),
                     [](const TrainRow* a, const TrainRow* b) { return a->run < b->run; });
    for (std::size_t i = 0; i < runs.size(); ++i) {
      // Exact repeats are refused while parsing; here, two target metrics that both round to
      // the workload's (same_metric) give one run twice.
      if (i > 0 && runs[i]->run == runs[i - 1]->run) {
        const auto [first, second] = std::minmax(runs[i]->line, runs[i - 1]->line);
        throw Error(ErrorKind::kInvalidArgument,
                    train.path + ":" + std::to_string(second) + ": duplicate of line " +
                        std::to_string(first) + ": run " + std::to_string(runs[i]->run) + " of " +
                        label + " at batch size " + std::to_string(batch_size) +
                        " appears twice for the same target_metric; remove one of them");
      }
      entry.target_epochs.push_back(runs[i]->target_epoch);
    }
    // Unique power limits: parse_power refuses a repeated one.
    std::vector<const PowerRow*>& points = points_it->second;
    std::stable_sort(points.begin(), points.end(), [](const PowerRow* a, const PowerRow* b) {
      return a->point.power_limit_w < b->point.power_limit_w;
    });
    for (const PowerRow* point : points) {
      entry.power.push_back(point->point);
    }
    trace.batch_sizes.push_back(std::move(entry));
  }
  if (trace.batch_sizes.empty()) {
    throw Error(ErrorKind::kInvalidArgument, where + "no batch size is in both " + train.path +
                                                 " (" + detail::join_ints(train_only) + ") and " +
                                                 power.path + " (" + detail::join_ints(power_only) +
                                                 ")");
  }
  for (std::string& note : detail::corrupted_name_notes(train, power, workload)) {
    trace.notes.push_back(std::move(note));
  }
  if (!train_only.empty() || !power_only.empty()) {
    std::string note = "batch sizes in only one of the two traces were left out:";
    if (!train_only.empty()) {
      note += " train only " + detail::join_ints(train_only) + (power_only.empty() ? "" : ";");
    }
    if (!power_only.empty()) {
      note += " power only " + detail::join_ints(power_only);
    }
    trace.notes.push_back(std::move(note));
  }
  detail::collect_power_limits(trace);
  detail::cap_default_batch_size(trace, "the " + std::string(gpu) + " trace");
  detail::check_target_reached(trace,
                               hardest_reached_hint(train_it->second, points_by_size, workload));
  detail::check_default_converges(trace);
  return trace;
}

}  // namespace

// ---- TraceDirectory ----

struct TraceDirectory::Data {
  // Files are parsed on first use and kept; a file that failed to parse is tried again next time.
  mutable std::mutex mutex;
  mutable std::shared_ptr<const TrainTable> train;
  mutable std::map<std::string, std::shared_ptr<const PowerTable>, std::less<>> power;
};

TraceDirectory::TraceDirectory(std::filesystem::path trace_dir)
    : dir_(std::move(trace_dir)), data_(std::make_shared<const Data>()) {}

WorkloadTrace TraceDirectory::load(std::string_view gpu, const Workload& workload) const {
  check_gpu_name(gpu);
  std::shared_ptr<const TrainTable> train;
  std::shared_ptr<const PowerTable> power;
  {
    const std::lock_guard<std::mutex> lock(data_->mutex);
    if (!data_->train) {
      data_->train = parse_train(dir_ / kTrainFile);
    }
    train = data_->train;
    auto it = data_->power.find(gpu);
    if (it == data_->power.end()) {
      it = data_->power.emplace(std::string(gpu), parse_power(dir_ / power_file_name(gpu))).first;
    }
    power = it->second;
  }
  return build_trace(*train, *power, dir_, gpu, workload);
}

WorkloadTrace load_trace(const std::filesystem::path& trace_dir, std::string_view gpu,
                         const Workload& workload) {
  return TraceDirectory(trace_dir).load(gpu, workload);
}

}  // namespace zeus::sim
