// zeus_cpp._zeus's push side of Prometheus export (zeus/metrics/pushgateway.hpp), used by
// zeus_cpp.metric.EnergyHistogram, EnergyCumulativeCounter and PowerGauge (docs/prometheus.md).
// Push failures come back as a message (None when the push worked) so that the Python layer can
// raise or warn as the reference's classes do.
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <vector>

#include "bindings.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/metrics/prometheus.hpp"
#include "zeus/metrics/pushgateway.hpp"
#include "zeus/monitor/zeus_monitor.hpp"

namespace zeus::python {
namespace {

metrics::PushgatewayClient make_client(const std::string& url, const std::string& job,
                                       metrics::GroupingKey grouping, double connect_timeout,
                                       double timeout) {
  metrics::PushgatewayOptions options;
  options.url = url;
  options.job = job;
  options.grouping = std::move(grouping);
  options.connect_timeout_s = connect_timeout;
  options.timeout_s = timeout;
  try {
    return metrics::PushgatewayClient(std::move(options));
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kInvalidArgument) {
      throw py::value_error(error.what());
    }
    throw;
  }
}

// The process's GPUs when none are named (the reference's monitors' default).
std::vector<int> all_if_none(std::optional<std::vector<int>> indices) {
  if (indices) {
    return std::move(*indices);
  }
  std::vector<int> all(device::get_gpus().size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i] = static_cast<int>(i);
  }
  return all;
}

// The window histograms and the client they are pushed with (EnergyHistogram).
class PushgatewayHistograms {
 public:
  PushgatewayHistograms(metrics::HistogramBuckets buckets, metrics::PushgatewayClient client)
      : histograms_(std::move(buckets)), client_(std::move(client)) {}

  // From the energies by index rather than a Measurement object, so that any monitor's
  // measurement (a ZeusMonitor's, a replayed one, a duck-typed one) can be observed.
  void observe(const std::string& window, double time_s, const std::map<int, double>& gpu_j,
               const std::map<int, double>& cpu_j, const std::map<int, double>& dram_j) {
    monitor::Measurement measurement;
    measurement.time_s = time_s;
    for (const auto& [index, joules] : gpu_j) {
      measurement.gpu_energy_j.set(index, joules);
    }
    for (const auto& [index, joules] : cpu_j) {
      measurement.cpu_energy_j.set(index, joules);
    }
    for (const auto& [index, joules] : dram_j) {
      measurement.dram_energy_j.set(index, joules);
    }
    histograms_.observe(window, measurement);
  }
  std::string render() const {
    std::string out;
    histograms_.render(out);
    return out;
  }
  std::optional<std::string> push() const {
    try {
      client_.push(render());
    } catch (const std::exception& error) {
      return std::string(error.what());
    }
    return std::nullopt;
  }
  const std::string& group_url() const { return client_.group_url(); }

 private:
  metrics::WindowHistograms histograms_;
  metrics::PushgatewayClient client_;
};

// begin/end errors of a pusher as Python's ValueError (the reference's class for both).
template <typename Body>
auto window_call(Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kAlreadyExists || error.kind() == ErrorKind::kNotFound) {
      throw py::value_error(error.what());
    }
    throw;
  }
}

py::dict stats_dict(const metrics::PushStats& stats) {
  py::dict out;
  out["pushes"] = stats.pushes;
  out["failures"] = stats.failures;
  out["sample_errors"] = stats.sample_errors;
  out["last_error"] = stats.last_error;
  return out;
}

