// WindowPusher: one sampler thread per pusher that samples the open windows every period and
// pushes; EnergyCounterPusher and PowerGaugePusher fill it with the reference's families.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/metrics/pushgateway.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::metrics {

WindowPusher::WindowPusher(PushgatewayClient client, double period_s)
    : client_(std::move(client)), period_s_(period_s) {
  // At most a day: a longer wait would overflow the clock arithmetic of wait_for.
  if (!std::isfinite(period_s_) || period_s_ < monitor::kMinSamplingPeriodS ||
      period_s_ > monitor::kMaxSamplingPeriodS) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("the update period must be a number of seconds from 0.001 to 86400 "
                            "(one day); got {}",
                            period_s_));
  }
}

WindowPusher::~WindowPusher() {
  shutdown();
}

void WindowPusher::shutdown() {
  const std::lock_guard lifecycle(lifecycle_mutex_);
  {
    const std::lock_guard lock(mutex_);
    shutting_down_ = true;
  }
  client_.cancel();  // a gateway that never answers must not hold the destructor
  stop_thread();
  const std::lock_guard lock(mutex_);
  windows_.clear();
}

void WindowPusher::stop_thread() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  const std::lock_guard lock(stop_mutex_);
  stopping_ = false;
}

void WindowPusher::begin_window(const std::string& name) {
  const std::lock_guard lifecycle(lifecycle_mutex_);
  {
    const std::lock_guard lock(mutex_);
    if (shutting_down_) {
      throw Error(ErrorKind::kUnavailable,
                  fmt::format("cannot begin window '{}': this pusher was shut down", name));
    }
    if (windows_.count(name) != 0) {
      throw Error(
          ErrorKind::kAlreadyExists,
          fmt::format("window '{}' is already open; end it before beginning it again", name));
    }
    start_window(name);
    windows_.insert(name);
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { run(); });
  }
}

bool WindowPusher::end_window(const std::string& name) {
  const std::lock_guard lifecycle(lifecycle_mutex_);
  bool pushed = false;
  {
    const std::lock_guard push_lock(push_mutex_);
    std::string body;
    {
      const std::lock_guard lock(mutex_);
      if (windows_.count(name) == 0) {
        throw Error(ErrorKind::kNotFound,
                    fmt::format("window '{}' is not open; begin_window('{}') first", name, name));
      }
      // The last sample goes into this push; the window's series are forgotten after it, so
      // that memory stays bounded by the open windows.
      sample_window(name);
      render_families(body);
      finish_window(name);
      windows_.erase(name);
    }
    pushed = push_locked(body);
  }
  bool last = false;
  {
    const std::lock_guard lock(mutex_);
    last = windows_.empty();
  }
  if (last) {
    stop_thread();
  }
  return pushed;
}

std::vector<std::string> WindowPusher::open_windows() const {
  const std::lock_guard lock(mutex_);
  return {windows_.begin(), windows_.end()};
}

PushStats WindowPusher::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

std::string WindowPusher::render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  render_families(out);
  return out;
}

void WindowPusher::count_sample_error() {
  ++stats_.sample_errors;  // called from sample_window, with mutex_ held
}

