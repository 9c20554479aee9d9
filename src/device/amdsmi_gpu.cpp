// The AMD GPU backend's Gpu and GpuProvider: each Gpu call is one or two AMD SMI calls on the
// session (amdsmi_library.hpp) for a device record that discovery (amdsmi_topology.hpp) produced,
// with AMD SMI's units turned into zeus's. Units from AMD SMI: power caps in microwatts, socket
// power in watts, energy in microjoules, temperatures in degrees Celsius, clock lists in hertz.
// Devices are numbered by HIP index. See docs/amdsmi.md.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "amdsmi_api.hpp"
#include "amdsmi_library.hpp"
#include "amdsmi_topology.hpp"
#include "common/log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus::device {
namespace {

using amdsmi::AmdSmiBuffer;
using amdsmi::ClockType;
using amdsmi::DeviceRecord;
using amdsmi::ProcessorHandle;
using amdsmi::Session;
using amdsmi::SocketPower;
using amdsmi::Status;

class AmdSmiGpu final : public Gpu {
 public:
  AmdSmiGpu(std::shared_ptr<const Session> session, DeviceRecord record)
      : session_(std::move(session)), record_(std::move(record)) {}

  GpuBackend backend() const override { return GpuBackend::kAmdSmi; }

  std::string name() override {
    std::string market_name = amdsmi::read_market_name(*session_, handle(), index());
    return market_name.empty() ? std::string("AMD GPU") : market_name;
  }

  std::string uuid() override {
    std::array<char, 256> buffer{};
    unsigned int length = static_cast<unsigned int>(buffer.size() - 1);
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_gpu_device_uuid, action("reading the UUID"), handle(),
                     &length, buffer.data());
    return std::string(buffer.data());
  }

