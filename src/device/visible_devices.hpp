// CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, interpreted as the CUDA runtime does.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace zeus::device {

// Maps the entries of a *_VISIBLE_DEVICES value onto physical device indices.
//
// `value` is the variable's text (std::nullopt when unset: every device is visible, in order).
// `physical_uuids` lists the physical devices' UUIDs in physical-index order.
//
// Rules, matching the CUDA runtime:
//  - entries are separated by commas, surrounding whitespace is ignored;
//  - an entry is a decimal physical index, or a UUID ("GPU-8e6f...") or a unique prefix of one;
//  - the list ends at the first entry that names no device (an index out of range, a negative
//    index such as the common "-1", an unknown UUID) or repeats an earlier device: the devices
//    before it stay visible, a warning is logged;
//  - an empty value hides every device.
// Errors (zeus::Error kInvalidArgument, quoting `variable` and its value): an entry that is
// neither an integer nor a UUID, an empty entry, an ambiguous UUID prefix, or a MIG instance
// ("MIG-..."), which cannot be measured.
std::vector<int> resolve_visible_devices(const std::string& variable,
                                         const std::optional<std::string>& value,
                                         const std::vector<std::string>& physical_uuids);

}  // namespace zeus::device
