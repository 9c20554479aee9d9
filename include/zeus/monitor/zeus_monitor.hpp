// ZeusMonitor: energy and time of named code windows on GPUs, CPU packages and DRAM.
#pragma once

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/cpu.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/sensor.hpp"
#include "zeus/monitor/measurement_error.hpp"
#include "zeus/monitor/power_sampler.hpp"
#include "zeus/monitor/soc_sampler.hpp"
#include "zeus/monitor/window_monitor.hpp"

namespace zeus {
class OutputFile;  // src/common/output_file.hpp
}  // namespace zeus

namespace zeus::monitor {

// Called before reading devices when a window begins or ends with sync_execution, with the
// monitored GPU indices (e.g. torch.cuda.synchronize on each). Exceptions propagate.
using SyncHook = std::function<void(const std::vector<int>& gpu_indices)>;

// Called after every completed (not cancelled) window with its name and measurement, on the
// thread that ended it (e.g. WindowHistograms::observe for Prometheus). Exceptions propagate.
using WindowObserver = std::function<void(const std::string& window, const Measurement&)>;

// A GPU's sensor parameters (its counter's refresh period, resolution, reading delay), for the
// error bounds; nullopt when unknown, and then conservative_sensor_parameters() is assumed.
using SensorSource = std::function<std::optional<device::SensorParameters>(device::Gpu& gpu)>;

struct ZeusMonitorOptions {
  // GPU indices (as the process sees them, after CUDA_VISIBLE_DEVICES); nullopt = all, {} = none.
  std::optional<std::vector<int>> gpu_indices;
  // CPU package indices; nullopt = all available packages, {} = none.
  std::optional<std::vector<int>> cpu_indices;
  // When set, one CSV row per completed window in the reference's format
  // (start_time,window_name,elapsed_time,gpu<i>_energy,...). Parent folders are created.
  std::filesystem::path log_file;
  SyncHook sync;
  WindowObserver on_window_end;
  std::shared_ptr<Clock> clock;  // the steady clock when null
  // For a GPU whose window energy is exactly 0 (counter not updated yet), use instant power x
  // time instead.
  bool approx_instant_energy = false;
  // Sampler period for GPUs without an energy counter (inferred when unset).
  std::optional<double> sampler_period_s;
  // Start the sampler thread for counter-less GPUs. Tests turn it off and drive sampler().
  bool start_sampler_thread = true;
  // Where each GPU's sensor parameters come from (error bounds, the short-window warning); when
  // unset, or nullopt for a GPU, default_sensor_parameters() (measurement_error.hpp).
  SensorSource sensor_parameters;
  // Log a warning (once) for the first window shorter than short_window_s(). `zeus monitor`
  // says it in its summary instead.
  bool warn_short_windows = true;
  // Log a warning (once per GPU) for a window in which a GPU measured 0 J. The Python module
  // turns it off: it warns through Python's warnings at every such window, as the reference
  // does, and one window should not be reported twice.
  bool warn_zero_energy = true;
  // Log a warning (once, at construction) when a monitored GPU's energy is module energy and CPU
  // packages are monitored too: their figures are already part of the module's. `zeus monitor`
  // says it in its summary instead.
  bool warn_module_scope = true;
  // The SoC whose power rails every window measures too (a Jetson: Measurement::soc_energy).
  // The constructor without devices takes device::get_soc()'s unless discover_soc is false; the
  // one with explicit devices measures only this one.
  std::shared_ptr<const device::JetsonSoc> soc;
  bool discover_soc = true;
  // How often the SoC's rails are polled (SocSamplerOptions::period_s); start_sampler_thread
  // applies to its sampler as well.
  double soc_period_s = kDefaultSocPeriodS;
};

// get_cpus()'s packages, for a monitor asked for `cpu_indices` (nullopt: every one, {}: none,
// and then an empty list). Throws Error(kNoPermission), or kNotSupported without RAPL, with the
// discovery's reason and its fixes (root-only energy_uj since Linux 5.10: root, a chmod rule,
// zeusd) when packages were asked for and none can be read.
std::vector<std::shared_ptr<device::Cpu>> discovered_cpus(
    const std::optional<std::vector<int>>& cpu_indices);

class ZeusMonitor final : public WindowMonitor {
 public:
  // Uses get_gpus() and get_cpus(); with gpu_indices {} no GPU is discovered (nothing is said
  // about a machine without GPUs when none was asked for). Throws Error(kNoPermission) (or
  // kNotSupported) with the discovery's reason and its fixes when CPU packages were asked for
  // and none can be read.
  explicit ZeusMonitor(ZeusMonitorOptions options = {});
  // Explicit devices. Throws Error(kInvalidArgument) for an invalid GPU or CPU index (listing the
  // valid ones) and Error(kNoPermission) when CPU packages were asked for but cannot be read.
  ZeusMonitor(const device::Gpus& gpus, std::vector<std::shared_ptr<device::Cpu>> cpus,
              ZeusMonitorOptions options);
  ~ZeusMonitor() override;

