// zeus_cpp._zeus.PowerSampler: the native part of zeus_cpp.monitor.PowerMonitor (and of
// TemperatureMonitor): a monitor::PowerSampler on a background thread over the process's GPUs,
// its times given to Python as wall-clock seconds (time.time(), as the reference's timelines).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::python {
namespace {

// A PowerSampler over the process's GPUs, with times converted to wall-clock seconds
// (time.time(), as the reference's timelines).
struct PySampler {
  std::unique_ptr<monitor::PowerSampler> sampler;
  double wall_offset_s = 0.0;  // wall-clock seconds minus steady-clock seconds
  // Only for _manual_power_sampler (tests): its clock and simulated GPUs, driven by _drive.
  std::shared_ptr<ManualClock> manual_clock;
  std::vector<std::shared_ptr<device::SimulatedGpu>> simulated;

  std::int64_t to_steady_ns(double wall_s) const {
    return static_cast<std::int64_t>((wall_s - wall_offset_s) * 1e9);
  }
  std::optional<std::int64_t> to_steady_ns(std::optional<double> wall_s) const {
    return wall_s ? std::optional<std::int64_t>(to_steady_ns(*wall_s)) : std::nullopt;
  }
  double to_wall_s(std::int64_t steady_ns) const {
    return static_cast<double>(steady_ns) * 1e-9 + wall_offset_s;
  }
};

double wall_offset_now(const Clock& clock) {
  const auto wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch());
  return wall.count() - clock.now_s();
}

monitor::PowerSamplerOptions sampler_options(const std::vector<std::string>& domains,
                                             std::optional<double> period_s,
                                             std::optional<std::size_t> max_samples,
                                             bool temperature) {
  monitor::PowerSamplerOptions options;
  options.temperature = temperature;
  options.domains.clear();
  for (const std::string& domain : domains) {
    options.domains.push_back(monitor::parse_power_domain(domain));
  }
  options.period_s = period_s;
  if (max_samples) {
    options.max_samples_per_series = *max_samples;
  }
  return options;
}

// (exact_since as time.time() seconds or None, the longest compacted span in s, rows kept).
py::tuple resolution_tuple(const PySampler& self, const monitor::TimelineResolution& resolution) {
  return py::make_tuple(
      resolution.exact_since_ns ? py::cast(self.to_wall_s(*resolution.exact_since_ns)) : py::none(),
      static_cast<double>(resolution.longest_span_ns) * 1e-9, resolution.rows);
}

// Test hook: `count` simulated GPUs of `model` on a manual clock, sampled only by _drive, so
// that a run of days takes seconds (the Python twin of the C++ tests' SimulatedRig).
std::unique_ptr<PySampler> manual_sampler(int count, const std::string& model,
                                          const std::vector<std::string>& domains, double period_s,
                                          std::optional<std::size_t> max_samples,
                                          bool temperature) {
  auto result = std::make_unique<PySampler>();
  result->manual_clock = std::make_shared<ManualClock>();
  std::vector<std::shared_ptr<device::Gpu>> list;
  std::vector<int> physical;
  for (int i = 0; i < count; ++i) {
    result->simulated.push_back(std::make_shared<device::SimulatedGpu>(
        device::simulated_gpu_model(model), i, result->manual_clock));
    list.push_back(result->simulated.back());
    physical.push_back(i);
  }
  monitor::PowerSamplerOptions options =
      sampler_options(domains, period_s, max_samples, temperature);
  options.clock = result->manual_clock;
  options.start_thread = false;
  result->wall_offset_s = wall_offset_now(*result->manual_clock);
  result->sampler = std::make_unique<monitor::PowerSampler>(
      device::Gpus(std::move(list), std::move(physical)), std::move(options));
  return result;
}

