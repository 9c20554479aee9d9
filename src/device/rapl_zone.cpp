// One RAPL zone's counter made monotonic across wraparounds (see rapl_zone.hpp, docs/rapl.md).
#include "device/rapl_zone.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "common/sysfs.hpp"
#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::device {
namespace {

namespace fs = std::filesystem;

// RAPL zones have a handful of constraints (long_term, short_term, peak_power).
constexpr int kMaxConstraints = 16;

// The largest credible constraint_*_max_power_uw of the zone, in W; 0 when none is stated.
double stated_max_power_w(const fs::path& zone_dir) {
  double max_power_w = 0.0;
  for (int i = 0; i < kMaxConstraints; ++i) {
    const fs::path file = zone_dir / ("constraint_" + std::to_string(i) + "_max_power_uw");
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      continue;
    }
    try {
      const double power_w = static_cast<double>(sysfs::read_uint64(file)) * 1e-6;
      if (power_w < 1.0 || power_w > kRaplMaxCredibleMaxPowerW) {
        if (power_w != 0.0) {
          log().debug("RAPL: {} states {} W, not credible for a CPU zone; ignored", file.string(),
                      power_w);
        }
        continue;
      }
      max_power_w = std::max(max_power_w, power_w);
    } catch (const Error& error) {
      log().debug("RAPL: {} ignored: {}", file.string(), error.what());
    }
  }
  return max_power_w;
}

std::string seconds_text(std::int64_t time_ns) {
  return fmt::format("{:.3g} s", units::seconds_from_nanoseconds(time_ns));
}

}  // namespace

std::string rapl_permission_advice() {
  return "Since Linux 5.10, RAPL energy_uj files are readable only by root (CVE-2020-8694, "
         "\"Platypus\"). Run as root, make energy_uj readable to your user (for example a udev "
         "rule or systemd-tmpfiles rule that runs `chmod o+r` on "
         "/sys/class/powercap/intel-rapl:*/energy_uj and its sub-zones), or run the zeusd daemon "
         "that reads it on your behalf.";
}

std::uint64_t read_rapl_energy_file_uj(const fs::path& energy_path) {
  try {
    return sysfs::read_uint64(energy_path);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kNoPermission) {
      throw Error(ErrorKind::kNoPermission,
                  std::string(error.what()) + ". " + rapl_permission_advice(), ErrorSubject::kCpu);
    }
    throw Error(error.kind(), error.what(), ErrorSubject::kCpu);
  }
}

RaplZone::RaplZone(fs::path zone_dir, std::shared_ptr<const Clock> clock)
    : dir_(std::move(zone_dir)), energy_path_(dir_ / "energy_uj"), clock_(std::move(clock)) {
  const fs::path range_path = dir_ / "max_energy_range_uj";
  range_uj_ = sysfs::read_uint64(range_path);  // discovery adds the context
  if (range_uj_ == 0) {
    throw Error(ErrorKind::kIo, range_path.string() + " is 0: the counter cannot be tracked",
                ErrorSubject::kCpu);
  }
  if (range_uj_ > kRaplMaxCredibleRangeUj) {
    throw Error(ErrorKind::kIo,
                fmt::format("{} is {} µJ, more than any 32-bit RAPL counter can hold ({} µJ)",
                            range_path.string(), range_uj_, kRaplMaxCredibleRangeUj),
                ErrorSubject::kCpu);
  }
  const double stated_w = stated_max_power_w(dir_);
  max_power_stated_ = stated_w > 0.0;
  max_power_w_ = max_power_stated_ ? stated_w : kRaplUnknownMaxPowerW;
  // µJ / W = µs. Bounded in double before the conversion (a tiny power cannot overflow it).
  const double wrap_ns = static_cast<double>(range_uj_) / max_power_w_ * 1e3;
  wrap_period_ns_ = static_cast<std::int64_t>(std::clamp(wrap_ns, 1.0, 1e18));
  read_period_ns_ =
      std::clamp(wrap_period_ns_ / kRaplReadsPerWrap, kRaplMinReadPeriodNs, kRaplMaxReadPeriodNs);
  if (!trackable()) {
    log().warn(
        "RAPL zone {}: max_energy_range_uj {} µJ wraps every {} at {} W, too fast to track (the "
        "tracker reads at most every {}, {} times per wrap): wraps may go unseen and its energy "
        "is unreliable",
        dir_.string(), range_uj_, seconds_text(wrap_period_ns_), max_power_w_,
        seconds_text(kRaplMinReadPeriodNs), kRaplReadsPerWrap);
  }
  last_raw_uj_ = sysfs::read_uint64(energy_path_);  // discovery adds the advice
  total_uj_ = last_raw_uj_;
  last_read_ns_ = clock_->now_ns();
}

