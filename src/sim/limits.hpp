// The bounds on every number the simulator takes from a file (trace rows, job arrivals) or from a
// user (recurrences, seeds, tries, window, threads). One place, so that the readers, the engine
// and the CLI refuse the same values, and the documentation (docs/simulator.md, "Input bounds")
// has one list to mirror.
//
// Why these bounds: each one is orders of magnitude beyond any real trace or run, and together
// they keep every product the engine forms finite. The largest is a cell's total energy:
//   time_per_epoch (1e9 s) x average_power (1e5 W) x epochs (1e6) x runtime_ratio (1e6)
//   x tries (1e6) x recurrences (1e7) = 1e39 J, and cost adds MaxPower (1e5 W) x time, far below
// the ~1.8e308 where a double overflows. The counts bound memory: a cell keeps every seed's
// history (one RecurrenceRecord, 48 bytes, per recurrence) until it is written.
#pragma once

#include <cstddef>

namespace zeus::sim::limits {

// ---- Trace rows (summary_train.csv, summary_power_<gpu>.csv) ----
inline constexpr int kMaxBatchSize = 10'000'000;
inline constexpr int kMaxTargetEpoch = 1'000'000;
inline constexpr int kMaxPowerLimitW = 100'000;
// Below these an epoch's energy (time x power) could round to zero and every cost with it.
inline constexpr double kMinTimePerEpochS = 1e-6;
inline constexpr double kMaxTimePerEpochS = 1e9;  // about 32 years
inline constexpr double kMinAveragePowerW = 1e-3;
inline constexpr double kMaxAveragePowerW = 100'000.0;
// The learning rate is not used by the simulation, but a value that is not a number betrays a
// corrupted row.
inline constexpr double kMaxLearningRate = 1e6;

// ---- Job arrivals (--arrivals) ----
inline constexpr double kMaxArrivalTimeS = 1e12;  // about 31,700 years
inline constexpr double kMaxRuntimeRatio = 1e6;
inline constexpr std::size_t kMaxArrivals = 10'000'000;

// ---- Counts ----
inline constexpr int kMaxRecurrences = 10'000'000;
inline constexpr std::size_t kMaxSeeds = 100'000;
// Seeds x recurrences of one cell: the histories it keeps, about 48 bytes each (2.4 GB at most).
inline constexpr std::size_t kMaxRecordsPerCell = 50'000'000;
inline constexpr int kMaxTries = 1'000'000;
inline constexpr int kMaxWindow = 10'000'000;
inline constexpr int kMaxThreads = 1024;

}  // namespace zeus::sim::limits
