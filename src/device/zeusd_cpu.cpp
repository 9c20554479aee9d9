// CPU energy read through zeusd: one GET /cpu/get_cumulative_energy per reading.
#include "device/zeusd_cpu.hpp"

#include <nlohmann/json.hpp>
#include <utility>

#include "common/text.hpp"
#include "zeus/common/error.hpp"

namespace zeus::device {

using nlohmann::json;

ZeusdCpu::ZeusdCpu(ZeusdCpuInfo info, std::shared_ptr<ZeusdConnection> daemon)
    : info_(info), daemon_(std::move(daemon)) {}

std::uint64_t ZeusdCpu::read(bool dram) {
  try {
    return read_energy_uj(dram);
  } catch (const Error& error) {
    throw Error(error.kind(), error.what(), ErrorSubject::kCpu);
  }
}

std::uint64_t ZeusdCpu::read_energy_uj(bool dram) {
  const std::string id = std::to_string(info_.id);
  const std::string what = dram ? "read the DRAM energy of CPU " : "read the energy of CPU ";
  const std::string body =
      daemon_->get(what + id, "/cpu/get_cumulative_energy?cpu_ids=" + id +
                                  (dram ? "&cpu=false&dram=true" : "&cpu=true&dram=false"));
  const char* field = dram ? "dram_energy_uj" : "cpu_energy_uj";
  try {
    const json reply = json::parse(body);
    return reply.at(id).at(field).get<std::uint64_t>();
  } catch (const json::exception& error) {
    throw Error(ErrorKind::kIo,
                "the zeusd daemon at " + daemon_->config().describe() + " sent a reply without " +
                    field + " for CPU " + id + " (" +
                    std::string(text::json_error_text(error.what())) +
                    "): " + zeusd_error_text(body),
                ErrorSubject::kCpu);
  }
}

std::uint64_t ZeusdCpu::package_energy_uj() {
  return read(false);
}

std::uint64_t ZeusdCpu::dram_energy_uj() {
  if (!info_.dram_available) {
    throw Error(ErrorKind::kNotSupported,
                "CPU package " + std::to_string(info_.id) +
                    " has no DRAM zone on the zeusd daemon at " + daemon_->config().describe(),
                ErrorSubject::kCpu);
  }
  return read(true);
}

}  // namespace zeus::device