  void begin_window(const std::string& name, BeginWindowOptions options = {}) override;
  Measurement end_window(const std::string& name, EndWindowOptions options = {}) override;
  // Drops every open window.
  void reset_windows();
  std::vector<std::string> open_windows() const;

  const std::vector<int>& gpu_indices() const override { return gpu_indices_; }
  const std::vector<int>& cpu_indices() const { return cpu_indices_; }
  // The sampler measuring GPUs without an energy counter, or nullptr when every GPU has one.
  PowerSampler* sampler() const { return sampler_.get(); }
  // The sampler of the SoC's rails, or nullptr when no SoC is measured.
  SocSampler* soc_sampler() const { return soc_sampler_.get(); }

  // Each GPU's error bound (what Measurement::gpu_energy_error_j reports), by GPU index.
  const GpuErrorBounds& gpu_error_bounds() const { return *error_bounds_; }
  // What each monitored GPU's energy covers (Measurement::gpu_energy_scopes), by GPU index.
  const GpuEnergyScopes& gpu_energy_scopes() const { return *energy_scopes_; }
  // Windows shorter than this are short for the GPUs' counters: kShortWindowRefreshPeriods x
  // the longest refresh period plus delay (0 when every GPU's reads are current).
  double short_window_s() const { return short_window_s_; }
  // The sensor parameters assumed for each monitored GPU, in gpu_indices() order.
  const std::vector<device::SensorParameters>& sensor_parameters() const { return sensors_; }
  // Compares each counter GPU's energy counter with its polled power (measurement_error.hpp) and
  // logs a warning for each disagreement over 10%, saying which to trust. GPUs without a counter
  // are left out. Blocks for options.duration_s.
  std::vector<CounterPowerCheck> cross_check(const CrossCheckOptions& options = {}) const;

 private:
  // The devices of the first constructor, chosen before its options are moved on.
  struct DefaultDevices {
    const device::Gpus* gpus = nullptr;
    std::vector<std::shared_ptr<device::Cpu>> cpus;
    ZeusMonitorOptions options;
  };
  static DefaultDevices default_devices(ZeusMonitorOptions options);
  explicit ZeusMonitor(DefaultDevices devices);

  // Cumulative readings at one instant. Values are in the devices' units (mJ, µJ) or, for
  // sampled GPUs, joules of the sampler's virtual counter.
  struct Snapshot {
    std::int64_t time_ns = 0;
    double wall_time_s = 0.0;
    std::vector<double> values;  // GPUs, then CPU packages, then DRAM zones
    SocReading soc;              // the SoC's rails (empty without a SoC)
  };

  using Windows = std::unordered_map<std::string, Snapshot>;

  // Reads every device; a failure names the device and the window.
  void take_snapshot(Snapshot& snapshot, const std::string& window);
  Windows::node_type take_spare();
  void recycle(Windows::node_type node);
  [[noreturn]] void rethrow_device_error(const std::string& device, ErrorSubject subject,
                                         const std::exception& error,
                                         const std::string& window) const;
  void init_error_bounds(const SensorSource& source);
  void warn_module_scope() const;
  void warn_short_window(const std::string& name, const Measurement& result) const;
  void write_log_row(const std::string& name, const Snapshot& start, const Measurement& result);

  std::shared_ptr<Clock> clock_;
  SyncHook sync_;
  WindowObserver on_window_end_;
  bool approx_instant_energy_;
  std::vector<int> gpu_indices_;
  std::vector<std::shared_ptr<device::Gpu>> gpus_;
  std::vector<bool> gpu_has_counter_;
  std::vector<std::atomic<bool>> warned_zero_energy_;   // per GPU: the 0 J warning was given
  std::vector<device::SensorParameters> sensors_;       // per GPU
  std::shared_ptr<const GpuErrorBounds> error_bounds_;  // shared with every Measurement
  std::vector<double> peak_power_w_;                    // per GPU
  // What each GPU's energy covers, shared with every Measurement as the error bounds are.
  std::shared_ptr<const GpuEnergyScopes> energy_scopes_;
  double short_window_s_ = 0.0;  // windows shorter than this are warned about, once
  std::atomic<bool> warned_short_window_{false};
  std::vector<int> cpu_indices_;
  std::vector<std::shared_ptr<device::Cpu>> cpus_;
  std::vector<int> dram_indices_;  // packages (from cpu_indices_) with a DRAM zone
  std::vector<std::shared_ptr<device::Cpu>> drams_;
  std::shared_ptr<void> cpu_tracking_;  // RAPL wraparound tracking while this monitor lives
  std::unique_ptr<PowerSampler> sampler_;
  std::unique_ptr<SocSampler> soc_sampler_;
  std::atomic<bool> warned_soc_skips_{false};

  mutable std::mutex mutex_;  // guards windows_, spare_, the log
  Windows windows_;
  std::vector<Windows::node_type> spare_;  // finished windows, reused without allocating
  std::unique_ptr<OutputFile> log_;        // the log_file, when set
};

}  // namespace zeus::monitor
