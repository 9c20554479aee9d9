// Placeholder: replaced by the RAPL tests.
#include <gtest/gtest.h>

#include "zeus/device/rapl.hpp"

TEST(RaplPlaceholder, MissingRootIsNotAvailable) {
  EXPECT_FALSE(zeus::discover_rapl_cpus("/nonexistent-powercap").available);
}
