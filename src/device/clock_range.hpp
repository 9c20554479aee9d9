// Locked clocks as NVML takes them: nvmlDeviceSetGpuLockedClocks and
// nvmlDeviceSetMemoryLockedClocks accept a *range*, and the driver runs at supported clocks
// inside it (`nvidia-smi -lgc 1000,1500` works although neither bound is a listed clock). One
// rule for zeusd's validation, the client-side ZeusdGpu and the simulated GPU's snapping:
// min <= max, and the range must meet the span of the supported clocks.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zeus::device {

// Why the range [min_mhz, max_mhz] cannot be locked on a GPU whose supported clocks are
// `supported` (any order), or nullopt. `domain` starts the message ("Graphics", "Memory"). An
// empty list (the backend did not say) only checks min <= max.
inline std::optional<std::string> clock_range_problem(std::string_view domain,
                                                      std::uint32_t min_mhz, std::uint32_t max_mhz,
                                                      const std::vector<std::uint32_t>& supported) {
  if (min_mhz > max_mhz) {
    return fmt::format("min_clock_mhz {} is greater than max_clock_mhz {}", min_mhz, max_mhz);
  }
  if (supported.empty()) {
    return std::nullopt;
  }
  const auto [lowest, highest] = std::minmax_element(supported.begin(), supported.end());
  if (max_mhz < *lowest || min_mhz > *highest) {
    return fmt::format(
        "{} clocks {}-{} MHz are outside the supported range {}-{} MHz of this GPU (any range "
        "that meets it is accepted; the driver picks supported clocks inside it)",
        domain, min_mhz, max_mhz, *lowest, *highest);
  }
  return std::nullopt;
}

// The supported clocks the driver settles on for an accepted range (clock_range_problem gave
// nullopt, `supported` not empty): each bound clamped to the supported span, then moved to the
// nearest supported clock (the lower one on a tie). Rounding to the nearest is monotonic, so the
// result keeps min <= max.
inline std::pair<std::uint32_t, std::uint32_t> snap_clock_range(
    std::uint32_t min_mhz, std::uint32_t max_mhz, std::vector<std::uint32_t> supported) {
  std::sort(supported.begin(), supported.end());
  const auto nearest = [&supported](std::uint32_t mhz) {
    mhz = std::clamp(mhz, supported.front(), supported.back());
    const auto above = std::lower_bound(supported.begin(), supported.end(), mhz);
    if (*above == mhz || above == supported.begin()) {
      return *above;
    }
    const std::uint32_t below = *(above - 1);
    return mhz - below <= *above - mhz ? below : *above;
  };
  return {nearest(min_mhz), nearest(max_mhz)};
}

}  // namespace zeus::device
