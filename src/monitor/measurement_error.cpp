#include "zeus/monitor/measurement_error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"
#include "zeus/device/sensor_gpu.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::monitor {

device::SensorParameters conservative_sensor_parameters() {
  device::SensorParameters sensor;
  sensor.counter_refresh_s = 0.100;
  sensor.counter_resolution_mj = 1.0;
  sensor.source =
      "conservative default for an uncharacterised model: 100 ms refresh, the upper end of the "
      "20-100 ms observed (Yang, Adamek and Armour, SC'24); 1 mJ steps (NVML's unit)";
  return sensor;
}

device::SensorParameters default_sensor_parameters(device::Gpu& gpu) {
  if (auto* sensor = dynamic_cast<device::SensorGpu*>(&gpu)) {
    return sensor->parameters();  // the sensor-faithful simulated GPU reads like its model
  }
  if (gpu.backend() == device::GpuBackend::kSimulated) {
    device::SensorParameters ideal;
    ideal.source = "the simulated GPU: an ideal sensor (its exact integral, in whole millijoules)";
    return ideal;
  }
  try {
    if (auto published = device::published_sensor_parameters(gpu.name())) {
      return *published;
    }
  } catch (const std::exception&) {  // a name that cannot be read: the conservative default
  }
  return conservative_sensor_parameters();
}

double peak_power_w(device::Gpu& gpu) {
  try {
    const std::uint32_t max_mw = gpu.power_limit_constraints_mw().max_mw;
    if (max_mw > 0) {
      return units::watts_from_milliwatts(max_mw);
    }
  } catch (const std::exception&) {  // not supported here: the enforced limit, then the default
  }
  try {
    const std::uint32_t enforced_mw = gpu.enforced_power_limit_mw();
    if (enforced_mw > 0) {
      return units::watts_from_milliwatts(enforced_mw);
    }
  } catch (const std::exception&) {
  }
  return kUnknownPeakPowerW;
}

GpuErrorBound counter_error_bound(const device::SensorParameters& sensor, double peak_power_w) {
  const double lag_s =
      std::max(0.0, sensor.counter_refresh_s) + std::max(0.0, sensor.reading_delay_s);
  return {.fixed_j = lag_s * peak_power_w +
                     units::joules_from_millijoules(std::max(0.0, sensor.counter_resolution_mj)),
          .per_second_j = 0.0};
}

GpuErrorBound polled_error_bound(double peak_power_w) {
  return {.fixed_j = 0.0, .per_second_j = peak_power_w};
}

const char* trust_name(CounterPowerCheck::Trust trust) {
  return trust == CounterPowerCheck::Trust::kCounter ? "counter" : "power";
}

namespace {

// Which reading to trust, and why, once both energies are known.
void judge(const CrossCheckedGpu& gpu, CounterPowerCheck& check) {
  const double counter_j = check.counter_energy_j;
  const double power_j = check.power_energy_j;
  const double larger = std::max(std::abs(counter_j), std::abs(power_j));
  check.difference = larger > 0.0 ? std::abs(counter_j - power_j) / larger : 0.0;
  check.disagrees = check.difference > kCrossCheckTolerance;
  const double bound_j = gpu.bound.at(check.duration_s);
  const double mean_power_w = check.duration_s > 0.0 ? power_j / check.duration_s : 0.0;
  check.trust = CounterPowerCheck::Trust::kPower;
  if (counter_j < 0.0) {
    check.reason =
        fmt::format("the energy counter went backwards (by {:.3f} J) without wrapping", -counter_j);
  } else if (check.duration_s > 0.0 && counter_j > gpu.peak_power_w * check.duration_s + bound_j) {
    check.reason = fmt::format(
        "the energy counter advanced at {:.1f} W, above the most this GPU can draw ({:.1f} W)",
        counter_j / check.duration_s, gpu.peak_power_w);
  } else if (counter_j == 0.0 && power_j > bound_j) {
    check.reason = fmt::format(
        "the energy counter did not advance in {:.3f} s while the power reading averaged {:.1f} "
        "W: the counter is stuck, or this driver does not update it",
        check.duration_s, mean_power_w);
  } else {
    check.trust = CounterPowerCheck::Trust::kCounter;
    if (!check.disagrees) {
      check.reason =
          fmt::format("counter and power agree within {:.0f}%", kCrossCheckTolerance * 100.0);
    } else {
      check.reason = fmt::format(
          "the counter sums every power sample the GPU takes, while polling saw {} instants of "
          "power: a load that changes faster than the polling period, or a power reading that "
          "averages or lags the draw, misleads polling, not the counter",
          check.power_samples);
      if (std::abs(counter_j - power_j) <= bound_j) {
        check.reason += fmt::format(
            "; the difference ({:.3f} J) is within the counter's error bound (±{:.3f} J) over so "
            "short a check: check for longer",
            std::abs(counter_j - power_j), bound_j);
      }
    }
  }
}

}  // namespace

