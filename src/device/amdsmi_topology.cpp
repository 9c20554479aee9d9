// AMD GPU discovery and topology: listing the processors of every socket, HIP ordering, the
// socket power field probe, energy-counter validation and the MI250/MI250X chiplet rule. See
// amdsmi_topology.hpp for what each device record promises and docs/amdsmi.md for why.
#include "amdsmi_topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device::amdsmi {

std::string odd_chiplet_message(int index) {
  return fmt::format(
      "GPU {0} is the second die of a dual-die AMD Instinct MI250/MI250X and has no power or "
      "energy reading of its own: the driver reports the combined power and energy of both dies "
      "(GPU {1} and GPU {0}) on GPU {1}. Measure GPU {1} instead; its readings include this die.",
      index, index - 1);
}

namespace {

std::vector<ProcessorHandle> list_processors(const Session& session) {
  std::uint32_t socket_count = 0;
  ZEUS_AMDSMI_CALL(session, amdsmi_get_socket_handles, "counting sockets", &socket_count, nullptr);
  std::vector<SocketHandle> sockets(socket_count);
  if (socket_count > 0) {
    ZEUS_AMDSMI_CALL(session, amdsmi_get_socket_handles, "listing sockets", &socket_count,
                     sockets.data());
    sockets.resize(std::min<std::size_t>(socket_count, sockets.size()));
  }
  std::vector<ProcessorHandle> processors;
  for (SocketHandle socket : sockets) {
    std::uint32_t count = 0;
    ZEUS_AMDSMI_CALL(session, amdsmi_get_processor_handles, "counting GPUs", socket, &count,
                     nullptr);
    std::vector<ProcessorHandle> handles(count);
    if (count > 0) {
      ZEUS_AMDSMI_CALL(session, amdsmi_get_processor_handles, "listing GPUs", socket, &count,
                       handles.data());
      handles.resize(std::min<std::size_t>(count, handles.size()));
    }
    processors.insert(processors.end(), handles.begin(), handles.end());
  }
  return processors;
}

// One uint32 per processor read from `function`'s structure at `offset`; nullopt when the
// function is absent, fails for any processor, or gives two processors the same key.
template <typename Fn>
std::optional<std::vector<std::uint32_t>> read_order_keys(const Session& session,
                                                          Fn Functions::*function, const char* name,
                                                          std::size_t offset,
                                                          const std::vector<ProcessorHandle>& all) {
  if (session.fn().*function == nullptr) {
    return std::nullopt;
  }
  std::vector<std::uint32_t> keys;
  for (ProcessorHandle handle : all) {
    AmdSmiBuffer info;
    const Status status = session.call(function, handle, info.data());
    if (status != kStatusSuccess) {
      log().debug("{} failed ({}); not ordering GPUs by it", name, status_name(status));
      return std::nullopt;
    }
    keys.push_back(info.read<std::uint32_t>(offset));
  }
  if (std::set<std::uint32_t>(keys.begin(), keys.end()).size() != keys.size()) {
    log().debug("{} gave two GPUs the same id; not ordering GPUs by it", name);
    return std::nullopt;
  }
  return keys;
}

// Sorts processors into HIP order.
std::vector<ProcessorHandle> order_by_hip_index(const Session& session,
                                                std::vector<ProcessorHandle> processors) {
  auto keys =
      read_order_keys(session, &Functions::amdsmi_get_gpu_enumeration_info,
                      "amdsmi_get_gpu_enumeration_info", kEnumerationHipIdOffset, processors);
  if (!keys.has_value()) {
    keys = read_order_keys(session, &Functions::amdsmi_get_gpu_kfd_info, "amdsmi_get_gpu_kfd_info",
                           kKfdNodeIdOffset, processors);
  }
  if (!keys.has_value()) {
    if (processors.size() > 1) {
      log().warn(
          "AMD SMI gives neither HIP indices nor KFD node ids; GPUs are numbered in AMD "
          "SMI's enumeration order, which may differ from HIP's");
    }
    return processors;
  }
  std::vector<std::size_t> order(processors.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return (*keys)[a] < (*keys)[b]; });
  std::vector<ProcessorHandle> sorted;
  sorted.reserve(processors.size());
  for (std::size_t i : order) {
    sorted.push_back(processors[i]);
  }
  return sorted;
}

// Which of the two socket power fields the device fills in.
void detect_power_fields(const Session& session, DeviceRecord& record) {
  try {
    const SocketPower power = read_socket_power(session, record.handle, record.index);
    record.instant_power_supported = power_field_valid(power.current_w);
    record.average_power_supported = power_field_valid(power.average_w);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNotSupported) {
      record.instant_power_supported = false;
      record.average_power_supported = false;
    }
    // Other failures surface on the first power read.
    log().debug("GPU {}: could not probe power fields: {}", record.index, error.what());
  }
}

