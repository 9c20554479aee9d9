#include "zeus/monitor/prometheus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/log.hpp"
#include "common/utf8.hpp"
#include "http/host.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::metrics {

std::string escape_label_value(std::string_view raw) {
  // Prometheus refuses a whole scrape over one invalid UTF-8 label value: replace bad bytes.
  const std::string value = to_valid_utf8(raw);
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string escape_help(std::string_view raw) {
  const std::string text = to_valid_utf8(raw);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", value);  // shortest round-trip form
}

void write_family_header(std::string& out, std::string_view name, std::string_view type,
                         std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help),
                 name, type);
}

namespace {

void check_bounds(const std::vector<double>& bounds, std::string_view what) {
  if (bounds.empty()) {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("the {} histogram buckets are empty; give at least one upper bound", what));
  }
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("the {} histogram buckets must be finite and strictly increasing "
                              "(+Inf is implicit); got {}",
                              what, fmt::join(bounds, ", ")));
    }
  }
}

}  // namespace

WindowHistograms::WindowHistograms(HistogramBuckets buckets) : buckets_(std::move(buckets)) {
  check_bounds(buckets_.gpu_energy_j, "GPU energy");
  check_bounds(buckets_.cpu_energy_j, "CPU energy");
  check_bounds(buckets_.dram_energy_j, "DRAM energy");
  check_bounds(buckets_.duration_s, "window duration");
}

void WindowHistograms::add(std::map<Key, Histogram>& series, const std::vector<double>& bounds,
                           const std::string& window, int index, double value) {
  auto it = series.find(Key(window, index));
  if (it == series.end()) {
    Histogram fresh;
    fresh.counts.assign(bounds.size() + 1, 0);
    it = series.emplace(Key(window, index), std::move(fresh)).first;
  }
  Histogram& histogram = it->second;
  // The first bucket whose upper bound is >= value ("le" is inclusive).
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++histogram.counts[bucket];
  histogram.sum += value;
  ++histogram.count;
}

void WindowHistograms::observe(const std::string& window, const Measurement& measurement) {
  const std::lock_guard lock(mutex_);
  for (const auto& [index, joules] : measurement.gpu_energy_j) {
    add(gpu_, buckets_.gpu_energy_j, window, index, joules);
  }
  for (const auto& [index, joules] : measurement.cpu_energy_j) {
    add(cpu_, buckets_.cpu_energy_j, window, index, joules);
  }
  for (const auto& [index, joules] : measurement.dram_energy_j) {
    add(dram_, buckets_.dram_energy_j, window, index, joules);
  }
  add(duration_, buckets_.duration_s, window, -1, measurement.time_s);
}

void WindowHistograms::render_family(std::string& out, std::string_view name, std::string_view help,
                                     const std::vector<double>& bounds,
                                     const std::map<Key, Histogram>& series, bool with_index) {
  write_family_header(out, name, "histogram", help);
  for (const auto& [key, histogram] : series) {
    std::string labels = fmt::format("window=\"{}\"", escape_label_value(key.first));
    if (with_index) {
      labels.append(fmt::format(",index=\"{}\"", key.second));
    }
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += histogram.counts[i];
      const std::string le = i < bounds.size() ? format_value(bounds[i]) : "+Inf";
      fmt::format_to(std::back_inserter(out), "{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le,
                     cumulative);
    }
    fmt::format_to(std::back_inserter(out), "{}_sum{{{}}} {}\n", name, labels,
                   format_value(histogram.sum));
    fmt::format_to(std::back_inserter(out), "{}_count{{{}}} {}\n", name, labels, histogram.count);
  }
}

void WindowHistograms::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  render_family(out, "energy_monitor_gpu_energy_joules",
                "GPU energy of each measurement window, in joules", buckets_.gpu_energy_j, gpu_,
                true);
  render_family(out, "energy_monitor_cpu_energy_joules",
                "CPU package energy of each measurement window, in joules", buckets_.cpu_energy_j,
                cpu_, true);
  render_family(out, "energy_monitor_dram_energy_joules",
                "DRAM energy of each measurement window, in joules", buckets_.dram_energy_j, dram_,
                true);
  render_family(out, "zeus_window_duration_seconds", "Duration of each measurement window",
                buckets_.duration_s, duration_, false);
}

// -- DeviceMetrics ------------------------------------------------------------------------------