std::vector<CounterPowerCheck> cross_check_counter_and_power(
    const std::vector<CrossCheckedGpu>& gpus, const Clock& clock,
    const CrossCheckOptions& options) {
  if (!std::isfinite(options.duration_s) || options.duration_s <= 0.0 ||
      !std::isfinite(options.poll_period_s) || options.poll_period_s < kMinSamplingPeriodS ||
      options.poll_period_s > options.duration_s) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("a counter-against-power check needs a duration > 0 and a polling "
                            "period from {} s to the duration; got {} s and {} s",
                            kMinSamplingPeriodS, options.duration_s, options.poll_period_s));
  }
  const std::size_t count = gpus.size();
  std::vector<CounterPowerCheck> checks(count);
  std::vector<std::uint64_t> start_mj(count);
  std::vector<double> last_w(count);
  const std::int64_t duration_ns = units::nanoseconds_from_seconds(options.duration_s);
  const std::int64_t poll_ns =
      std::max<std::int64_t>(1, units::nanoseconds_from_seconds(options.poll_period_s));

  const std::int64_t start_ns = clock.now_ns();
  for (std::size_t i = 0; i < count; ++i) {
    start_mj[i] = gpus[i].gpu->total_energy_mj();
  }
  // The power held from the start to the first reading, trapezoids between readings, and the
  // last reading held to the end.
  std::int64_t previous_ns = clock.now_ns();
  for (std::size_t i = 0; i < count; ++i) {
    last_w[i] = units::watts_from_milliwatts(gpus[i].gpu->instant_power_mw());
    checks[i].power_energy_j = last_w[i] * units::seconds_from_nanoseconds(previous_ns - start_ns);
    checks[i].power_samples = 1;
  }
  for (std::int64_t elapsed_ns = previous_ns - start_ns; elapsed_ns < duration_ns;) {
    clock.sleep_for_ns(std::min(poll_ns, duration_ns - elapsed_ns));
    const std::int64_t now_ns = clock.now_ns();
    const double step_s = units::seconds_from_nanoseconds(now_ns - previous_ns);
    for (std::size_t i = 0; i < count; ++i) {
      const double watts = units::watts_from_milliwatts(gpus[i].gpu->instant_power_mw());
      checks[i].power_energy_j += (last_w[i] + watts) / 2.0 * step_s;
      last_w[i] = watts;
      ++checks[i].power_samples;
    }
    previous_ns = now_ns;
    elapsed_ns = now_ns - start_ns;
  }
  std::vector<std::uint64_t> end_mj(count);
  for (std::size_t i = 0; i < count; ++i) {
    end_mj[i] = gpus[i].gpu->total_energy_mj();
  }
  const std::int64_t end_ns = clock.now_ns();
  for (std::size_t i = 0; i < count; ++i) {
    CounterPowerCheck& check = checks[i];
    check.gpu_index = gpus[i].index;
    check.duration_s = units::seconds_from_nanoseconds(end_ns - start_ns);
    check.power_energy_j += last_w[i] * units::seconds_from_nanoseconds(end_ns - previous_ns);
    check.counter_energy_j = units::joules_from_millijoules(static_cast<double>(end_mj[i]) -
                                                            static_cast<double>(start_mj[i]));
    judge(gpus[i], check);
  }
  return checks;
}

}  // namespace zeus::monitor
