#include "zeus/monitor/zeus_monitor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/log.hpp"
#include "common/output_file.hpp"
#include "monitor/window_log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"

namespace zeus::monitor {
namespace {

std::string join_indices(const std::vector<int>& indices) {
  std::string text;
  for (const int index : indices) {
    text += (text.empty() ? "" : ", ") + std::to_string(index);
  }
  return text;
}

double wall_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// The options are read here, before anything moves them (the order in which a constructor's
// arguments are evaluated is unspecified: a check reading `options` beside a `std::move(options)`
// argument may see them moved-from, which once hid the reason CPU packages could not be read).
ZeusMonitor::DefaultDevices ZeusMonitor::default_devices(ZeusMonitorOptions options) {
  static const device::Gpus kNoGpus;
  const bool no_gpu = options.gpu_indices && options.gpu_indices->empty();
  const device::Gpus* gpus = no_gpu ? &kNoGpus : &device::get_gpus();
  std::vector<std::shared_ptr<device::Cpu>> cpus = discovered_cpus(options.cpu_indices);
  if (options.discover_soc && !options.soc) {
    options.soc = device::get_soc().soc;
  }
  return {gpus, std::move(cpus), std::move(options)};
}

std::vector<std::shared_ptr<device::Cpu>> discovered_cpus(
    const std::optional<std::vector<int>>& cpu_indices) {
  if (cpu_indices && cpu_indices->empty()) {
    return {};
  }
  const device::CpuDiscovery& discovery = device::get_cpus();
  if (cpu_indices && discovery.cpus.empty()) {
    throw Error(
        discovery.permission_denied ? ErrorKind::kNoPermission : ErrorKind::kNotSupported,
        "CPU packages " + join_indices(*cpu_indices) + " were asked for, but: " + discovery.message,
        ErrorSubject::kCpu);
  }
  return discovery.cpus;
}

ZeusMonitor::ZeusMonitor(ZeusMonitorOptions options)
    : ZeusMonitor(default_devices(std::move(options))) {}

ZeusMonitor::ZeusMonitor(DefaultDevices devices)
    : ZeusMonitor(*devices.gpus, std::move(devices.cpus), std::move(devices.options)) {}

ZeusMonitor::ZeusMonitor(const device::Gpus& gpus, std::vector<std::shared_ptr<device::Cpu>> cpus,
                         ZeusMonitorOptions options)
    : clock_(options.clock ? options.clock : steady_clock()),
      sync_(std::move(options.sync)),
      on_window_end_(std::move(options.on_window_end)),
      approx_instant_energy_(options.approx_instant_energy) {
  if (options.gpu_indices) {
    gpu_indices_ = *options.gpu_indices;
  } else {
    for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
      gpu_indices_.push_back(i);
    }
  }
  std::vector<int> sampled;
  for (std::size_t i = 0; i < gpu_indices_.size(); ++i) {
    if (std::count(gpu_indices_.begin(), gpu_indices_.end(), gpu_indices_[i]) > 1) {
      throw Error(ErrorKind::kInvalidArgument,
                  "GPU " + std::to_string(gpu_indices_[i]) + " is listed twice");
    }
    gpus_.push_back(gpus.shared(gpu_indices_[i]));  // throws listing the valid indices
    gpu_has_counter_.push_back(gpus_.back()->supports_energy_counter());
    if (!gpu_has_counter_.back()) {
      sampled.push_back(gpu_indices_[i]);
    }
  }

  warned_zero_energy_ = std::vector<std::atomic<bool>>(gpus_.size());
  for (std::atomic<bool>& warned : warned_zero_energy_) {
    warned = !options.warn_zero_energy;
  }
  init_error_bounds(options.sensor_parameters);
  warned_short_window_ = !options.warn_short_windows;
  auto scopes = std::make_shared<GpuEnergyScopes>();
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    scopes->emplace_back(gpu_indices_[i], gpus_[i]->energy_scope());
  }
  std::sort(scopes->begin(), scopes->end());
  energy_scopes_ = std::move(scopes);