// Samples every period for `duration_s` of the manual clock; GPU g's utilization is
// loads[(g + the hold index) % loads.size()] over each `hold_s`. Returns each GPU's exact energy.
std::vector<double> drive(PySampler& self, double duration_s, const std::vector<double>& loads,
                          double hold_s) {
  if (!self.manual_clock || loads.empty() || !(hold_s > 0.0)) {
    throw py::value_error("_drive needs a _manual_power_sampler, loads and hold_s > 0");
  }
  const std::int64_t period_ns = units::nanoseconds_from_seconds(self.sampler->period_s());
  const std::int64_t hold_ns = units::nanoseconds_from_seconds(hold_s);
  const std::int64_t end_ns =
      self.manual_clock->now_ns() + units::nanoseconds_from_seconds(duration_s);
  py::gil_scoped_release release;
  while (self.manual_clock->now_ns() < end_ns) {
    const auto hold = static_cast<std::size_t>(self.manual_clock->now_ns() / hold_ns);
    for (std::size_t g = 0; g < self.simulated.size(); ++g) {
      self.simulated[g]->set_utilization(loads[(g + hold) % loads.size()]);
    }
    self.sampler->sample_once();
    self.manual_clock->advance_ns(period_ns);
  }
  std::vector<double> energies;
  for (const auto& gpu : self.simulated) {
    energies.push_back(gpu->exact_energy_j());
  }
  return energies;
}

}  // namespace