template <typename Pusher, typename Class>
void bind_pusher_methods(Class& cls) {
  cls.def(
         "begin_window",
         [](Pusher& self, const std::string& name) {
           window_call([&] { self.begin_window(name); });
         },
         py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def(
          "end_window",
          [](Pusher& self, const std::string& name) {
            return window_call([&] { return self.end_window(name); });
          },
          py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def("open_windows", &Pusher::open_windows)
      .def("stats", [](const Pusher& self) { return stats_dict(self.stats()); })
      .def("render", &Pusher::render)
      .def("close", &Pusher::shutdown, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("group_url",
                             [](const Pusher& self) { return self.client().group_url(); })
      .def_property_readonly("period", &Pusher::period_s);
}

}  // namespace

void bind_pushgateway(py::module_& module) {
  module.def(
      "pushgateway_group_path",
      [](const std::string& job, const metrics::GroupingKey& grouping) {
        return metrics::pushgateway_group_path(job, grouping);
      },
      py::arg("job"), py::arg("grouping"));

  py::class_<PushgatewayHistograms>(module, "PushgatewayHistograms")
      .def(
          py::init([](const std::string& url, const std::string& job, metrics::GroupingKey grouping,
                      std::vector<double> gpu_buckets, std::vector<double> cpu_buckets,
                      std::vector<double> dram_buckets, double connect_timeout, double timeout) {
            metrics::HistogramBuckets buckets;
            buckets.gpu_energy_j = std::move(gpu_buckets);
            buckets.cpu_energy_j = std::move(cpu_buckets);
            buckets.dram_energy_j = std::move(dram_buckets);
            auto client = make_client(url, job, std::move(grouping), connect_timeout, timeout);
            return std::make_unique<PushgatewayHistograms>(std::move(buckets), std::move(client));
          }),
          py::arg("url"), py::arg("job"), py::arg("grouping"), py::arg("gpu_buckets"),
          py::arg("cpu_buckets"), py::arg("dram_buckets"), py::arg("connect_timeout"),
          py::arg("timeout"))
      .def("observe", &PushgatewayHistograms::observe, py::arg("window"), py::arg("time"),
           py::arg("gpu_energy"), py::arg("cpu_energy"), py::arg("dram_energy"))
      .def("render", &PushgatewayHistograms::render)
      .def("push", &PushgatewayHistograms::push, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("group_url", &PushgatewayHistograms::group_url);

  py::class_<metrics::EnergyCounterPusher> counter(module, "EnergyCounterPusher");
  counter
      .def(py::init([](std::optional<std::vector<int>> gpu_indices,
                       std::optional<std::vector<int>> cpu_indices, double period,
                       const std::string& url, const std::string& job,
                       metrics::GroupingKey grouping, double connect_timeout, double timeout) {
             auto client = make_client(url, job, std::move(grouping), connect_timeout, timeout);
             py::gil_scoped_release release;
             std::vector<std::shared_ptr<device::Cpu>> cpus = monitor::discovered_cpus(cpu_indices);
             return std::make_unique<metrics::EnergyCounterPusher>(
                 device::get_gpus(), all_if_none(std::move(gpu_indices)), std::move(cpus),
                 std::move(cpu_indices), period, std::move(client));
           }),
           py::arg("gpu_indices"), py::arg("cpu_indices"), py::arg("period"), py::arg("url"),
           py::arg("job"), py::arg("grouping"), py::arg("connect_timeout"), py::arg("timeout"))
      .def(
          "value",
          [](const metrics::EnergyCounterPusher& self, const std::string& kind,
             const std::string& window, int index) { return self.value(kind, window, index); },
          py::arg("kind"), py::arg("window"), py::arg("index"));
  bind_pusher_methods<metrics::EnergyCounterPusher>(counter);

  py::class_<metrics::PowerGaugePusher> gauge(module, "PowerGaugePusher");
  gauge
      .def(py::init([](std::optional<std::vector<int>> gpu_indices, double period,
                       const std::string& url, const std::string& job,
                       metrics::GroupingKey grouping, double connect_timeout, double timeout) {
             auto client = make_client(url, job, std::move(grouping), connect_timeout, timeout);
             py::gil_scoped_release release;
             return std::make_unique<metrics::PowerGaugePusher>(device::get_gpus(),
                                                                all_if_none(std::move(gpu_indices)),
                                                                period, std::move(client));
           }),
           py::arg("gpu_indices"), py::arg("period"), py::arg("url"), py::arg("job"),
           py::arg("grouping"), py::arg("connect_timeout"), py::arg("timeout"))
      .def("value", &metrics::PowerGaugePusher::value, py::arg("window"), py::arg("index"));
  bind_pusher_methods<metrics::PowerGaugePusher>(gauge);
}

}  // namespace zeus::python