  std::vector<int> available;
  for (const auto& cpu : cpus) {
    available.push_back(cpu->index());
  }
  if (options.cpu_indices) {
    cpu_indices_ = *options.cpu_indices;
  } else {
    cpu_indices_ = available;
  }
  for (const int index : cpu_indices_) {
    const auto found = std::find_if(cpus.begin(), cpus.end(),
                                    [index](const auto& cpu) { return cpu->index() == index; });
    if (found == cpus.end()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "CPU package " + std::to_string(index) + " is invalid: " +
                      (available.empty() ? std::string("no CPU package is available")
                                         : "available packages are " + join_indices(available)),
                  ErrorSubject::kCpu);
    }
    if (std::count(cpu_indices_.begin(), cpu_indices_.end(), index) > 1) {
      throw Error(ErrorKind::kInvalidArgument,
                  "CPU package " + std::to_string(index) + " is listed twice", ErrorSubject::kCpu);
    }
    cpus_.push_back(*found);
    if ((*found)->has_dram()) {
      dram_indices_.push_back(index);
      drams_.push_back(*found);
    }
  }
  if (options.warn_module_scope && !cpus_.empty()) {
    warn_module_scope();
  }
  // Windows may last longer than a counter takes to wrap: keep the counters read (docs/rapl.md).
  cpu_tracking_ = device::track_wraparound(cpus_);

  if (!sampled.empty()) {
    PowerSamplerOptions sampler_options;
    sampler_options.gpu_indices = sampled;
    sampler_options.period_s = options.sampler_period_s;
    sampler_options.clock = clock_;
    sampler_options.start_thread = options.start_sampler_thread;
    log().info("GPUs {} have no energy counter; their energy comes from sampled power",
               join_indices(sampled));
    sampler_ = std::make_unique<PowerSampler>(gpus, std::move(sampler_options));
    sampler_->sample_once();  // so that a window can begin right away
  }

  if (options.soc) {
    SocSamplerOptions soc_options;
    soc_options.period_s = options.soc_period_s;
    soc_options.clock = clock_;
    soc_options.start_thread = options.start_sampler_thread;
    soc_sampler_ = std::make_unique<SocSampler>(options.soc, std::move(soc_options));
    log().info("measuring the {}'s {} power rail(s), polled every {:g} s", options.soc->model(),
               options.soc->rails().size(), soc_sampler_->period_s());
  }

  if (!options.log_file.empty()) {
    // Streamed in place (a run that is killed keeps its rows), close-on-exec (docs/cli.md).
    OutputFileOptions log_options;
    log_options.what = "the monitor log";
    log_options.replace_atomically = false;
    log_options.create_parent_directories = true;
    try {
      log_ = std::make_unique<OutputFile>(options.log_file, std::move(log_options));
    } catch (const Error& error) {
      // A log path that cannot be a file (a directory, a socket) is a failure to open it, as
      // Python's open() says (OSError), not a malformed argument.
      throw Error(error.kind() == ErrorKind::kInvalidArgument ? ErrorKind::kIo : error.kind(),
                  error.what());
    }
    log_->stream() << window_log::header_line(gpu_indices_) << std::flush;
  }
}

ZeusMonitor::~ZeusMonitor() = default;

void ZeusMonitor::warn_module_scope() const {
  std::vector<int> module;
  for (const auto& [index, scope] : *energy_scopes_) {
    if (scope == device::MeasuredScope::kModule) {
      module.push_back(index);
    }
  }
  if (!module.empty()) {
    log().warn(
        "GPUs {} measure their whole module (GPU + CPU + memory of a Grace superchip): the CPU "
        "and DRAM energy of the same windows is already part of their GPU energy; do not add it",
        join_indices(module));
  }
}

