// zeus_cpp._zeus: GPUs, GPU, CPUs (the device layer), with the reference's method names.
//
// Units are the reference's device units: power in mW, energy in mJ, clocks in MHz. The
// `block` arguments of the setters: a GPU controlled through zeusd (ZEUSD_SOCK_PATH /
// ZEUSD_HOST_PORT) sends `block=false` when it is False, as the reference's zeusd GPUs do;
// every other GPU's setters block.
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "device/privileges.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/gpus.hpp"
#include "zeus/device/simulated_gpu.hpp"
#include "zeus/device/zeusd_gpu.hpp"

namespace zeus::python {

// zeusd.cpp: the HTTP transport under zeus_cpp.utils.zeusd and monitor.power_streaming.
void bind_zeusd(py::module_& module);

namespace {

struct PyCpus {
  std::vector<std::shared_ptr<device::Cpu>> cpus;

  device::Cpu& at(int index) const {
    for (const auto& cpu : cpus) {
      if (cpu->index() == index) {
        return *cpu;
      }
    }
    std::string valid;
    for (const auto& cpu : cpus) {
      valid += (valid.empty() ? "" : ", ") + std::to_string(cpu->index());
    }
    throw Error(ErrorKind::kNotFound,
                "CPU package " + std::to_string(index) + " does not exist (available: " +
                    (valid.empty() ? std::string("none") : valid) + ")",
                ErrorSubject::kCpu);
  }
};

std::shared_ptr<PyGpus> process_gpus() {
  static const std::shared_ptr<PyGpus> instance = [] {
    auto gpus = std::make_shared<PyGpus>();
    gpus->gpus = device::get_gpus();
    gpus->backend = gpus->gpus.empty()
                        ? "none"
                        : std::string(device::gpu_backend_name(gpus->gpus.at(0).backend()));
    return gpus;
  }();
  return instance;
}

// The GPU at `index` of `gpus`; for no GPU at all, the reference's ValueError("No GPUs
// available.").
device::Gpu& gpu_at(const PyGpus& self, int gpu_index) {
  if (self.gpus.empty()) {
    throw py::value_error("No GPUs available.");
  }
  return self.gpus.at(gpu_index);
}

py::tuple constraints(device::Gpu& gpu) {
  const device::PowerLimitConstraints limits = gpu.power_limit_constraints_mw();
  return py::make_tuple(limits.min_mw, limits.max_mw);
}

// Registers `name` on both classes: GPU.name(self, args...) and GPUs.name(self, gpu_index,
// args...).
// The zeusd-controlled GPU behind `gpu` when a setter may skip waiting (`block` False), else null.
device::ZeusdGpu* nonblocking(device::Gpu& gpu, bool block) {
  return block ? nullptr : dynamic_cast<device::ZeusdGpu*>(&gpu);
}

template <typename Result, typename... Args, typename... Extra>
void def_both(py::class_<device::Gpu, std::shared_ptr<device::Gpu>>& gpu_class,
              py::class_<PyGpus, std::shared_ptr<PyGpus>>& gpus_class, const char* name,
              Result (*function)(device::Gpu&, Args...), const char* doc, const Extra&... extra) {
  gpu_class.def(
      name,
      [function](device::Gpu& gpu, Args... args) { return function(gpu, std::move(args)...); },
      extra..., doc);
  gpus_class.def(
      name,
      [function](const PyGpus& self, int gpu_index, Args... args) {
        return function(gpu_at(self, gpu_index), std::move(args)...);
      },
      py::arg("gpu_index"), extra..., doc);
}

// A clock that moves on by a fixed step each time it is read (benchmarks only).
class BenchmarkTickingClock final : public Clock {
 public:
  explicit BenchmarkTickingClock(std::int64_t tick_ns) : tick_ns_(tick_ns) {}
  std::int64_t now_ns() const override {
    return now_ns_.fetch_add(tick_ns_, std::memory_order_relaxed) + tick_ns_;
  }
  void sleep_for_ns(std::int64_t duration_ns) const override {
    now_ns_.fetch_add(duration_ns, std::memory_order_relaxed);
  }