bool WindowPusher::push_locked(const std::string& body) {
  std::string error;
  try {
    client_.push(body);
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::lock_guard lock(mutex_);
  ++stats_.pushes;
  if (error.empty()) {
    if (failing_) {
      log().warn("metrics: pushes to {} work again", client_.group_url());
    }
    failing_ = false;
    return true;
  }
  ++stats_.failures;
  stats_.last_error = error;
  if (!failing_ && !shutting_down_) {
    // Once per run of failures: a gateway that is down for an hour must not flood the log.
    log().warn("metrics: {} (the windows keep being measured; later pushes retry)", error);
  }
  failing_ = true;
  return false;
}

void WindowPusher::run() {
  const auto period = std::chrono::duration<double>(period_s_);
  std::unique_lock stop_lock(stop_mutex_);
  while (!stop_cv_.wait_for(stop_lock, period, [this] { return stopping_; })) {
    stop_lock.unlock();
    {
      const std::lock_guard push_lock(push_mutex_);
      std::string body;
      bool any = false;
      {
        const std::lock_guard lock(mutex_);
        for (const std::string& window : windows_) {
          sample_window(window);
        }
        any = !windows_.empty();
        if (any) {
          render_families(body);
        }
      }
      if (any) {
        push_locked(body);
      }
    }
    stop_lock.lock();
  }
}

// ---- EnergyCounterPusher ------------------------------------------------------------------

EnergyCounterPusher::EnergyCounterPusher(const device::Gpus& gpus, std::vector<int> gpu_indices,
                                         std::vector<std::shared_ptr<device::Cpu>> cpus,
                                         std::optional<std::vector<int>> cpu_indices,
                                         double period_s, PushgatewayClient client)
    : WindowPusher(std::move(client), period_s) {
  monitor::ZeusMonitorOptions options;
  options.gpu_indices = std::move(gpu_indices);
  options.cpu_indices = std::move(cpu_indices);
  monitor_ = std::make_unique<monitor::ZeusMonitor>(gpus, std::move(cpus), std::move(options));
}

EnergyCounterPusher::~EnergyCounterPusher() {
  shutdown();  // before the monitor and the counters go
}

std::string EnergyCounterPusher::internal_name(const std::string& window) {
  return "__EnergyCumulativeCounter_" + window;
}

void EnergyCounterPusher::start_window(const std::string& window) {
  monitor_->begin_window(internal_name(window));
}

void EnergyCounterPusher::sample_window(const std::string& window) {
  const std::string name = internal_name(window);
  try {
    const monitor::Measurement measurement = monitor_->end_window(name);
    monitor_->begin_window(name);
    counters_.add(window, measurement);
  } catch (const std::exception& error) {
    count_sample_error();
    log().warn("metrics: window '{}': {}", window, error.what());
    try {
      monitor_->begin_window(name);  // restart it when the failed end closed it
    } catch (const std::exception&) {
      // still open (or the devices keep failing): the next period retries
    }
  }
}

void EnergyCounterPusher::finish_window(const std::string& window) {
  const std::string name = internal_name(window);
  try {
    monitor_->end_window(name);  // sample_window reopened it
  } catch (const std::exception&) {
    // already closed by a failure
  }
  counters_.erase(window);
}

void EnergyCounterPusher::render_families(std::string& out) const {
  counters_.render(out);
}

std::optional<double> EnergyCounterPusher::value(std::string_view kind, const std::string& window,
                                                 int index) const {
  const auto lock = lock_state();
  return counters_.value(kind, window, index);
}

// ---- PowerGaugePusher ---------------------------------------------------------------------

PowerGaugePusher::PowerGaugePusher(const device::Gpus& gpus, std::vector<int> gpu_indices,
                                   double period_s, PushgatewayClient client)
    : WindowPusher(std::move(client), period_s) {
  for (const int index : gpu_indices) {
    if (index < 0 || static_cast<std::size_t>(index) >= gpus.size()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("GPU index {} does not exist; this process sees {} GPU(s)", index,
                              gpus.size()),
                  ErrorSubject::kGpu);
    }
    gpus_.emplace_back(index, gpus.shared(index));
  }
}

PowerGaugePusher::~PowerGaugePusher() {
  shutdown();
}

void PowerGaugePusher::start_window(const std::string& window) {
  sample_window(window);  // the first push already carries power
}

void PowerGaugePusher::sample_window(const std::string& window) {
  for (const auto& [index, gpu] : gpus_) {
    try {
      gauges_.set(window, index,
                  units::watts_from_milliwatts(
                      monitor::read_power_mw(*gpu, monitor::PowerDomain::kDeviceInstant)));
    } catch (const std::exception& error) {
      count_sample_error();
      log().warn("metrics: power of GPU {} for window '{}': {}", index, window, error.what());
    }
  }
}

void PowerGaugePusher::finish_window(const std::string& window) {
  gauges_.erase(window);
}

void PowerGaugePusher::render_families(std::string& out) const {
  gauges_.render(out);
}

std::optional<double> PowerGaugePusher::value(const std::string& window, int index) const {
  const auto lock = lock_state();
  return gauges_.value(window, index);
}

}  // namespace zeus::metrics
