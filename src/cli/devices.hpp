// Which devices a command works on: `--gpus 0,1` and `--cpus 0` checked against what was found,
// for zeus monitor, zeus power and zeus exporter alike.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "zeus/device/gpus.hpp"
#include "zeus/device/rapl.hpp"

namespace zeus::cli {

// The indices `text` lists ("0,1"; parse_index_list), or nullopt when it is empty (no choice
// made). Throws Error(kInvalidArgument) naming `what` for a malformed list.
std::optional<std::vector<int>> parse_device_request(std::string_view text, std::string_view what);

// The GPUs (indices 0..n-1 of `gpus`) a command uses: all of them without a request, else the
// requested ones, each checked (Error(kInvalidArgument) naming --gpus and the valid indices).
std::vector<int> select_gpus(const std::optional<std::vector<int>>& request,
                             const device::Gpus& gpus);

// The same for RAPL CPU packages (their package indices), checked against the discovered ones
// (--cpus). Call require_cpus first when packages were asked for.
std::vector<int> select_cpus(const std::optional<std::vector<int>>& request,
                             const device::CpuDiscovery& cpus);

// When `--cpus <flag_value>` asked for packages but none can be read: Error(kNoPermission) when
// RAPL exists but is not readable (exit 3), else Error(kNotSupported) (exit 4), naming the flag
// and why. The one rule for zeus monitor and zeus exporter.
void require_cpus(const device::CpuDiscovery& cpus, std::string_view flag_value);

// The discovered packages whose index is in `indices`, in package order.
std::vector<std::shared_ptr<device::Cpu>> cpus_with_indices(const device::CpuDiscovery& cpus,
                                                            const std::vector<int>& indices);

}  // namespace zeus::cli
