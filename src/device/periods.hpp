// Integer arithmetic on periodic events in nanoseconds (load profiles, sensor sampling): which
// period an instant falls in, also before the origin.
#pragma once

#include <cstdint>

namespace zeus::device {

// The largest k with k x b <= a (b > 0).
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// The smallest k with k x b >= a (b > 0).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

}  // namespace zeus::device