DeviceMetrics::DeviceMetrics(const Gpus& gpus, std::vector<std::shared_ptr<Cpu>> cpus,
                             DeviceMetricsOptions options)
    : clock_(options.clock ? options.clock : steady_clock()), interval_s_(options.interval_s) {
  if (!(interval_s_ >= kMinSamplingPeriodS) || !std::isfinite(interval_s_)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("the metrics interval must be at least 1 ms; got {} s", interval_s_));
  }
  std::vector<int> indices;
  if (options.gpu_indices) {
    indices = *options.gpu_indices;
  } else {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      indices.push_back(static_cast<int>(i));
    }
  }
  for (const int index : indices) {
    if (index < 0 || static_cast<std::size_t>(index) >= gpus.size()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("GPU index {} does not exist; this process sees {} GPU(s)", index,
                              gpus.size()));
    }
    GpuState state;
    state.index = index;
    state.gpu = gpus.shared(index);
    try {
      state.name = state.gpu->name();
      state.uuid = state.gpu->uuid();
      state.has_counter = state.gpu->supports_energy_counter();
    } catch (const std::exception& error) {
      log().warn("metrics: GPU {}: {}", index, error.what());
    }
    for (const PowerDomain domain :
         {PowerDomain::kDeviceInstant, PowerDomain::kDeviceAverage, PowerDomain::kMemoryAverage}) {
      try {
        read_power_mw(*state.gpu, domain);
        state.power_domains.push_back(domain);
      } catch (const Error& error) {
        if (error.kind() != ErrorKind::kNotSupported) {
          state.power_domains.push_back(domain);  // a transient failure: keep trying
        }
      } catch (const std::exception&) {
        state.power_domains.push_back(domain);
      }
    }
    gpus_.push_back(std::move(state));
  }
  for (auto& cpu : cpus) {
    CpuState state;
    state.cpu = std::move(cpu);
    cpus_.push_back(std::move(state));
  }
  sample_once();
  if (options.start_thread) {
    thread_ = std::thread([this] { run(); });
  }
}

DeviceMetrics::~DeviceMetrics() {
  stop();
}

void DeviceMetrics::stop() {
  {
    const std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void DeviceMetrics::run() {
  const auto period = std::chrono::duration<double>(interval_s_);
  std::unique_lock lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    sample_once();
    lock.lock();
  }
}

void DeviceMetrics::sample_once() {
  const std::int64_t now_ns = clock_->now_ns();
  // Read outside the lock; a scrape only waits for the copy into the state.
  struct GpuReading {
    std::optional<std::uint64_t> counter_mj;
    std::vector<std::pair<PowerDomain, double>> power_w;
    std::optional<double> limit_w;
    std::optional<double> temperature_c;
    bool failed = false;
  };
  std::vector<GpuReading> readings(gpus_.size());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    Gpu& gpu = *gpus_[i].gpu;
    GpuReading& reading = readings[i];
    const auto attempt = [&](auto read) {
      try {
        read();
      } catch (const Error& error) {
        if (error.kind() != ErrorKind::kNotSupported) {
          reading.failed = true;
        }
      } catch (const std::exception&) {
        reading.failed = true;
      }
    };
    if (gpus_[i].has_counter) {
      attempt([&] { reading.counter_mj = gpu.total_energy_mj(); });
    }
    for (const PowerDomain domain : gpus_[i].power_domains) {
      attempt([&] { reading.power_w.emplace_back(domain, read_power_mw(gpu, domain) / 1000.0); });
    }
    attempt([&] { reading.limit_w = gpu.power_limit_mw() / 1000.0; });
    attempt([&] { reading.temperature_c = gpu.temperature_c(); });
  }
  struct CpuReading {
    std::optional<std::uint64_t> package_uj, dram_uj;
    bool failed = false;
  };
  std::vector<CpuReading> cpu_readings(cpus_.size());
  for (std::size_t i = 0; i < cpus_.size(); ++i) {
    try {
      cpu_readings[i].package_uj = cpus_[i].cpu->package_energy_uj();
      if (cpus_[i].cpu->has_dram()) {
        cpu_readings[i].dram_uj = cpus_[i].cpu->dram_energy_uj();
      }
    } catch (const std::exception&) {
      cpu_readings[i].failed = true;
    }
  }

  const std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& state = gpus_[i];
    GpuReading& reading = readings[i];
    if (reading.failed) {
      ++state.errors;
    }
    if (!reading.power_w.empty()) {
      state.power_w = std::move(reading.power_w);
    }
    if (reading.limit_w) {
      state.power_limit_w = reading.limit_w;
    }
    if (reading.temperature_c) {
      state.temperature_c = reading.temperature_c;
    }
    if (reading.counter_mj) {
      if (!state.counter_base_mj) {
        state.counter_base_mj = reading.counter_mj;
      }
      if (*reading.counter_mj >= *state.counter_base_mj) {
        state.energy_j = static_cast<double>(*reading.counter_mj - *state.counter_base_mj) / 1e3;
      }
    } else if (!state.has_counter && !state.power_w.empty()) {
      // Sample-and-hold integration of the instant power.
      if (state.last_ns) {
        state.energy_j += state.last_power_w * static_cast<double>(now_ns - *state.last_ns) * 1e-9;
      }
      state.last_power_w = state.power_w.front().second;
      state.last_ns = now_ns;
    }
  }
  for (std::size_t i = 0; i < cpus_.size(); ++i) {
    CpuState& state = cpus_[i];
    const CpuReading& reading = cpu_readings[i];
    if (reading.failed) {
      ++state.errors;
      continue;
    }
    const double elapsed_s =
        state.last_ns ? static_cast<double>(now_ns - *state.last_ns) * 1e-9 : 0.0;
    const auto update = [&](std::optional<std::uint64_t> value, std::optional<std::uint64_t>& base,
                            double& joules, std::optional<double>& watts) {
      if (!value) {
        return;
      }
      if (!base) {
        base = value;
      }
      const double now_j = static_cast<double>(*value - std::min(*value, *base)) / 1e6;
      if (elapsed_s > 0.0) {
        watts = (now_j - joules) / elapsed_s;
      }
      joules = now_j;
    };
    update(reading.package_uj, state.package_base_uj, state.package_j, state.package_w);
    update(reading.dram_uj, state.dram_base_uj, state.dram_j, state.dram_w);
    state.last_ns = now_ns;
  }
}