void ZeusMonitor::init_error_bounds(const SensorSource& source) {
  auto bounds = std::make_shared<GpuErrorBounds>();
  double longest_lag_s = 0.0;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    std::optional<device::SensorParameters> known = source ? source(*gpus_[i]) : std::nullopt;
    sensors_.push_back(known ? std::move(*known) : default_sensor_parameters(*gpus_[i]));
    peak_power_w_.push_back(peak_power_w(*gpus_[i]));
    const device::SensorParameters& sensor = sensors_.back();
    if (gpu_has_counter_[i]) {
      bounds->emplace_back(gpu_indices_[i], counter_error_bound(sensor, peak_power_w_.back()));
      longest_lag_s = std::max(longest_lag_s, sensor.counter_refresh_s + sensor.reading_delay_s);
    } else {
      bounds->emplace_back(gpu_indices_[i], polled_error_bound(peak_power_w_.back()));
    }
  }
  std::sort(bounds->begin(), bounds->end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  error_bounds_ = std::move(bounds);
  short_window_s_ = kShortWindowRefreshPeriods * longest_lag_s;
}

std::vector<CounterPowerCheck> ZeusMonitor::cross_check(const CrossCheckOptions& options) const {
  std::vector<CrossCheckedGpu> checked;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    if (gpu_has_counter_[i]) {
      checked.push_back({.index = gpu_indices_[i],
                         .gpu = gpus_[i],
                         .bound = counter_error_bound(sensors_[i], peak_power_w_[i]),
                         .peak_power_w = peak_power_w_[i]});
    }
  }
  std::vector<CounterPowerCheck> checks = cross_check_counter_and_power(checked, *clock_, options);
  for (const CounterPowerCheck& check : checks) {
    if (check.disagrees) {
      log().warn(
          "GPU {}: its energy counter ({:.3f} J) and its polled power ({:.3f} J) disagree by "
          "{:.0f}% over {:.3f} s; trust the {}: {}",
          check.gpu_index, check.counter_energy_j, check.power_energy_j, check.difference * 100.0,
          check.duration_s, trust_name(check.trust), check.reason);
    }
  }
  return checks;
}

void ZeusMonitor::rethrow_device_error(const std::string& device, ErrorSubject subject,
                                       const std::exception& error,
                                       const std::string& window) const {
  const auto* zeus_error = dynamic_cast<const Error*>(&error);
  throw Error(zeus_error != nullptr ? zeus_error->kind() : ErrorKind::kUnknown,
              device + " could not be read for window '" + window + "': " + error.what(), subject);
}

void ZeusMonitor::take_snapshot(Snapshot& snapshot, const std::string& window) {
  snapshot.values.resize(gpus_.size() + cpus_.size() + drams_.size());
  snapshot.wall_time_s = log_ != nullptr ? wall_time_s() : 0.0;
  snapshot.time_ns = clock_->now_ns();
  std::size_t slot = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i, ++slot) {
    try {
      if (gpu_has_counter_[i]) {
        snapshot.values[slot] = static_cast<double>(gpus_[i]->total_energy_mj());
      } else {
        sampler_->rethrow_if_failed();
        snapshot.values[slot] = sampler_
                                    ->cumulative_energy_j(sampler_->domains().front(),
                                                          gpu_indices_[i], snapshot.time_ns)
                                    .value_or(0.0);
      }
    } catch (const std::exception& error) {
      rethrow_device_error("GPU " + std::to_string(gpu_indices_[i]), ErrorSubject::kGpu, error,
                           window);
    }
  }
  for (std::size_t i = 0; i < cpus_.size(); ++i, ++slot) {
    try {
      snapshot.values[slot] = static_cast<double>(cpus_[i]->package_energy_uj());
    } catch (const std::exception& error) {
      rethrow_device_error("CPU package " + std::to_string(cpu_indices_[i]), ErrorSubject::kCpu,
                           error, window);
    }
  }
  for (std::size_t i = 0; i < drams_.size(); ++i, ++slot) {
    try {
      snapshot.values[slot] = static_cast<double>(drams_[i]->dram_energy_uj());
    } catch (const std::exception& error) {
      rethrow_device_error("DRAM of CPU package " + std::to_string(dram_indices_[i]),
                           ErrorSubject::kCpu, error, window);
    }
  }
  if (soc_sampler_) {
    soc_sampler_->read(snapshot.time_ns, snapshot.soc);  // failed rail reads are held, not thrown
  }
}

