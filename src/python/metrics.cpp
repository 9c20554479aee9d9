// zeus_cpp._zeus.PrometheusExporter: /metrics for Prometheus from Python (docs/prometheus.md).
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "bindings.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/price.hpp"

namespace zeus::python {
namespace {

// The device metrics of the process's GPUs and CPU packages, the window histograms, and the
// server, together.
class PrometheusExporter {
 public:
  PrometheusExporter(std::optional<std::vector<int>> gpu_indices,
                     std::optional<std::vector<int>> cpu_indices, const std::string& host, int port,
                     double interval, metrics::HistogramBuckets buckets,
                     std::shared_ptr<monitor::CarbonIntensityProvider> carbon_intensity,
                     std::shared_ptr<monitor::ElectricityPriceProvider> electricity_price)
      : histograms_(std::move(buckets)) {
    metrics::DeviceMetricsOptions options;
    options.gpu_indices = std::move(gpu_indices);
    options.interval_s = interval;
    options.carbon_intensity = std::move(carbon_intensity);
    options.electricity_price = std::move(electricity_price);
    std::vector<std::shared_ptr<device::Cpu>> cpus;
    const device::CpuDiscovery& discovery = device::get_cpus();
    for (const auto& cpu : discovery.cpus) {
      if (!cpu_indices ||
          std::find(cpu_indices->begin(), cpu_indices->end(), cpu->index()) != cpu_indices->end()) {
        cpus.push_back(cpu);
      }
    }
    if (cpu_indices) {
      for (const int index : *cpu_indices) {
        const bool found = std::any_of(cpus.begin(), cpus.end(),
                                       [index](const auto& cpu) { return cpu->index() == index; });
        if (!found) {
          throw Error(ErrorKind::kInvalidArgument,
                      "CPU package " + std::to_string(index) + " cannot be read: " +
                          (discovery.available ? "no such package" : discovery.message),
                      ErrorSubject::kCpu);
        }
      }
    }
    devices_ =
        std::make_unique<metrics::DeviceMetrics>(device::get_gpus(), std::move(cpus), options);
    server_ = std::make_unique<metrics::MetricsServer>(
        host, port,
        std::vector<metrics::MetricsServer::Source>{
            [this](std::string& out) { devices_->render(out); },
            [this](std::string& out) { histograms_.render(out); }});
    server_->start();
  }

  // A provider written in Python is called from the reading thread, which then needs the GIL:
  // stopping that thread while holding it (a garbage-collected exporter) would wait forever.
  ~PrometheusExporter() {
    if (PyGILState_Check() == 1) {
      const py::gil_scoped_release release;
      close();
    } else {
      close();
    }
  }

  void observe(const std::string& window, const monitor::Measurement& measurement) {
    histograms_.observe(window, measurement);
  }

  void close() {
    if (server_) {
      server_->stop();
    }
    if (devices_) {
      devices_->stop();
    }
  }

  int port() const { return server_->port(); }
  const std::string& host() const { return server_->host(); }
  std::string render() const { return server_->render(); }

 private:
  metrics::WindowHistograms histograms_;
  std::unique_ptr<metrics::DeviceMetrics> devices_;
  std::unique_ptr<metrics::MetricsServer> server_;
};

}  // namespace

void bind_pushgateway(py::module_& module);  // pushgateway.cpp: the push side

void bind_metrics(py::module_& module) {
  bind_pushgateway(module);
  py::class_<PrometheusExporter>(module, "PrometheusExporter")
      .def(py::init([](std::optional<std::vector<int>> gpu_indices,
                       std::optional<std::vector<int>> cpu_indices, const std::string& host,
                       int port, double interval, std::vector<double> gpu_buckets,
                       std::vector<double> cpu_buckets, std::vector<double> dram_buckets,
                       std::vector<double> duration_buckets,
                       std::shared_ptr<monitor::CarbonIntensityProvider> carbon_intensity,
                       std::shared_ptr<monitor::ElectricityPriceProvider> electricity_price) {
             metrics::HistogramBuckets buckets;
             buckets.gpu_energy_j = std::move(gpu_buckets);
             buckets.cpu_energy_j = std::move(cpu_buckets);
             buckets.dram_energy_j = std::move(dram_buckets);
             buckets.duration_s = std::move(duration_buckets);
             py::gil_scoped_release release;
             return std::make_unique<PrometheusExporter>(
                 std::move(gpu_indices), std::move(cpu_indices), host, port, interval,
                 std::move(buckets), std::move(carbon_intensity), std::move(electricity_price));
           }),
           py::arg("gpu_indices"), py::arg("cpu_indices"), py::arg("host"), py::arg("port"),
           py::arg("interval"), py::arg("gpu_buckets"), py::arg("cpu_buckets"),
           py::arg("dram_buckets"), py::arg("duration_buckets"),
           py::arg("carbon_intensity_provider") = nullptr,
           py::arg("electricity_price_provider") = nullptr)
      .def("observe", &PrometheusExporter::observe, py::arg("window"), py::arg("measurement"))
      .def("close", &PrometheusExporter::close, py::call_guard<py::gil_scoped_release>())
      .def("render", &PrometheusExporter::render, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("port", &PrometheusExporter::port)
      .def_property_readonly("host", &PrometheusExporter::host);
}

}  // namespace zeus::python