void DeviceMetrics::render(std::string& out) const {
  const std::lock_guard lock(mutex_);
  const auto line = [&out](std::string_view name, const std::string& labels, double value) {
    fmt::format_to(std::back_inserter(out), "{}{{{}}} {}\n", name, labels, format_value(value));
  };
  const auto index_label = [](int index) { return fmt::format("index=\"{}\"", index); };

  write_family_header(out, "zeus_gpu_info", "gauge", "Always 1; the GPU's name and UUID as labels");
  for (const GpuState& gpu : gpus_) {
    line("zeus_gpu_info",
         fmt::format("index=\"{}\",name=\"{}\",uuid=\"{}\"", gpu.index,
                     escape_label_value(gpu.name), escape_label_value(gpu.uuid)),
         1);
  }
  write_family_header(out, "zeus_gpu_energy_joules_total", "counter",
                      "GPU energy since the exporter started, in joules");
  for (const GpuState& gpu : gpus_) {
    line("zeus_gpu_energy_joules_total", index_label(gpu.index), gpu.energy_j);
  }
  write_family_header(out, "power_monitor_gpu_power_watts", "gauge",
                      "GPU power draw per domain, in watts");
  for (const GpuState& gpu : gpus_) {
    for (const auto& [domain, watts] : gpu.power_w) {
      line("power_monitor_gpu_power_watts",
           fmt::format("index=\"{}\",domain=\"{}\"", gpu.index, power_domain_name(domain)), watts);
    }
  }
  write_family_header(out, "zeus_gpu_power_limit_watts", "gauge", "GPU power limit, in watts");
  for (const GpuState& gpu : gpus_) {
    if (gpu.power_limit_w) {
      line("zeus_gpu_power_limit_watts", index_label(gpu.index), *gpu.power_limit_w);
    }
  }
  write_family_header(out, "zeus_gpu_temperature_celsius", "gauge",
                      "GPU temperature, in degrees Celsius");
  for (const GpuState& gpu : gpus_) {
    if (gpu.temperature_c) {
      line("zeus_gpu_temperature_celsius", index_label(gpu.index), *gpu.temperature_c);
    }
  }
  write_family_header(out, "zeus_cpu_energy_joules_total", "counter",
                      "CPU package energy (RAPL) since the exporter started, in joules");
  for (const CpuState& cpu : cpus_) {
    if (cpu.package_base_uj) {
      line("zeus_cpu_energy_joules_total", index_label(cpu.cpu->index()), cpu.package_j);
    }
  }
  write_family_header(out, "zeus_dram_energy_joules_total", "counter",
                      "DRAM energy (RAPL) since the exporter started, in joules");
  for (const CpuState& cpu : cpus_) {
    if (cpu.dram_base_uj) {
      line("zeus_dram_energy_joules_total", index_label(cpu.cpu->index()), cpu.dram_j);
    }
  }
  write_family_header(out, "zeus_cpu_power_watts", "gauge",
                      "CPU package and DRAM power over the last interval, in watts");
  for (const CpuState& cpu : cpus_) {
    if (cpu.package_w) {
      line("zeus_cpu_power_watts", fmt::format("index=\"{}\",domain=\"package\"", cpu.cpu->index()),
           *cpu.package_w);
    }
    if (cpu.dram_w) {
      line("zeus_cpu_power_watts", fmt::format("index=\"{}\",domain=\"dram\"", cpu.cpu->index()),
           *cpu.dram_w);
    }
  }
  write_family_header(out, "zeus_device_read_errors_total", "counter",
                      "Device reads that failed (the last good value is kept)");
  for (const GpuState& gpu : gpus_) {
    line("zeus_device_read_errors_total", fmt::format("device=\"gpu{}\"", gpu.index),
         static_cast<double>(gpu.errors));
  }
  for (const CpuState& cpu : cpus_) {
    line("zeus_device_read_errors_total", fmt::format("device=\"cpu{}\"", cpu.cpu->index()),
         static_cast<double>(cpu.errors));
  }
}

