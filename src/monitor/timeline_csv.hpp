// The power timeline of `zeus monitor --timeline FILE`: the sampled power of each monitored GPU,
// one row per GPU, domain and sweep, and one row per GPU whose temperature changed:
//
//   timestamp,device,domain,watts,celsius
//   1700000000.123456,gpu0,device_instant,251.250,
//   1700000000.123456,gpu0,temperature,,54
//
// timestamp: Unix seconds with microseconds; watts with three decimals on the power rows (domain
// as power_domain_name() names it), celsius (whole degrees) only on the temperature rows. Files
// written before temperature rows were added have the four columns timestamp,device,domain,watts;
// the reader takes both, and any column order. `zeus report` reads it
// (cli/report/report_inputs.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/csv.hpp"
#include "common/output_file.hpp"
#include "zeus/monitor/power_sampler.hpp"

namespace zeus::monitor::timeline_csv {

// The domain of the temperature rows.
inline constexpr std::string_view kTemperatureDomain = "temperature";

// Where `zeus monitor --timeline FILE` records its measured window, in the window log format
// (monitor/window_log.hpp): FILE.windows.csv, which `zeus report FILE` looks for.
std::filesystem::path windows_path(const std::filesystem::path& timeline);

// Streams sweeps to a file as they come (nothing is kept in memory).
class Writer {
 public:
  // Writes the header. A sample taken at `steady_start_ns` (on the sampler's clock) is stamped
  // `wall_start_us` (Unix microseconds; by default the time now), later ones as much later.
  Writer(OutputFile file, std::int64_t steady_start_ns,
         std::optional<std::int64_t> wall_start_us = std::nullopt);

  // One power row per sample. Called on the sampler thread; never throws.
  void write(const std::vector<PowerSample>& sweep) noexcept;
  // One temperature row per change. The sampler thread, never throws; the same sweep's power
  // rows come first (the sampler calls on_sweep before on_temperature_change).
  void write(const std::vector<TemperatureSample>& changes) noexcept;

  // Flushes; false when any write failed.
  bool finish();

 private:
  // One row per sample: the timestamp, then what `rest` writes.
  template <typename Sample, typename Rest>
  void write_rows(const std::vector<Sample>& samples, Rest rest) noexcept;

  OutputFile file_;
  std::int64_t steady_start_ns_;
  std::int64_t wall_start_us_;
  std::string buffer_;
  bool failed_ = false;
};

// One row as read.
struct Row {
  int line = 0;             // 1-based
  double unix_s = 0.0;      // timestamp
  std::string_view device;  // "gpu0"
  std::string_view domain;  // "device_instant", ..., or kTemperatureDomain
  double watts = 0.0;       // power rows
  double celsius = 0.0;     // temperature rows
  bool is_temperature() const { return domain == kTemperatureDomain; }
};

// Reads the rows of a timeline one at a time. Every error is Error(kInvalidArgument) "<path>:
// ..." naming the line (csv::Table's).
class Reader {
 public:
  // The dialect the file is read in: fields trimmed of blanks and quotes, as for every input of
  // `zeus report`.
  static constexpr csv::Dialect kDialect = csv::kQuotesTrimmed;

  // Whether a CSV header is a timeline's (it names timestamp or watts), to tell it from other
  // files.
  static bool recognises(const csv::Table& table);

  // Over a table whose header was read (in kDialect); fails unless it has the columns
  // timestamp,device,domain,watts.
  explicit Reader(csv::Table table);
  // Opens `path` (a regular file; a byte-order mark skipped).
  explicit Reader(const std::filesystem::path& path);

  const std::string& name() const { return table_.name(); }

  // The next row, checked: a timestamp that is a Unix time (0 to csv::kMaxUnixTimeS), watts on
  // a power row, celsius a temperature (-273.15 to 1000) on a temperature row; false at the end.
  // The views stay valid until the next call.
  bool next(Row& row);

  // Throws Error(kInvalidArgument) "<path>: <what>".
  [[noreturn]] void fail(const std::string& what) const { table_.fail(what); }

 private:
  static constexpr std::size_t kNoColumn = static_cast<std::size_t>(-1);

  csv::Table table_;
  std::vector<std::size_t> columns_;  // timestamp, device, domain, watts
  // Since temperature rows were added, a fifth column: celsius (empty on the power rows).
  // (An index, not an optional: GCC 12 -O3 warns falsely of an uninitialised optional here.)
  std::size_t celsius_column_ = kNoColumn;
  csv::Table::Row fields_;
};

}  // namespace zeus::monitor::timeline_csv