  std::string pci_bus_id() override {
    AmdSmiBuffer bdf;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_gpu_device_bdf, action("reading the PCI address"),
                     handle(), bdf.data());
    const auto word = bdf.read<std::uint64_t>(0);
    return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", word >> 16, (word >> 8) & 0xFFu,
                       (word >> 3) & 0x1Fu, word & 0x7u);
  }

  std::string architecture() override { return architecture_from_name(name()); }

  PowerLimitConstraints power_limit_constraints_mw() override {
    const PowerCaps caps = read_power_caps("reading the power limit range");
    // Round the range inward so that every value in it is accepted by the driver.
    return {uw_to_mw(caps.min_uw, Rounding::kUp, "minimum power cap"),
            uw_to_mw(caps.max_uw, Rounding::kDown, "maximum power cap")};
  }

  std::uint32_t default_power_limit_mw() override {
    const PowerCaps caps = read_power_caps("reading the default power limit");
    return uw_to_mw(caps.default_uw, Rounding::kDown, "default power cap");
  }

  std::uint32_t power_limit_mw() override {
    const PowerCaps caps = read_power_caps("reading the power limit");
    return uw_to_mw(caps.current_uw, Rounding::kDown, "power cap");
  }

  // AMD SMI has no separate "enforced" limit: the power cap is what the firmware enforces.
  std::uint32_t enforced_power_limit_mw() override { return power_limit_mw(); }

  void set_power_limit_mw(std::uint32_t power_limit_mw) override {
    const PowerCaps caps = read_power_caps("reading the power limit before setting it");
    const std::uint32_t min_mw = uw_to_mw(caps.min_uw, Rounding::kUp, "minimum power cap");
    const std::uint32_t max_mw = uw_to_mw(caps.max_uw, Rounding::kDown, "maximum power cap");
    if (power_limit_mw < min_mw || power_limit_mw > max_mw) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("power limit {} mW is outside the valid range [{}, {}] mW of GPU {}",
                              power_limit_mw, min_mw, max_mw, index()),
                  ErrorSubject::kGpu);
    }
    if (uw_to_mw(caps.current_uw, Rounding::kDown, "power cap") == power_limit_mw) {
      return;
    }
    ZEUS_AMDSMI_CALL(*session_, amdsmi_set_power_cap,
                     action(fmt::format("setting the power limit to {} mW", power_limit_mw)),
                     handle(), 0U, units::microwatts_from_milliwatts(power_limit_mw));
  }

  void reset_power_limit() override {
    const PowerCaps caps = read_power_caps("reading the power limit before resetting it");
    if (caps.current_uw == caps.default_uw) {
      return;
    }
    ZEUS_AMDSMI_CALL(
        *session_, amdsmi_set_power_cap,
        action(fmt::format("resetting the power limit to its default {} uW", caps.default_uw)),
        handle(), 0U, caps.default_uw);
  }

  bool persistence_mode() override {
    throw Error(ErrorKind::kNotSupported, "Persistence mode is not supported on AMD GPUs.",
                ErrorSubject::kGpu);
  }

  void set_persistence_mode(bool /*enabled*/) override {
    throw Error(ErrorKind::kNotSupported, "Persistence mode is not supported on AMD GPUs.",
                ErrorSubject::kGpu);
  }

  std::vector<std::uint32_t> supported_memory_clocks_mhz() override {
    return read_clock_list_mhz(amdsmi::kClockTypeMem, "memory");
  }

  std::vector<std::uint32_t> supported_graphics_clocks_mhz(
      std::optional<std::uint32_t> memory_clock_mhz) override {
    // AMD SMI lists graphics clock levels independently of the memory clock; a given memory
    // clock is only checked to be one of the supported ones.
    if (memory_clock_mhz.has_value()) {
      const auto memory = supported_memory_clocks_mhz();
      if (std::find(memory.begin(), memory.end(), *memory_clock_mhz) == memory.end()) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("memory clock {} MHz is not supported by GPU {} (supported: {})",
                                *memory_clock_mhz, index(), fmt::join(memory, ", ")),
                    ErrorSubject::kGpu);
      }
    }
    return read_clock_list_mhz(amdsmi::kClockTypeGfx, "graphics");
  }

  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    set_clock_range_mhz(amdsmi::kClockTypeGfx, "graphics", min_mhz, max_mhz);
  }

  void reset_gpu_locked_clocks() override {
    throw Error(ErrorKind::kNotSupported,
                "AMD SMI cannot reset the graphics clock range alone; use reset_locked_clocks(), "
                "which returns the GPU to the AUTO performance level.",
                ErrorSubject::kGpu);
  }

  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override {
    set_clock_range_mhz(amdsmi::kClockTypeMem, "memory", min_mhz, max_mhz);
  }

  void reset_memory_locked_clocks() override {
    throw Error(ErrorKind::kNotSupported,
                "AMD SMI cannot reset the memory clock range alone; use reset_locked_clocks(), "
                "which returns the GPU to the AUTO performance level.",
                ErrorSubject::kGpu);
  }

  void reset_locked_clocks() override {
    session_->require(session_->fn().amdsmi_set_gpu_perf_level, "amdsmi_set_gpu_perf_level",
                      "Resetting locked clocks");
    ZEUS_AMDSMI_CALL(*session_, amdsmi_set_gpu_perf_level,
                     action("resetting the performance level to AUTO"), handle(),
                     amdsmi::kPerfLevelAuto);
  }

  std::uint32_t instant_power_mw() override {
    ensure_not_odd_chiplet();
    if (!record_.instant_power_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("Instant power is not supported on GPU {} (AMD SMI reports no "
                              "current_socket_power); use average_power_mw() instead.",
                              index()),
                  ErrorSubject::kGpu);
    }
    const SocketPower power = amdsmi::read_socket_power(*session_, handle(), index());
    if (!amdsmi::power_field_valid(power.current_w)) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("GPU {} reported no current_socket_power", index()),
                  ErrorSubject::kGpu);
    }
    return amdsmi::milliwatts_from_socket_watts(power.current_w);
  }

  std::uint32_t average_power_mw() override {
    ensure_not_odd_chiplet();
    if (!record_.average_power_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("Average power is not supported on GPU {} (AMD SMI reports no "
                              "average_socket_power); use instant_power_mw() instead.",
                              index()),
                  ErrorSubject::kGpu);
    }
    const SocketPower power = amdsmi::read_socket_power(*session_, handle(), index());
    if (!amdsmi::power_field_valid(power.average_w)) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("GPU {} reported no average_socket_power", index()),
                  ErrorSubject::kGpu);
    }
    return amdsmi::milliwatts_from_socket_watts(power.average_w);
  }

  std::uint32_t average_memory_power_mw() override {
    throw Error(ErrorKind::kNotSupported, "Memory power is not supported on AMD GPUs.",
                ErrorSubject::kGpu);
  }

  bool supports_energy_counter() override {
    return record_.energy_counter_supported && !record_.odd_chiplet;
  }

  std::uint64_t total_energy_mj() override {
    ensure_not_odd_chiplet();
    if (!record_.energy_counter_supported) {
      throw Error(ErrorKind::kNotSupported,
                  fmt::format("The energy counter of GPU {} is not used: {}. Integrate "
                              "average_power_mw() or instant_power_mw() over time instead.",
                              index(), record_.energy_counter_note),
                  ErrorSubject::kGpu);
    }
    const long double energy_uj = amdsmi::read_energy_uj(*session_, handle(), index());
    return static_cast<std::uint64_t>(
        std::floor(units::precise_millijoules_from_microjoules(energy_uj)));
  }

  // The GPU's own power and energy: AMD SMI reports no module scope (an MI300A's CPU cores are
  // not told apart here; docs/devices.md).
  MeasuredScope power_scope() override { return MeasuredScope::kGpu; }
  MeasuredScope energy_scope() override { return MeasuredScope::kGpu; }

  int temperature_c() override {
    std::int64_t temperature = 0;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_temp_metric, action("reading the hotspot temperature"),
                     handle(), amdsmi::kTemperatureTypeHotspot, amdsmi::kTemperatureMetricCurrent,
                     &temperature);
    // amdsmi_get_temp_metric converts the kernel's millidegrees to degrees; a reading a thousand
    // times too large can only be a library that did not.
    if (temperature >= 1000 || temperature <= -1000) {
      temperature = units::celsius_from_millicelsius(temperature);
    }
    return static_cast<int>(std::clamp<std::int64_t>(temperature, std::numeric_limits<int>::min(),
                                                     std::numeric_limits<int>::max()));
  }

 private:
  enum class Rounding { kDown, kUp };

  struct PowerCaps {
    std::uint64_t current_uw = 0;
    std::uint64_t default_uw = 0;
    std::uint64_t min_uw = 0;
    std::uint64_t max_uw = 0;
  };

  ProcessorHandle handle() const { return record_.handle; }
  int index() const { return record_.index; }

  std::string action(std::string_view what) const {
    return fmt::format("{} on GPU {}", what, index());
  }

  static std::string architecture_from_name(const std::string& name) {
    const auto has = [&name](std::string_view part) {
      return name.find(part) != std::string::npos;
    };
    if (has("MI350") || has("MI355")) {
      return "cdna4";
    }
    if (has("MI300") || has("MI325")) {
      return "cdna3";
    }
    if (has("MI200") || has("MI210") || has("MI250")) {
      return "cdna2";
    }
    if (has("MI100")) {
      return "cdna";
    }
    if (has("RX 9") || has("R9700")) {
      return "rdna4";
    }
    if (has("RX 7") || has("PRO W7") || has("PRO V710")) {
      return "rdna3";
    }
    if (has("RX 6") || has("PRO W6") || has("PRO V620")) {
      return "rdna2";
    }
    return "unknown";
  }

  PowerCaps read_power_caps(std::string_view what) {
    AmdSmiBuffer info;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_power_cap_info, action(what), handle(), 0U, info.data());
    return {info.read<std::uint64_t>(amdsmi::kPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kDefaultPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kMinPowerCapOffset),
            info.read<std::uint64_t>(amdsmi::kMaxPowerCapOffset)};
  }

  std::uint32_t uw_to_mw(std::uint64_t microwatts, Rounding rounding, const char* field) {
    const std::uint64_t remainder = units::microwatts_in_part_milliwatt(microwatts);
    std::uint64_t milliwatts = units::whole_milliwatts_from_microwatts(microwatts);
    if (remainder != 0) {
      if (rounding == Rounding::kUp) {
        ++milliwatts;
      }
      if (!warned_inexact_.exchange(true)) {
        log().warn(
            "GPU {}: AMD SMI reported a {} of {} uW, not a whole number of milliwatts; "
            "using {} mW",
            index(), field, microwatts, milliwatts);
      }
    }
    return amdsmi::clamp_to_u32(milliwatts);
  }

  std::vector<std::uint32_t> read_clock_list_mhz(ClockType type, std::string_view domain) {
    const std::string capability = fmt::format("Listing supported {} clocks", domain);
    session_->require(session_->fn().amdsmi_get_clk_freq, "amdsmi_get_clk_freq", capability);
    AmdSmiBuffer frequencies;
    ZEUS_AMDSMI_CALL(*session_, amdsmi_get_clk_freq,
                     action(fmt::format("listing the supported {} clocks", domain)), handle(), type,
                     frequencies.data());
    const std::size_t count = std::min<std::size_t>(
        frequencies.read<std::uint32_t>(amdsmi::kFrequenciesNumSupportedOffset),
        amdsmi::kMaxNumFrequencies);
    std::set<std::uint32_t, std::greater<>> clocks_mhz;
    for (std::size_t i = 0; i < count; ++i) {
      const auto hertz = frequencies.read<std::uint64_t>(amdsmi::kFrequenciesListOffset + 8 * i);
      const std::uint64_t megahertz = units::megahertz_from_hertz(hertz);
      if (megahertz > 0) {
        clocks_mhz.insert(amdsmi::clamp_to_u32(megahertz));
      }
    }
    return {clocks_mhz.begin(), clocks_mhz.end()};
  }

  void set_clock_range_mhz(ClockType type, std::string_view domain, std::uint32_t min_mhz,
                           std::uint32_t max_mhz) {
    if (min_mhz > max_mhz) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("the minimum {} clock {} MHz is above the maximum {} MHz", domain,
                              min_mhz, max_mhz),
                  ErrorSubject::kGpu);
    }
    const std::string capability = fmt::format("Locking the {} clock", domain);
    session_->require(session_->fn().amdsmi_set_gpu_clk_range, "amdsmi_set_gpu_clk_range",
                      capability);
    ZEUS_AMDSMI_CALL(
        *session_, amdsmi_set_gpu_clk_range,
        action(fmt::format("locking the {} clock to [{}, {}] MHz", domain, min_mhz, max_mhz)),
        handle(), static_cast<std::uint64_t>(min_mhz), static_cast<std::uint64_t>(max_mhz), type);
  }

  void ensure_not_odd_chiplet() const {
    if (record_.odd_chiplet) {
      throw Error(ErrorKind::kNotSupported, amdsmi::odd_chiplet_message(index()),
                  ErrorSubject::kGpu);
    }
  }

  std::shared_ptr<const Session> session_;
  DeviceRecord record_;
  std::atomic<bool> warned_inexact_{false};
};