// -- MetricsServer ------------------------------------------------------------------------------

MetricsServer::MetricsServer(const std::string& host, int port, std::vector<Source> sources)
    : host_(host), sources_(std::move(sources)) {
  if (port < 0 || port > 65535) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("metrics port {} is out of range; use 1-65535 (or 0 for any)", port));
  }
  http::HostOptions options;
  options.name = "zeus exporter";
  options.worker_threads = 2;
  // Scrapes carry no body.
  options.limits.max_body_bytes = 4096;
  options.limits.max_connections = 256;
  options.limits.max_connections_per_peer = 64;
  options.error_body = [](int status, const std::string& message, http::Response& res) {
    res.status = status;
    res.content_type = "text/plain; charset=utf-8";
    res.body = message + "\n";
  };
  server_ = std::make_unique<http::Host>(
      std::move(options), [this](const http::Request& req, http::Response& res) {
        if (req.method != "GET" && req.method != "HEAD") {
          res.status = 405;
          res.content_type = "text/plain; charset=utf-8";
          res.body = "only GET is served\n";
          res.headers.emplace_back("Allow", "GET");
          return;
        }
        if (req.path == "/metrics") {
          scrapes_.fetch_add(1, std::memory_order_relaxed);
          res.content_type = "text/plain; version=0.0.4; charset=utf-8";
          res.body = render();
        } else if (req.path == "/") {
          res.content_type = "text/html; charset=utf-8";
          res.body =
              "<html><head><title>zeus exporter</title></head><body><h1>zeus exporter</h1>"
              "<p><a href=\"/metrics\">/metrics</a></p></body></html>\n";
        } else {
          res.status = 404;
          res.content_type = "text/plain; charset=utf-8";
          res.body = "not found; metrics are at /metrics\n";
        }
      });
  try {
    port_ = server_->bind_tcp(host, port);
  } catch (const http::BindError& e) {
    const std::string reason =
        e.error_number() == EADDRINUSE
            ? "the address is already in use (another exporter or program listens there); "
              "choose another --port, or stop that program"
            : fmt::format("{}; check the host name or address and the port", e.what());
    throw Error(ErrorKind::kIo,
                fmt::format("cannot serve metrics on {}:{}: {}", host, port, reason));
  }
}

MetricsServer::~MetricsServer() {
  stop();
}

void MetricsServer::start() {
  server_->start();
}

void MetricsServer::stop() {
  server_->stop();
  server_->join();
}

std::string MetricsServer::render() const {
  std::string out;
  out.reserve(8192);
  for (const Source& source : sources_) {
    source(out);
  }
  write_family_header(out, "zeus_exporter_scrapes_total", "counter",
                      "Scrapes of /metrics served by this process");
  fmt::format_to(std::back_inserter(out), "zeus_exporter_scrapes_total {}\n",
                 scrapes_.load(std::memory_order_relaxed));
  return out;
}

}  // namespace zeus::metrics
