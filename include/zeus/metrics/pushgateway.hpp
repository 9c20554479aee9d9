// Prometheus push export (the reference's zeus.metric push model): a Pushgateway client, the
// counter and gauge families of the reference's EnergyCumulativeCounter and PowerGauge, and the
// background pushers that sample them every period on one thread. The window histograms
// (EnergyHistogram) are WindowHistograms of prometheus.hpp, rendered and pushed with
// PushgatewayClient. See docs/prometheus.md ("Push to a Pushgateway").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "zeus/device/cpu.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/monitor/measurement.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::metrics {

using GroupingKey = std::vector<std::pair<std::string, std::string>>;

struct PushgatewayOptions {
  // "http://host:port", optionally with a path prefix ("http://host:9091/prefix"); without a
  // scheme, http is meant ("host:9091"), as the reference's client assumes.
  std::string url;
  // The job label of every pushed series (the grouping key's first part). Any text but empty.
  std::string job;
  // More grouping-key labels (e.g. instance); names must be valid label names.
  GroupingKey grouping;
  double connect_timeout_s = 3.0;
  double timeout_s = 10.0;  // for sending the body and reading the answer
};

// "/metrics/job/<job>[/<label>/<value>...]": a value that is empty or holds '/' goes as
// "<label>@base64/<url-safe base64>" (the Pushgateway's rule), any other is percent-escaped.
std::string pushgateway_group_path(std::string_view job, const GroupingKey& grouping);

// Sends text-exposition bodies to one Pushgateway group. Each request opens its own connection,
// so the methods may be called from several threads. A failure throws Error(kUnavailable) naming
// the group URL and saying what went wrong (no connection, timeout, connection closed, or the
// HTTP status and the gateway's answer); never blocks longer than the two timeouts.
class PushgatewayClient {
 public:
  // Throws Error(kInvalidArgument) for a malformed URL, an empty job, a bad grouping label name
  // or a timeout that is not positive and finite.
  explicit PushgatewayClient(PushgatewayOptions options);
  ~PushgatewayClient();
  PushgatewayClient(PushgatewayClient&&) noexcept;
  PushgatewayClient& operator=(PushgatewayClient&&) noexcept;

  // PUT: the group's metrics become exactly `body` (what the reference's push_to_gateway does).
  void push(const std::string& body) const;
  // POST: replaces only the families that `body` holds.
  void push_add(const std::string& body) const;
  // DELETE: drops the group.
  void remove() const;
  // Requests in flight fail at once and later ones are refused (used on shutdown so that a
  // gateway that never answers cannot hold a thread). Thread-safe.
  void cancel() const;

  // "http://host:port[/prefix]/metrics/job/<job>..." (for messages).
  const std::string& group_url() const;

 private:
  struct State;
  void send(const char* method, const std::string& body) const;
  std::unique_ptr<State> state_;
};

// Energy counters per window and device, pushed as the reference's EnergyCumulativeCounter's:
//   energy_monitor_gpu_energy_joules_total{window,index}, energy_monitor_cpu_energy_joules_total,
//   energy_monitor_dram_energy_joules_total (counters; a family is declared once it has a series).
// Not thread-safe (its pusher locks).
class WindowEnergyCounters {
 public:
  void add(const std::string& window, const monitor::Measurement& measurement);
  void erase(const std::string& window);
  void render(std::string& out) const;
  // The value of one series, for tests. kind: "gpu", "cpu" or "dram".
  std::optional<double> value(std::string_view kind, const std::string& window, int index) const;

 private:
  using Key = std::pair<std::string, int>;
  std::map<Key, double> gpu_j_, cpu_j_, dram_j_;
};

// GPU power per window and device: power_monitor_gpu_power_watts{window,index} (gauge), as the
// reference's PowerGauge. Not thread-safe.
class WindowPowerGauges {
 public:
  void set(const std::string& window, int index, double watts);
  void erase(const std::string& window);
  void render(std::string& out) const;
  std::optional<double> value(const std::string& window, int index) const;

 private:
  std::map<std::pair<std::string, int>, double> watts_;
};

// How the pushes of a pusher went (cumulative).
struct PushStats {
  std::uint64_t pushes = 0;         // attempted
  std::uint64_t failures = 0;       // of those, failed
  std::uint64_t sample_errors = 0;  // device reads that failed (the series keep their values)
  std::string last_error;           // empty when none failed yet
};