std::uint64_t RaplZone::read_energy_uj() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return read_locked(false);
}

void RaplZone::read_in_background(bool starting) noexcept {
  try {
    const std::lock_guard<std::mutex> lock(mutex_);
    read_locked(starting);
  } catch (const std::exception& error) {
    if (!warned_background_error_.exchange(true)) {
      log().warn("RAPL zone {} could not be read in the background (warned once): {}",
                 dir_.string(), error.what());
    }
  }
}

CounterHealth RaplZone::health() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return health_;
}

double RaplZone::plausible_energy_uj(std::int64_t elapsed_ns) const {
  const double power_w = std::max(kRaplWrapPowerFactor * max_power_w_, kRaplUnknownMaxPowerW);
  return power_w * (units::seconds_from_nanoseconds(elapsed_ns) + kRaplWrapSlackS) * 1e6;
}

std::uint64_t RaplZone::read_locked(bool starting) {
  const std::uint64_t raw_uj = read_rapl_energy_file_uj(energy_path_);
  const std::int64_t now_ns = clock_->now_ns();
  const std::int64_t elapsed_ns = std::max<std::int64_t>(0, now_ns - last_read_ns_);
  if (!starting && elapsed_ns >= wrap_period_ns_) {
    ++health_.gaps;
    if (!warned_gap_ && trackable()) {
      warned_gap_ = true;
      log().warn(
          "RAPL zone {} was not read for {}, at least as long as one wrap of its counter takes "
          "at {} W ({}): energy may have been lost (the reading thread was held up or the "
          "clock jumped; warned once, counted in the CPU's counter health)",
          dir_.string(), seconds_text(elapsed_ns), max_power_w_, seconds_text(wrap_period_ns_));
    }
  }
  if (raw_uj >= last_raw_uj_) {
    total_uj_ += raw_uj - last_raw_uj_;
  } else {
    const double plausible_uj = plausible_energy_uj(elapsed_ns);
    const bool fits = last_raw_uj_ <= range_uj_;  // else the raw value was beyond the range
    const std::uint64_t as_wrap_uj = fits ? range_uj_ - last_raw_uj_ + raw_uj : 0;
    if (fits && static_cast<double>(as_wrap_uj) <= plausible_uj) {
      total_uj_ += as_wrap_uj;
      ++health_.wraps;
    } else {
      // Not a wrap: the counter restarted (from 0) in between, so what it holds now was drawn
      // since; the energy before the restart is unknown. A raw value too large for that is not
      // counted at all: tracking continues from it.
      ++health_.resets;
      const bool counted = static_cast<double>(raw_uj) <= plausible_uj;
      if (counted) {
        total_uj_ += raw_uj;
      }
      if (!warned_reset_) {
        warned_reset_ = true;
        log().warn(
            "RAPL zone {} went back from {} to {} µJ in {}, more than it could draw in that "
            "time: taken as a counter reset, {} (warned once, counted in the CPU's counter "
            "health)",
            dir_.string(), last_raw_uj_, raw_uj, seconds_text(elapsed_ns),
            counted ? "counting the new value" : "counting nothing for the interval");
      }
    }
  }
  last_raw_uj_ = raw_uj;
  last_read_ns_ = now_ns;
  return total_uj_;
}

}  // namespace zeus::device
