// Shared by the tests of ZEUS_SIMULATED_GPUS options (thermal, sensor): a malformed spec is
// refused quoting it, and a spec goes through discovery as the environment would give it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "zeus/common/clock.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"
#include "zeus/device/simulated_gpu.hpp"

namespace zeus::testing {

// parse_simulated_gpus_spec(bad) throws kInvalidArgument quoting `bad`.
inline void expect_spec_refused(const std::string& bad) {
  try {
    zeus::device::parse_simulated_gpus_spec(bad);
    FAIL() << bad;
  } catch (const zeus::Error& error) {
    EXPECT_EQ(error.kind(), zeus::ErrorKind::kInvalidArgument) << bad;
    EXPECT_NE(std::string(error.what()).find("\"" + bad + "\""), std::string::npos) << error.what();
  }
}

// The GPUs discovered with ZEUS_SIMULATED_GPUS=`spec` (and nothing else set) on `clock`.
inline zeus::device::GpuDiscovery discover_with_spec(const std::string& spec,
                                                     std::shared_ptr<zeus::Clock> clock) {
  zeus::device::DiscoveryOptions options;
  options.env = [spec](const std::string& name) -> std::optional<std::string> {
    if (name == "ZEUS_SIMULATED_GPUS") {
      return spec;
    }
    return std::nullopt;
  };
  options.clock = std::move(clock);
  return zeus::device::discover_gpus(options);
}

}  // namespace zeus::testing