// Windows measured every `period_s` on ONE background thread per pusher, pushed (PUT) after every
// sample. begin_window starts the thread when it is the first open window; end_window samples the
// window once more, pushes, forgets the window's series and joins the thread when it was the last.
// A failed push is logged (once per run of failures) and counted, never thrown: a Pushgateway
// that is down must not stop a training job. Memory is bounded by the open windows.
class WindowPusher {
 public:
  virtual ~WindowPusher();
  WindowPusher(const WindowPusher&) = delete;
  WindowPusher& operator=(const WindowPusher&) = delete;

  // Throws Error(kAlreadyExists) when `name` is open, Error(kUnavailable) after shutdown().
  void begin_window(const std::string& name);
  // Throws Error(kNotFound) when `name` is not open. Returns whether the final push succeeded.
  bool end_window(const std::string& name);
  std::vector<std::string> open_windows() const;
  PushStats stats() const;
  double period_s() const { return period_s_; }
  const PushgatewayClient& client() const { return client_; }
  // The body the next push would send.
  std::string render() const;
  // Stops the thread without a final push and cancels a push in flight (the destructor's path).
  void shutdown();

 protected:
  // Throws Error(kInvalidArgument) for a period that is not finite or under 1 ms.
  WindowPusher(PushgatewayClient client, double period_s);
  // Called with the state lock held, on the calling or the sampler thread.
  virtual void start_window(const std::string& window) = 0;
  virtual void sample_window(const std::string& window) = 0;
  virtual void finish_window(const std::string& window) = 0;  // last sample, then forget it
  virtual void render_families(std::string& out) const = 0;
  void count_sample_error();
  // The state lock, for a derived class's readers.
  std::unique_lock<std::mutex> lock_state() const { return std::unique_lock(mutex_); }

 private:
  void run();
  // Pushes the current state; the caller holds push_mutex_.
  bool push_locked(const std::string& body);
  void stop_thread();

  PushgatewayClient client_;
  double period_s_;
  std::mutex lifecycle_mutex_;  // begin/end/shutdown, one at a time
  std::mutex push_mutex_;       // render+push, in order
  mutable std::mutex mutex_;    // windows, families, stats
  std::set<std::string> windows_;
  PushStats stats_;
  bool failing_ = false;
  bool shutting_down_ = false;  // pushes cancelled by shutdown() are not warned about
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// The reference's EnergyCumulativeCounter: each open window's energy, measured by a ZeusMonitor
// window "__EnergyCumulativeCounter_<name>" restarted every period, added to its counters.
class EnergyCounterPusher final : public WindowPusher {
 public:
  // cpu_indices: packages among `cpus` (nullopt: all of them). Throws what ZeusMonitor's
  // constructor throws for bad indices, and WindowPusher's errors.
  EnergyCounterPusher(const device::Gpus& gpus, std::vector<int> gpu_indices,
                      std::vector<std::shared_ptr<device::Cpu>> cpus,
                      std::optional<std::vector<int>> cpu_indices, double period_s,
                      PushgatewayClient client);
  ~EnergyCounterPusher() override;
  std::optional<double> value(std::string_view kind, const std::string& window, int index) const;

 private:
  static std::string internal_name(const std::string& window);
  void start_window(const std::string& window) override;
  void sample_window(const std::string& window) override;
  void finish_window(const std::string& window) override;
  void render_families(std::string& out) const override;

  std::unique_ptr<monitor::ZeusMonitor> monitor_;
  WindowEnergyCounters counters_;
};

// The reference's PowerGauge: every period, each open window's gauges take the GPUs' instant power.
class PowerGaugePusher final : public WindowPusher {
 public:
  // Throws Error(kInvalidArgument) for a GPU index that does not exist.
  PowerGaugePusher(const device::Gpus& gpus, std::vector<int> gpu_indices, double period_s,
                   PushgatewayClient client);
  ~PowerGaugePusher() override;
  std::optional<double> value(const std::string& window, int index) const;

 private:
  void start_window(const std::string& window) override;
  void sample_window(const std::string& window) override;
  void finish_window(const std::string& window) override;
  void render_families(std::string& out) const override;

  std::vector<std::pair<int, std::shared_ptr<device::Gpu>>> gpus_;
  WindowPowerGauges gauges_;
};

}  // namespace zeus::metrics
