// GPU setters through zeusd: POST /gpu/set_* and /gpu/reset_* on the shared connection, with the
// clock ranges checked locally first (zeus/device/zeusd_gpu.hpp).
#include "zeus/device/zeusd_gpu.hpp"

#include <utility>
#include <vector>

#include "device/clock_range.hpp"
#include "device/zeusd_connection.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {

ZeusdGpu::ZeusdGpu(std::shared_ptr<Gpu> inner, int daemon_index,
                   std::shared_ptr<ZeusdConnection> daemon, bool match_by_pci)
    : ForwardingGpu(std::move(inner)), daemon_(std::move(daemon)), match_by_pci_(match_by_pci) {
  if (!match_by_pci_) {
    daemon_index_ = daemon_index;
  }
}

int ZeusdGpu::daemon_index() {
  const std::lock_guard lock(index_mutex_);
  if (!daemon_index_) {
    daemon_index_ = daemon_->daemon_index_by_pci(inner_->pci_bus_id());
  }
  return *daemon_index_;
}

void ZeusdGpu::send(const std::string& operation, const std::string& route,
                    const std::string& extra, bool block) {
  try {
    daemon_->require_gpu_control();
    const int index = daemon_index();
    daemon_->post(operation + " of GPU " + std::to_string(index),
                  route + "?gpu_ids=" + std::to_string(index) + extra +
                      (block ? "&block=true" : "&block=false"));
  } catch (const Error& error) {
    throw Error(error.kind(), error.what(), ErrorSubject::kGpu);
  }
}

void ZeusdGpu::set_power_limit_mw(std::uint32_t power_limit_mw) {
  set_power_limit_mw(power_limit_mw, true);
}

void ZeusdGpu::set_power_limit_mw(std::uint32_t power_limit_mw, bool block) {
  if (inner_->power_limit_mw() == power_limit_mw) {
    return;
  }
  send("set the power limit", "/gpu/set_power_limit",
       "&power_limit_mw=" + std::to_string(power_limit_mw), block);
}

void ZeusdGpu::reset_power_limit() {
  reset_power_limit(true);
}

void ZeusdGpu::reset_power_limit(bool block) {
  set_power_limit_mw(inner_->default_power_limit_mw(), block);
}

void ZeusdGpu::set_persistence_mode(bool enabled) {
  set_persistence_mode(enabled, true);
}

void ZeusdGpu::set_persistence_mode(bool enabled, bool block) {
  send("set persistence mode", "/gpu/set_persistence_mode",
       std::string("&enabled=") + (enabled ? "true" : "false"), block);
}

void ZeusdGpu::check_clock_range(bool memory, std::uint32_t min_mhz, std::uint32_t max_mhz) {
  std::vector<std::uint32_t> supported;
  try {
    supported = memory ? inner_->supported_memory_clocks_mhz()
                       : inner_->supported_graphics_clocks_mhz(std::nullopt);
  } catch (const Error&) {
    // The local library cannot list them: only min <= max is checked here, the daemon does
    // the rest.
  }
  if (auto problem =
          clock_range_problem(memory ? "Memory" : "Graphics", min_mhz, max_mhz, supported)) {
    throw Error(ErrorKind::kInvalidArgument, *problem, ErrorSubject::kGpu);
  }
}

namespace {

std::string clock_query(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  return "&min_clock_mhz=" + std::to_string(min_mhz) + "&max_clock_mhz=" + std::to_string(max_mhz);
}

}  // namespace

void ZeusdGpu::set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  set_gpu_locked_clocks_mhz(min_mhz, max_mhz, true);
}

void ZeusdGpu::set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block) {
  check_clock_range(false, min_mhz, max_mhz);
  send("lock the GPU clocks", "/gpu/set_gpu_locked_clocks", clock_query(min_mhz, max_mhz), block);
}

void ZeusdGpu::reset_gpu_locked_clocks() {
  reset_gpu_locked_clocks(true);
}

void ZeusdGpu::reset_gpu_locked_clocks(bool block) {
  send("reset the GPU locked clocks", "/gpu/reset_gpu_locked_clocks", "", block);
}

void ZeusdGpu::set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) {
  set_memory_locked_clocks_mhz(min_mhz, max_mhz, true);
}

void ZeusdGpu::set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz,
                                            bool block) {
  check_clock_range(true, min_mhz, max_mhz);
  send("lock the memory clocks", "/gpu/set_mem_locked_clocks", clock_query(min_mhz, max_mhz),
       block);
}

void ZeusdGpu::reset_memory_locked_clocks() {
  reset_memory_locked_clocks(true);
}

void ZeusdGpu::reset_memory_locked_clocks(bool block) {
  send("reset the memory locked clocks", "/gpu/reset_mem_locked_clocks", "", block);
}

void ZeusdGpu::reset_locked_clocks() {
  reset_locked_clocks(true);
}

void ZeusdGpu::reset_locked_clocks(bool block) {
  if (inner_->backend() == GpuBackend::kAmdSmi) {
    send("reset the locked clocks", "/gpu/reset_locked_clocks", "", block);
    return;
  }
  reset_gpu_locked_clocks(block);
  reset_memory_locked_clocks(block);
}

}  // namespace zeus::device