void bind_power_sampler(py::module_& module);  // declared for module.cpp, which calls it
void bind_power_sampler(py::module_& module) {
  py::class_<PySampler>(module, "PowerSampler",
                        "Native part of zeus_cpp.monitor.PowerMonitor (a background thread).")
      .def(py::init([](std::optional<std::vector<int>> gpu_indices,
                       const std::vector<std::string>& domains, std::optional<double> period_s,
                       std::optional<std::size_t> max_samples, bool temperature) {
             monitor::PowerSamplerOptions options =
                 sampler_options(domains, period_s, max_samples, temperature);
             if (gpu_indices) {
               options.gpu_indices = *gpu_indices;
             }
             auto result = std::make_unique<PySampler>();
             result->wall_offset_s = wall_offset_now(*steady_clock());
             py::gil_scoped_release release;  // inferring the period polls for a while
             result->sampler =
                 std::make_unique<monitor::PowerSampler>(device::get_gpus(), std::move(options));
             return result;
           }),
           py::arg("gpu_indices"), py::arg("domains"), py::arg("period_s"), py::arg("max_samples"),
           py::arg("temperature") = false)
      .def_property_readonly("period_s",
                             [](const PySampler& self) { return self.sampler->period_s(); })
      .def_property_readonly("gpu_indices",
                             [](const PySampler& self) { return self.sampler->gpu_indices(); })
      .def_property_readonly("domains",
                             [](const PySampler& self) {
                               std::vector<std::string> names;
                               for (const monitor::PowerDomain domain : self.sampler->domains()) {
                                 names.emplace_back(monitor::power_domain_name(domain));
                               }
                               return names;
                             })
      .def_property_readonly("dropped_samples",
                             [](const PySampler& self) { return self.sampler->dropped_samples(); })
      .def(
          "timeline",
          [](const PySampler& self, const std::string& domain, int gpu_index,
             std::optional<double> start_time, std::optional<double> end_time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> start_ns = self.to_steady_ns(start_time);
            const std::optional<std::int64_t> end_ns = self.to_steady_ns(end_time);
            const std::vector<monitor::PowerSample> samples = self.sampler->timeline(
                monitor::parse_power_domain(domain), gpu_index, start_ns, end_ns);
            py::array_t<double> array({static_cast<py::ssize_t>(samples.size()), py::ssize_t{2}});
            auto view = array.mutable_unchecked<2>();
            for (std::size_t i = 0; i < samples.size(); ++i) {
              const auto row = static_cast<py::ssize_t>(i);
              view(row, 0) = self.to_wall_s(samples[i].time_ns);
              view(row, 1) = samples[i].power_w;
            }
            return array;
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("start_time") = py::none(),
          py::arg("end_time") = py::none(),
          "Samples as an (n, 2) float64 array of (time.time() seconds, W).")
      .def(
          "power",
          [](const PySampler& self, const std::string& domain, int gpu_index,
             std::optional<double> time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> time_ns = self.to_steady_ns(time);
            return self.sampler->power_w(monitor::parse_power_domain(domain), gpu_index, time_ns);
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("time") = py::none(),
          "The power (W) in force at `time` (the latest when None), or None.")
      .def(
          "energy",
          [](const PySampler& self, const std::string& domain, int gpu_index, double start_time,
             double end_time) -> double {
            self.sampler->rethrow_if_failed();
            const monitor::PowerDomain parsed = monitor::parse_power_domain(domain);
            const std::int64_t start_ns = self.to_steady_ns(start_time);
            const std::int64_t end_ns = self.to_steady_ns(end_time);
            if (const auto exact = self.sampler->energy_j(parsed, gpu_index, start_ns, end_ns)) {
              return *exact;
            }
            const double end =
                self.sampler->cumulative_energy_j(parsed, gpu_index, end_ns).value_or(0.0);
            const double start =
                self.sampler->cumulative_energy_j(parsed, gpu_index, start_ns).value_or(0.0);
            return end > start ? end - start : 0.0;
          },
          py::arg("domain"), py::arg("gpu_index"), py::arg("start_time"), py::arg("end_time"),
          "Energy (J) of the held power signal over [start_time, end_time].")
      .def(
          "temperature_timeline",
          [](const PySampler& self, int gpu_index, std::optional<double> start_time,
             std::optional<double> end_time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> start_ns = self.to_steady_ns(start_time);
            const std::optional<std::int64_t> end_ns = self.to_steady_ns(end_time);
            py::list result;
            for (const monitor::TemperatureSample& sample :
                 self.sampler->temperature_timeline(gpu_index, start_ns, end_ns)) {
              result.append(py::make_tuple(self.to_wall_s(sample.time_ns), sample.temperature_c));
            }
            return result;
          },
          py::arg("gpu_index"), py::arg("start_time") = py::none(),
          py::arg("end_time") = py::none(),
          "The temperature changes as a list of (time.time() seconds, degrees C).")
      .def(
          "temperature",
          [](const PySampler& self, int gpu_index, std::optional<double> time) {
            self.sampler->rethrow_if_failed();
            const std::optional<std::int64_t> time_ns = self.to_steady_ns(time);
            return self.sampler->temperature_c(gpu_index, time_ns);
          },
          py::arg("gpu_index"), py::arg("time") = py::none(),
          "The temperature (degrees C) in force at `time` (the latest when None), or None.")
      .def(
          "resolution",
          [](const PySampler& self, const std::string& series, int gpu_index) {
            self.sampler->rethrow_if_failed();
            return resolution_tuple(
                self,
                series == "temperature"
                    ? self.sampler->temperature_resolution(gpu_index)
                    : self.sampler->resolution(monitor::parse_power_domain(series), gpu_index));
          },
          py::arg("series"), py::arg("gpu_index"),
          "How finely a power domain's (or \"temperature\") timeline keeps its past: "
          "(exact_since time.time() seconds or None, longest compacted span s, rows).")
      .def("sample_once", [](PySampler& self) { self.sampler->sample_once(); })
      .def("_drive", &drive, py::arg("duration_s"), py::arg("loads"), py::arg("hold_s"),
           "Test hook: drives a _manual_power_sampler (see power_sampler_bindings.cpp).")
      .def(
          "stop",
          [](PySampler& self) {
            py::gil_scoped_release release;
            self.sampler->stop();
          },
          "Stops the thread (idempotent).");
  module.def(
      "_infer_power_update_period",
      [](int gpu_index, const std::string& domain, double budget_s) {
        const monitor::PowerDomain parsed = monitor::parse_power_domain(domain);
        device::Gpu& gpu = device::get_gpus().at(gpu_index);
        py::gil_scoped_release release;
        return monitor::infer_power_update_period_s(gpu, parsed, *steady_clock(), budget_s);
      },
      py::arg("gpu_index"), py::arg("domain"), py::arg("budget_s") = 0.2,
      "Half the shortest interval between changes of GPU `gpu_index`'s `domain` power reading, "
      "polled back to back for up to budget_s, within [1 ms, 100 ms] (100 ms when it never "
      "changes): how a PowerMonitor without update_period picks its period.");
  module.def("_manual_power_sampler", &manual_sampler, py::arg("count"), py::arg("model"),
             py::arg("domains"), py::arg("period_s"), py::arg("max_samples"),
             py::arg("temperature") = false,
             "Test hook: a PowerSampler over simulated GPUs on a manual clock (see _drive).");
}

}  // namespace zeus::python