// Power used to judge the energy counter: average, else instant, else 0.
std::uint32_t validation_power_mw(const Session& session, const DeviceRecord& record) {
  try {
    const SocketPower power = read_socket_power(session, record.handle, record.index);
    if (record.average_power_supported && power_field_valid(power.average_w)) {
      return milliwatts_from_socket_watts(power.average_w);
    }
    if (record.instant_power_supported && power_field_valid(power.current_w)) {
      return milliwatts_from_socket_watts(power.current_w);
    }
  } catch (const Error& error) {
    log().debug("GPU {}: no power reading for the energy counter check: {}", record.index,
                error.what());
  }
  return 0;
}

// Reads power and the energy counter, waits one window, reads the counter again, and keeps the
// counter of each device whose measured energy is within a factor of 10 of power x time.
void validate_energy_counters(const Session& session, std::vector<DeviceRecord>& devices,
                              const AmdSmiOptions& options) {
  const std::shared_ptr<Clock> clock = options.clock ? options.clock : steady_clock();
  struct Probe {
    std::uint32_t power_mw = 0;
    std::optional<long double> start_uj;
    double start_s = 0.0;
  };
  std::vector<Probe> probes(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    probes[i].power_mw = validation_power_mw(session, devices[i]);
  }
  bool any_started = false;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    try {
      probes[i].start_uj = read_energy_uj(session, devices[i].handle, devices[i].index);
      probes[i].start_s = clock->now_s();
      any_started = true;
    } catch (const Error& error) {
      devices[i].energy_counter_note = error.what();
    }
  }
  if (any_started) {
    clock->sleep_for_s(options.validation_window_s);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceRecord& device = devices[i];
    const Probe& probe = probes[i];
    if (!probe.start_uj.has_value()) {
      continue;
    }
    long double end_uj = 0.0L;
    try {
      end_uj = read_energy_uj(session, device.handle, device.index);
    } catch (const Error& error) {
      device.energy_counter_note = error.what();
      continue;
    }
    double elapsed_s = clock->now_s() - probe.start_s;
    if (!(elapsed_s > 0.0)) {
      elapsed_s = options.validation_window_s;
    }
    const double measured_mj =
        static_cast<double>(units::precise_millijoules_from_microjoules(end_uj - *probe.start_uj));
    const double expected_mj = static_cast<double>(probe.power_mw) * elapsed_s;
    if (expected_mj < 0.001) {
      device.energy_counter_note = fmt::format(
          "its power reads zero, so the counter could not be checked against it (expected "
          "{:.3f} mJ over {:.3f} s)",
          expected_mj, elapsed_s);
    } else if (const double ratio = measured_mj / expected_mj; ratio > 0.1 && ratio < 10.0) {
      device.energy_counter_supported = true;
    } else {
      device.energy_counter_note = fmt::format(
          "the counter disagrees with the power reading (measured {:.1f} mJ, expected {:.1f} mJ "
          "over {:.3f} s; see https://github.com/ROCm/amdsmi/issues/38)",
          measured_mj, expected_mj, elapsed_s);
    }
    if (!device.energy_counter_supported) {
      log().info("GPU {}: not using the AMD SMI energy counter: {}", device.index,
                 device.energy_counter_note);
    }
  }
  // MI250/MI250X: each die is a GPU, but only the first (even HIP index) reports power, which
  // covers both dies.
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceRecord& device = devices[i];
    std::string name;
    try {
      name = read_market_name(session, device.handle, device.index);
    } catch (const Error&) {
      continue;
    }
    if (name.find("MI250") == std::string::npos) {
      continue;
    }
    if (device.index % 2 == 1 && probes[i].power_mw == 0) {
      device.odd_chiplet = true;
      device.energy_counter_supported = false;
      device.energy_counter_note = odd_chiplet_message(device.index);
      log().warn("{}", odd_chiplet_message(device.index));
    } else if (device.index % 2 == 0 && probes[i].power_mw != 0) {
      log().info(
          "GPU {} is a dual-die AMD Instinct MI250/MI250X: its power and energy include "
          "both dies (GPU {} and GPU {}).",
          device.index, device.index, device.index + 1);
    }
  }
}

}  // namespace

std::vector<DeviceRecord> discover_devices(const Session& session, const AmdSmiOptions& options) {
  const std::vector<ProcessorHandle> processors =
      order_by_hip_index(session, list_processors(session));
  std::vector<DeviceRecord> devices(processors.size());
  for (std::size_t i = 0; i < processors.size(); ++i) {
    devices[i].handle = processors[i];
    devices[i].index = static_cast<int>(i);
    detect_power_fields(session, devices[i]);
  }
  validate_energy_counters(session, devices, options);
  return devices;
}

}  // namespace zeus::device::amdsmi
