// A GPU known through zeusd's reads only (zeusd_power_gpu.hpp).
#include "device/zeusd_power_gpu.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "zeus/common/error.hpp"

namespace zeus::device {

using nlohmann::json;

ZeusdPowerGpu::ZeusdPowerGpu(std::shared_ptr<ZeusdConnection> daemon, int daemon_index,
                             std::string name)
    : daemon_(std::move(daemon)),
      index_(daemon_index),
      name_(std::move(name)),
      backend_(name_.rfind("AMD", 0) == 0 ? GpuBackend::kAmdSmi : GpuBackend::kNvml) {}

void ZeusdPowerGpu::unsupported(const std::string& what) const {
  throw Error(ErrorKind::kNotSupported, "GPU " + std::to_string(index_) +
                                            " is read through zeusd's power and limit "
                                            "routes only: " +
                                            what + " is not available here");
}

std::uint64_t ZeusdPowerGpu::read(const std::string& route, const std::string& field) {
  const std::string id = std::to_string(index_);
  const std::string body = daemon_->get("read GPU " + id + "'s " + field, route + "?gpu_ids=" + id);
  try {
    const json parsed = json::parse(body);
    const json& holder = parsed.contains("power_mw") ? parsed.at("power_mw") : parsed;
    const json& value = holder.at(id);
    return value.is_object() ? value.at(field).get<std::uint64_t>() : value.get<std::uint64_t>();
  } catch (const json::exception&) {
    throw Error(ErrorKind::kUnknown,
                "zeusd's answer to " + route + " has no readable " + field + " for GPU " + id);
  }
}

std::uint32_t ZeusdPowerGpu::instant_power_mw() {
  return static_cast<std::uint32_t>(read("/gpu/get_power", "power_mw"));
}

std::uint32_t ZeusdPowerGpu::power_limit_mw() {
  return static_cast<std::uint32_t>(read("/gpu/get_power_limit", "power_limit_mw"));
}

PowerLimitConstraints ZeusdPowerGpu::power_limit_constraints_mw() {
  return PowerLimitConstraints{
      static_cast<std::uint32_t>(read("/gpu/get_power_limit_constraints", "min_power_limit_mw")),
      static_cast<std::uint32_t>(read("/gpu/get_power_limit_constraints", "max_power_limit_mw"))};
}

std::string ZeusdPowerGpu::uuid() {
  unsupported("the UUID");
}
std::string ZeusdPowerGpu::pci_bus_id() {
  unsupported("the PCI bus id");
}
std::string ZeusdPowerGpu::architecture() {
  unsupported("the architecture");
}
std::uint32_t ZeusdPowerGpu::default_power_limit_mw() {
  unsupported("the default power limit");
}
void ZeusdPowerGpu::set_power_limit_mw(std::uint32_t) {
  unsupported("setting the power limit");
}
void ZeusdPowerGpu::reset_power_limit() {
  unsupported("resetting the power limit");
}
bool ZeusdPowerGpu::persistence_mode() {
  unsupported("persistence mode");
}
void ZeusdPowerGpu::set_persistence_mode(bool) {
  unsupported("persistence mode");
}
std::vector<std::uint32_t> ZeusdPowerGpu::supported_memory_clocks_mhz() {
  unsupported("the clock lists");
}
std::vector<std::uint32_t> ZeusdPowerGpu::supported_graphics_clocks_mhz(
    std::optional<std::uint32_t>) {
  unsupported("the clock lists");
}
void ZeusdPowerGpu::set_gpu_locked_clocks_mhz(std::uint32_t, std::uint32_t) {
  unsupported("locking clocks");
}
void ZeusdPowerGpu::reset_gpu_locked_clocks() {
  unsupported("locking clocks");
}
void ZeusdPowerGpu::set_memory_locked_clocks_mhz(std::uint32_t, std::uint32_t) {
  unsupported("locking clocks");
}
void ZeusdPowerGpu::reset_memory_locked_clocks() {
  unsupported("locking clocks");
}
std::uint32_t ZeusdPowerGpu::average_memory_power_mw() {
  unsupported("memory power");
}
std::uint64_t ZeusdPowerGpu::total_energy_mj() {
  unsupported("the energy counter");
}
MeasuredScope ZeusdPowerGpu::power_scope() {
  return is_grace_superchip_name(name_) ? MeasuredScope::kModule : MeasuredScope::kGpu;
}
int ZeusdPowerGpu::temperature_c() {
  unsupported("the temperature");
}

}  // namespace zeus::device