ZeusMonitor::Windows::node_type ZeusMonitor::take_spare() {
  std::lock_guard lock(mutex_);
  if (spare_.empty()) {
    return {};
  }
  Windows::node_type node = std::move(spare_.back());
  spare_.pop_back();
  return node;
}

void ZeusMonitor::recycle(Windows::node_type node) {
  if (node.empty()) {
    return;
  }
  std::lock_guard lock(mutex_);
  spare_.push_back(std::move(node));
}

void ZeusMonitor::begin_window(const std::string& name, BeginWindowOptions options) {
  if (log_ != nullptr) {
    window_log::check_window_name(name);
  }
  {
    std::lock_guard lock(mutex_);
    if (windows_.count(name) != 0 && !options.restart) {
      throw Error(
          ErrorKind::kInvalidArgument,
          "window '" + name + "' is already open; end it first, or begin it with restart=true");
    }
  }
  if (options.sync_execution && sync_ && !gpu_indices_.empty()) {
    sync_(gpu_indices_);
  }
  std::lock_guard lock(mutex_);
  if (auto existing = windows_.find(name); existing != windows_.end()) {
    if (!options.restart) {
      throw Error(ErrorKind::kInvalidArgument, "window '" + name + "' is already open");
    }
    log().info("restarting window '{}'", name);
    spare_.push_back(windows_.extract(existing));
  }
  if (!spare_.empty()) {
    Windows::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = name;
    try {
      take_snapshot(node.mapped(), name);
    } catch (...) {
      spare_.push_back(std::move(node));
      throw;
    }
    windows_.insert(std::move(node));
  } else {
    Snapshot snapshot;
    take_snapshot(snapshot, name);
    windows_.emplace(name, std::move(snapshot));
  }
}

