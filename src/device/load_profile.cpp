#include "zeus/device/load_profile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "device/periods.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device {
namespace {

double clamp_level(double utilization) {
  return std::clamp(std::isnan(utilization) ? 0.0 : utilization, 0.0, 1.0);
}

}  // namespace

LoadProfile LoadProfile::constant(double utilization) {
  LoadProfile profile;
  profile.high_ = clamp_level(utilization);
  profile.low_ = profile.high_;
  return profile;
}

LoadProfile LoadProfile::square_wave(double period_s, double duty, double high, double low,
                                     std::int64_t start_ns) {
  const std::int64_t period_ns = units::nanoseconds_from_seconds(period_s);
  if (!(period_ns >= 1) || !(duty >= 0.0 && duty <= 1.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "a square-wave load needs a period of at least 1 ns and a duty in [0, 1]",
                ErrorSubject::kGpu);
  }
  LoadProfile profile;
  profile.shape_ = Shape::kSquare;
  profile.high_ = clamp_level(high);
  profile.low_ = clamp_level(low);
  profile.period_ns_ = period_ns;
  profile.on_ns_ = std::llround(duty * static_cast<double>(period_ns));
  profile.origin_ns_ = start_ns;
  return profile;
}

LoadProfile LoadProfile::bursts(std::vector<Burst> bursts, double high, double low) {
  LoadProfile profile;
  profile.shape_ = Shape::kBursts;
  profile.high_ = clamp_level(high);
  profile.low_ = clamp_level(low);
  std::sort(bursts.begin(), bursts.end(),
            [](const Burst& a, const Burst& b) { return a.start_ns < b.start_ns; });
  for (const Burst& burst : bursts) {
    if (burst.length_ns < 0 ||
        burst.start_ns > std::numeric_limits<std::int64_t>::max() - burst.length_ns) {
      throw Error(ErrorKind::kInvalidArgument,
                  "a load burst needs a length >= 0 and an end within the clock's range",
                  ErrorSubject::kGpu);
    }
    const std::int64_t end_ns = burst.start_ns + burst.length_ns;
    if (!profile.spans_.empty() && burst.start_ns <= profile.spans_.back().second) {
      profile.spans_.back().second = std::max(profile.spans_.back().second, end_ns);
    } else if (burst.length_ns > 0) {
      profile.spans_.emplace_back(burst.start_ns, end_ns);
    }
  }
  return profile;
}

std::int64_t LoadProfile::square_high_before(std::int64_t t_ns) const {
  const std::int64_t cycles = floor_div(t_ns - origin_ns_, period_ns_);
  const std::int64_t into = t_ns - origin_ns_ - cycles * period_ns_;
  return cycles * on_ns_ + std::min(into, on_ns_);
}

double LoadProfile::utilization_at(std::int64_t t_ns) const {
  return high_ns(t_ns, t_ns + 1) > 0 ? high_ : low_;
}

std::int64_t LoadProfile::high_ns(std::int64_t from_ns, std::int64_t to_ns) const {
  if (to_ns <= from_ns) {
    return 0;
  }
  switch (shape_) {
    case Shape::kConstant:
      return to_ns - from_ns;
    case Shape::kSquare:
      return square_high_before(to_ns) - square_high_before(from_ns);
    case Shape::kBursts:
      break;
  }
  std::int64_t total_ns = 0;
  for (const auto& [start_ns, end_ns] : spans_) {
    if (start_ns >= to_ns) {
      break;
    }
    total_ns += std::max<std::int64_t>(0, std::min(end_ns, to_ns) - std::max(start_ns, from_ns));
  }
  return total_ns;
}

std::int64_t LoadProfile::next_change_ns(std::int64_t t_ns) const {
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  switch (shape_) {
    case Shape::kConstant:
      return kNever;
    case Shape::kSquare: {
      const std::int64_t cycle_start =
          origin_ns_ + floor_div(t_ns - origin_ns_, period_ns_) * period_ns_;
      const std::int64_t edge = cycle_start + on_ns_;
      return edge > t_ns ? edge : cycle_start + period_ns_;
    }
    case Shape::kBursts:
      break;
  }
  for (const auto& [start_ns, end_ns] : spans_) {
    if (start_ns > t_ns) {
      return start_ns;
    }
    if (end_ns > t_ns) {
      return end_ns;
    }
  }
  return kNever;
}

}  // namespace zeus::device