 private:
  std::int64_t tick_ns_;
  mutable std::atomic<std::int64_t> now_ns_{1};
};

}  // namespace

void bind_device(py::module_& module) {
  py::class_<device::Gpu, std::shared_ptr<device::Gpu>> gpu_class(
      module, "GPU", "One GPU (see GPUs for the methods; here without the gpu_index argument).");
  py::class_<PyGpus, std::shared_ptr<PyGpus>> gpus_class(
      module, "GPUs",
      "The GPUs visible to this process, indexed as CUDA/HIP index them (after "
      "CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES). Every method takes the GPU index first.");

  def_both(
      gpu_class, gpus_class, "get_name", +[](device::Gpu& gpu) { return gpu.name(); },
      "The GPU model name.");
  def_both(
      gpu_class, gpus_class, "get_power_management_limit_constraints",
      +[](device::Gpu& gpu) { return constraints(gpu); }, "(min, max) power limit in mW.");
  def_both(
      gpu_class, gpus_class, "get_power_management_limit",
      +[](device::Gpu& gpu) { return gpu.power_limit_mw(); }, "The power limit in mW.");
  def_both(
      gpu_class, gpus_class, "set_power_management_limit",
      +[](device::Gpu& gpu, std::uint32_t power_limit_mw, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->set_power_limit_mw(power_limit_mw, false);
        } else {
          gpu.set_power_limit_mw(power_limit_mw);
        }
      },
      "Sets the power limit (mW); a no-op when already in force.", py::arg("power_limit_mw"),
      py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "reset_power_management_limit",
      +[](device::Gpu& gpu, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->reset_power_limit(false);
        } else {
          gpu.reset_power_limit();
        }
      },
      "Restores the default power limit.", py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "set_persistence_mode",
      +[](device::Gpu& gpu, bool enabled, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->set_persistence_mode(enabled, false);
        } else {
          gpu.set_persistence_mode(enabled);
        }
      },
      "Enables or disables persistence mode.", py::arg("enabled"), py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "get_persistence_mode",
      +[](device::Gpu& gpu) { return gpu.persistence_mode(); }, "Whether persistence mode is on.");
  def_both(
      gpu_class, gpus_class, "get_supported_memory_clocks",
      +[](device::Gpu& gpu) { return gpu.supported_memory_clocks_mhz(); },
      "Supported memory clocks (MHz).");
  def_both(
      gpu_class, gpus_class, "set_memory_locked_clocks",
      +[](device::Gpu& gpu, std::uint32_t min_clock_mhz, std::uint32_t max_clock_mhz, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->set_memory_locked_clocks_mhz(min_clock_mhz, max_clock_mhz, false);
        } else {
          gpu.set_memory_locked_clocks_mhz(min_clock_mhz, max_clock_mhz);
        }
      },
      "Locks the memory clock to [min, max] MHz.", py::arg("min_clock_mhz"),
      py::arg("max_clock_mhz"), py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "reset_memory_locked_clocks",
      +[](device::Gpu& gpu, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->reset_memory_locked_clocks(false);
        } else {
          gpu.reset_memory_locked_clocks();
        }
      },
      "Unlocks the memory clock.", py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "get_supported_graphics_clocks",
      +[](device::Gpu& gpu, std::optional<std::uint32_t> memory_clock_mhz) {
        return gpu.supported_graphics_clocks_mhz(memory_clock_mhz);
      },
      "Supported graphics (SM) clocks (MHz) at a memory clock (the highest when None).",
      py::arg("memory_clock_mhz") = py::none());
  def_both(
      gpu_class, gpus_class, "set_gpu_locked_clocks",
      +[](device::Gpu& gpu, std::uint32_t min_clock_mhz, std::uint32_t max_clock_mhz, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->set_gpu_locked_clocks_mhz(min_clock_mhz, max_clock_mhz, false);
        } else {
          gpu.set_gpu_locked_clocks_mhz(min_clock_mhz, max_clock_mhz);
        }
      },
      "Locks the graphics clock to [min, max] MHz.", py::arg("min_clock_mhz"),
      py::arg("max_clock_mhz"), py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "reset_gpu_locked_clocks",
      +[](device::Gpu& gpu, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->reset_gpu_locked_clocks(false);
        } else {
          gpu.reset_gpu_locked_clocks();
        }
      },
      "Unlocks the graphics clock.", py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "reset_locked_clocks",
      +[](device::Gpu& gpu, bool block) {
        if (auto* zeusd = nonblocking(gpu, block)) {
          zeusd->reset_locked_clocks(false);
        } else {
          gpu.reset_locked_clocks();
        }
      },
      "Unlocks the graphics and memory clocks.", py::arg("block") = true);
  def_both(
      gpu_class, gpus_class, "get_average_power_usage",
      +[](device::Gpu& gpu) { return gpu.average_power_mw(); }, "Average power (mW, about 1 s).");
  def_both(
      gpu_class, gpus_class, "get_instant_power_usage",
      +[](device::Gpu& gpu) { return gpu.instant_power_mw(); }, "Instant power (mW).");
  def_both(
      gpu_class, gpus_class, "get_average_memory_power_usage",
      +[](device::Gpu& gpu) { return gpu.average_memory_power_mw(); },
      "Average memory power (mW).");
  def_both(
      gpu_class, gpus_class, "supports_get_total_energy_consumption",
      +[](device::Gpu& gpu) { return gpu.supports_energy_counter(); },
      "Whether the GPU has an energy counter.");
  def_both(
      gpu_class, gpus_class, "get_total_energy_consumption",
      +[](device::Gpu& gpu) { return gpu.total_energy_mj(); },
      "Energy (mJ) since the driver was loaded.");
  def_both(
      gpu_class, gpus_class, "get_gpu_temperature",
      +[](device::Gpu& gpu) { return gpu.temperature_c(); }, "Temperature (degrees Celsius).");
  def_both(
      gpu_class, gpus_class, "get_uuid", +[](device::Gpu& gpu) { return gpu.uuid(); },
      "The GPU's UUID (zeus_cpp extension).");
  def_both(
      gpu_class, gpus_class, "get_power_scope",
      +[](device::Gpu& gpu) { return std::string(device::measured_scope_name(gpu.power_scope())); },
      "What the power readings cover: 'gpu', 'module' (GPU + CPU + memory of a Grace superchip) "
      "or 'unknown' (zeus_cpp extension).");
  def_both(
      gpu_class, gpus_class, "get_energy_scope",
      +[](device::Gpu& gpu) {
        return std::string(device::measured_scope_name(gpu.energy_scope()));
      },
      "What the measured energy covers: 'gpu', 'module' (GPU + CPU + memory of a Grace "
      "superchip) or 'unknown' (zeus_cpp extension).");
  def_both(
      gpu_class, gpus_class, "get_architecture",
      +[](device::Gpu& gpu) { return gpu.architecture(); },
      "The architecture name, e.g. 'hopper' (zeus_cpp extension).");

  gpu_class.def_property_readonly(
      "supports_nonblocking_setters",
      [](device::Gpu& gpu) { return dynamic_cast<device::ZeusdGpu*>(&gpu) != nullptr; },
      "True for a GPU controlled through zeusd (its setters honour block=False).");

  gpus_class
      .def_property_readonly(
          "supports_nonblocking_setters",
          [](const PyGpus& self) {
            const device::Gpus& gpus = self.gpus;
            bool all = gpus.size() > 0;
            for (std::size_t i = 0; i < gpus.size(); ++i) {
              all =
                  all && dynamic_cast<device::ZeusdGpu*>(&gpus.at(static_cast<int>(i))) != nullptr;
            }
            return all;
          },
          "True when every GPU is controlled through zeusd (block=False honoured).")
      .def_property_readonly(
          "gpus",
          [](const PyGpus& self) {
            std::vector<std::shared_ptr<device::Gpu>> list;
            for (std::size_t i = 0; i < self.gpus.size(); ++i) {
              list.push_back(self.gpus.shared(static_cast<int>(i)));
            }
            return list;
          },
          "The GPU objects, in index order.")
      .def_property_readonly(
          "backend", [](const PyGpus& self) { return self.backend; },
          "'nvml', 'amdsmi', 'simulated' or 'none' (zeus_cpp extension).")
      .def(
          "physical_index",
          [](const PyGpus& self, int gpu_index) {
            gpu_at(self, gpu_index);
            return self.gpus.physical_index(gpu_index);
          },
          py::arg("gpu_index"), "The vendor library's index of a GPU (zeus_cpp extension).")
      .def("__len__", [](const PyGpus& self) { return self.gpus.size(); })
      .def("__repr__", [](const PyGpus& self) {
        return "<zeus_cpp GPUs: " + std::to_string(self.gpus.size()) + " (" + self.backend + ")>";
      });

  module.def(
      "get_gpus",
      [](bool ensure_homogeneous) {
        std::shared_ptr<PyGpus> gpus = process_gpus();
        if (ensure_homogeneous) {
          try {
            gpus->gpus.ensure_homogeneous();
          } catch (const Error& error) {
            throw_python_error("ZeusGPUHeterogeneousError", error.what());
          }
        }
        return gpus;
      },
      py::arg("ensure_homogeneous") = false, "The GPUs of this process (one object per process).");

  py::class_<PyCpus, std::shared_ptr<PyCpus>>(module, "CPUs",
                                              "The CPU packages (Linux RAPL), by package index.")
      .def(
          "get_total_energy_consumption",
          [](const PyCpus& self, int index) -> std::pair<double, std::optional<double>> {
            try {
              device::Cpu& cpu = self.at(index);
              const double cpu_mj =
                  units::millijoules_from_microjoules(static_cast<double>(cpu.package_energy_uj()));
              std::optional<double> dram_mj;
              if (cpu.has_dram()) {
                dram_mj =
                    units::millijoules_from_microjoules(static_cast<double>(cpu.dram_energy_uj()));
              }
              return {cpu_mj, dram_mj};
            } catch (const Error& error) {
              throw_translated(error, ErrorFamily::kCpu);
            }
          },
          py::arg("index"), "(package mJ, DRAM mJ or None), cumulative.")
      .def(
          "supports_get_dram_energy_consumption",
          [](const PyCpus& self, int index) {
            try {
              return self.at(index).has_dram();
            } catch (const Error& error) {
              throw_translated(error, ErrorFamily::kCpu);
            }
          },
          py::arg("index"))
      .def_property_readonly("indices",
                             [](const PyCpus& self) {
                               std::vector<int> indices;
                               for (const auto& cpu : self.cpus) {
                                 indices.push_back(cpu->index());
                               }
                               return indices;
                             })
      .def("__len__", [](const PyCpus& self) { return self.cpus.size(); });

  module.def(
      "get_cpus",
      []() {
        static const std::shared_ptr<PyCpus> instance = [] {
          auto cpus = std::make_shared<PyCpus>();
          cpus->cpus = zeus::device::get_cpus().cpus;
          return cpus;
        }();
        const device::CpuDiscovery& discovery = zeus::device::get_cpus();
        if (instance->cpus.empty()) {
          throw_python_error(
              discovery.permission_denied ? "ZeusCPUNoPermissionError" : "ZeusCPUInitError",
              discovery.message.empty() ? "no CPU package with RAPL was found" : discovery.message);
        }
        return instance;
      },
      "The CPU packages of this machine (RAPL).");

  module.def(
      "_cpus_through_zeusd", []() { return zeus::device::get_cpus().through_zeusd; },
      "Whether get_cpus()'s packages are read through the zeusd daemon (ZeusdRAPLCPU).");

  // Simulated GPUs on a clock that never moves: reading them costs a mutex and no clock read
  // (the benchmark's "zero-cost device"; their energy stays 0). With tick_s, each read of the
  // clock moves it on by tick_s, so that every energy read finds more energy (the same cost and
  // an atomic add: the benchmark's windows with energy).
  module.def(
      "_benchmark_gpus",
      [](int count, const std::string& model, double tick_s) {
        if (count < 0) {
          throw py::value_error("count must be >= 0");
        }
        if (!(tick_s >= 0.0 && tick_s <= 1.0)) {
          throw py::value_error("tick_s must be in [0, 1]");
        }
        const std::shared_ptr<Clock> clock =
            tick_s > 0.0 ? std::static_pointer_cast<Clock>(std::make_shared<BenchmarkTickingClock>(
                               units::nanoseconds_from_seconds(tick_s)))
                         : std::make_shared<ManualClock>(1);
        std::vector<std::shared_ptr<device::Gpu>> list;
        std::vector<int> physical;
        for (int i = 0; i < count; ++i) {
          list.push_back(
              std::make_shared<device::SimulatedGpu>(device::simulated_gpu_model(model), i, clock));
          physical.push_back(i);
        }
        auto gpus = std::make_shared<PyGpus>();
        gpus->gpus = device::Gpus(std::move(list), std::move(physical));
        gpus->backend = "simulated";
        return gpus;
      },
      py::arg("count"), py::arg("model") = "h200", py::arg("tick_s") = 0.0);

  module.def(
      "has_sys_admin", []() { return zeus::device::has_sys_admin(); },
      "Whether this process has CAP_SYS_ADMIN (needed to change GPU settings).");

  bind_zeusd(module);
}

}  // namespace zeus::python