Measurement ZeusMonitor::end_window(const std::string& name, EndWindowOptions options) {
  Windows::node_type node;
  {
    std::lock_guard lock(mutex_);
    node = windows_.extract(name);
    if (node.empty()) {
      std::vector<std::string> names;
      for (const auto& entry : windows_) {
        names.push_back("'" + entry.first + "'");
      }
      std::sort(names.begin(), names.end());
      throw Error(
          ErrorKind::kInvalidArgument,
          "no open window named '" + name + "' (open windows: " +
              (names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))) +
              ")");
    }
  }
  // The window is closed from here on, whatever happens next.
  Measurement result;
  result.gpu_energy_j.reserve(gpus_.size());
  result.cpu_energy_j.reserve(cpus_.size());
  result.dram_energy_j.reserve(drams_.size());
  if (options.cancel) {
    recycle(std::move(node));
    for (const int index : gpu_indices_) {
      result.gpu_energy_j.set(index, 0.0);
    }
    for (const int index : cpu_indices_) {
      result.cpu_energy_j.set(index, 0.0);
    }
    for (const int index : dram_indices_) {
      result.dram_energy_j.set(index, 0.0);
    }
    if (soc_sampler_) {
      result.soc_energy = soc_sampler_->energy_between({}, {});
    }
    return result;
  }

  // A finished window's storage holds the end readings (no allocation after warm-up).
  Windows::node_type scratch = take_spare();
  Snapshot local;
  Snapshot& end = scratch.empty() ? local : scratch.mapped();
  try {
    if (options.sync_execution && sync_ && !gpu_indices_.empty()) {
      sync_(gpu_indices_);
    }
    take_snapshot(end, name);
  } catch (...) {
    recycle(std::move(node));
    recycle(std::move(scratch));
    throw;
  }

  const Snapshot& start = node.mapped();
  result.time_s = units::seconds_from_nanoseconds(end.time_ns - start.time_ns);
  std::size_t slot = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i, ++slot) {
    double energy_j = end.values[slot] - start.values[slot];
    if (gpu_has_counter_[i]) {
      energy_j /= 1000.0;  // mJ
    }
    if (energy_j == 0.0 && result.time_s > 0.0) {
      if (approx_instant_energy_) {
        try {
          energy_j = units::watts_from_milliwatts(gpus_[i]->instant_power_mw()) * result.time_s;
        } catch (const std::exception& error) {
          recycle(std::move(node));
          recycle(std::move(scratch));
          rethrow_device_error("GPU " + std::to_string(gpu_indices_[i]), ErrorSubject::kGpu, error,
                               name);
        }
      } else if (!warned_zero_energy_[i].load(std::memory_order_relaxed) &&
                 !warned_zero_energy_[i].exchange(true)) {
        log().warn(
            "GPU {} measured 0 J over window '{}' ({:.6f} s): its energy counter updates too "
            "rarely for so short a window; enable approx_instant_energy to estimate it from power "
            "(said once per GPU)",
            gpu_indices_[i], name, result.time_s);
      }
    }
    result.gpu_energy_j.set(gpu_indices_[i], energy_j);
  }
  result.gpu_error_bounds = error_bounds_;
  result.gpu_energy_scopes = energy_scopes_;
  if (result.time_s < short_window_s_ && !warned_short_window_.load(std::memory_order_relaxed) &&
      !warned_short_window_.exchange(true)) {
    warn_short_window(name, result);
  }
  for (std::size_t i = 0; i < cpus_.size(); ++i, ++slot) {
    result.cpu_energy_j.set(cpu_indices_[i],
                            units::joules_from_microjoules(end.values[slot] - start.values[slot]));
  }
  for (std::size_t i = 0; i < drams_.size(); ++i, ++slot) {
    result.dram_energy_j.set(dram_indices_[i],
                             units::joules_from_microjoules(end.values[slot] - start.values[slot]));
  }
  if (soc_sampler_) {
    result.soc_energy = soc_sampler_->energy_between(start.soc, end.soc);
    if (result.soc_energy->skipped_reads > 0 &&
        !warned_soc_skips_.load(std::memory_order_relaxed) && !warned_soc_skips_.exchange(true)) {
      log().warn(
          "window '{}': {} SoC rail read(s) failed and were skipped (each rail's last power held "
          "over them; Measurement's soc_energy.skipped_reads; said once per monitor)",
          name, result.soc_energy->skipped_reads);
    }
  }
  if (log_ != nullptr) {
    std::lock_guard lock(mutex_);
    write_log_row(name, start, result);
  }
  recycle(std::move(node));
  recycle(std::move(scratch));
  if (on_window_end_) {
    on_window_end_(name, result);
  }
  return result;
}

void ZeusMonitor::warn_short_window(const std::string& name, const Measurement& result) const {
  double largest_j = 0.0;
  for (const auto& [index, bound] : *error_bounds_) {
    largest_j = std::max(largest_j, bound.at(result.time_s));
  }
  log().warn(
      "window '{}' lasted {:.6f} s, under {:g} refresh periods of the GPU energy counters "
      "({:.3f} s): each GPU's energy may be off by up to {:.3f} J (Measurement's "
      "gpu_energy_error_j); measure longer windows for a smaller error (said once per monitor)",
      name, result.time_s, kShortWindowRefreshPeriods, short_window_s_ / kShortWindowRefreshPeriods,
      largest_j);
}

void ZeusMonitor::write_log_row(const std::string& name, const Snapshot& start,
                                const Measurement& result) {
  log_->stream() << window_log::row_line(start.wall_time_s, name, result.time_s, gpu_indices_,
                                         result.gpu_energy_j)
                 << std::flush;
}

void ZeusMonitor::reset_windows() {
  std::lock_guard lock(mutex_);
  if (!windows_.empty()) {
    log().info("dropping {} open window(s)", windows_.size());
  }
  while (!windows_.empty()) {
    spare_.push_back(windows_.extract(windows_.begin()));
  }
}

std::vector<std::string> ZeusMonitor::open_windows() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& entry : windows_) {
    names.push_back(entry.first);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace zeus::monitor