class AmdSmiProvider final : public GpuProvider {
 public:
  AmdSmiProvider(std::shared_ptr<Session> session, std::vector<DeviceRecord> devices)
      : session_(std::move(session)), devices_(std::move(devices)) {}

  GpuBackend backend() const override { return GpuBackend::kAmdSmi; }
  std::string library_path() const override { return session_->library().resolved_path(); }

  std::string driver_version() override {
    if (session_->fn().amdsmi_get_gpu_driver_info == nullptr) {
      return "";
    }
    for (const auto& device : devices_) {
      AmdSmiBuffer info;
      const Status status = session_->call(&amdsmi::Functions::amdsmi_get_gpu_driver_info,
                                           device.handle, info.data());
      if (status == amdsmi::kStatusSuccess) {
        return info.read_string(amdsmi::kDriverVersionOffset, amdsmi::kDriverVersionSize);
      }
      log().debug("amdsmi_get_gpu_driver_info failed for GPU {}: {}", device.index,
                  amdsmi::status_name(status));
    }
    return "";
  }

  std::string library_version() override { return session_->library_version(); }
  int device_count() override { return static_cast<int>(devices_.size()); }

  std::string device_uuid(int physical_index) override { return open_gpu(physical_index)->uuid(); }

  std::shared_ptr<Gpu> open_gpu(int physical_index) override {
    if (physical_index < 0 || physical_index >= device_count()) {
      throw Error(ErrorKind::kNotFound,
                  fmt::format("AMD GPU with HIP index {} not found; AMD SMI reports {} GPU(s)",
                              physical_index, device_count()),
                  ErrorSubject::kGpu);
    }
    return std::make_shared<AmdSmiGpu>(session_,
                                       devices_[static_cast<std::size_t>(physical_index)]);
  }

 private:
  std::shared_ptr<Session> session_;
  std::vector<DeviceRecord> devices_;
};

}  // namespace

std::shared_ptr<GpuProvider> open_amdsmi_with_options(const std::string& library_path,
                                                      const AmdSmiOptions& options) {
  const EnvLookup env = options.env ? options.env : process_env();
  auto session = std::make_shared<Session>(amdsmi::load_library(library_path, env));
  std::vector<DeviceRecord> devices = amdsmi::discover_devices(*session, options);
  log().debug("AMD SMI {} from {}: {} GPU(s){}", session->library_version(),
              session->library().resolved_path(), devices.size(),
              session->serialized() ? "; calls serialized (not thread-safe before ROCm 7.2)" : "");
  return std::make_shared<AmdSmiProvider>(std::move(session), std::move(devices));
}

std::shared_ptr<GpuProvider> open_amdsmi(const std::string& library_path) {
  return open_amdsmi_with_options(library_path, AmdSmiOptions{});
}

}  // namespace zeus::device
