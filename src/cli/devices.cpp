#include "cli/devices.hpp"

#include <algorithm>
#include <string>

#include "cli/arguments.hpp"
#include "zeus/common/error.hpp"

namespace zeus::cli {

std::optional<std::vector<int>> parse_device_request(std::string_view text, std::string_view what) {
  if (text.empty()) {
    return std::nullopt;
  }
  return parse_index_list(text, what);
}

std::vector<int> select_gpus(const std::optional<std::vector<int>>& request,
                             const device::Gpus& gpus) {
  std::vector<int> all;
  for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
    all.push_back(i);
  }
  if (!request) {
    return all;
  }
  check_indices(*request, all, "--gpus", "GPU");
  return *request;
}

std::vector<int> select_cpus(const std::optional<std::vector<int>>& request,
                             const device::CpuDiscovery& cpus) {
  std::vector<int> all;
  for (const auto& cpu : cpus.cpus) {
    all.push_back(cpu->index());
  }
  if (!request) {
    return all;
  }
  check_indices(*request, all, "--cpus", "CPU package");
  return *request;
}

void require_cpus(const device::CpuDiscovery& cpus, std::string_view flag_value) {
  if (!cpus.available || cpus.cpus.empty()) {
    throw Error(
        cpus.permission_denied ? ErrorKind::kNoPermission : ErrorKind::kNotSupported,
        "--cpus " + std::string(flag_value) + ": cannot measure CPU packages: " + cpus.message);
  }
}

std::vector<std::shared_ptr<device::Cpu>> cpus_with_indices(const device::CpuDiscovery& cpus,
                                                            const std::vector<int>& indices) {
  std::vector<std::shared_ptr<device::Cpu>> chosen;
  for (const auto& cpu : cpus.cpus) {
    if (std::find(indices.begin(), indices.end(), cpu->index()) != indices.end()) {
      chosen.push_back(cpu);
    }
  }
  return chosen;
}

}  // namespace zeus::cli
