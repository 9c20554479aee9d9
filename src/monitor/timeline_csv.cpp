#include "monitor/timeline_csv.hpp"

#include <fmt/format.h>

#include <chrono>
#include <iterator>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus::monitor::timeline_csv {
namespace {

constexpr std::string_view kColumns[] = {"timestamp", "device", "domain", "watts"};

std::int64_t now_unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::filesystem::path windows_path(const std::filesystem::path& timeline) {
  std::filesystem::path path = timeline;
  path += ".windows.csv";
  return path;
}

// ---- Writer

Writer::Writer(OutputFile file, std::int64_t steady_start_ns,
               std::optional<std::int64_t> wall_start_us)
    : file_(std::move(file)),
      steady_start_ns_(steady_start_ns),
      wall_start_us_(wall_start_us.value_or(now_unix_us())) {
  // celsius: only on the temperature rows (domain "temperature", watts empty).
  file_.stream() << "timestamp,device,domain,watts,celsius\n";
}

void Writer::write(const std::vector<PowerSample>& sweep) noexcept {
  write_rows(sweep, [](std::string& out, const PowerSample& sample) {
    fmt::format_to(std::back_inserter(out), "gpu{},{},{:.3f},\n", sample.gpu_index,
                   power_domain_name(sample.domain), sample.power_w);
  });
}

void Writer::write(const std::vector<TemperatureSample>& changes) noexcept {
  write_rows(changes, [](std::string& out, const TemperatureSample& sample) {
    fmt::format_to(std::back_inserter(out), "gpu{},{},,{}\n", sample.gpu_index, kTemperatureDomain,
                   sample.temperature_c);
  });
}

bool Writer::finish() {
  try {
    file_.commit();
  } catch (const Error&) {
    return false;
  }
  return !failed_;
}

template <typename Sample, typename Rest>
void Writer::write_rows(const std::vector<Sample>& samples, Rest rest) noexcept {
  try {
    buffer_.clear();
    for (const Sample& sample : samples) {
      const std::int64_t wall_us =
          wall_start_us_ + units::microseconds_from_nanoseconds(sample.time_ns - steady_start_ns_);
      fmt::format_to(std::back_inserter(buffer_), "{}.{:06},", wall_us / 1'000'000,
                     wall_us % 1'000'000);
      rest(buffer_, sample);
    }
    file_.stream().write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  } catch (...) {
    failed_ = true;
  }
}

// ---- Reader

bool Reader::recognises(const csv::Table& table) {
  return table.has_column("timestamp") || table.has_column("watts");
}

Reader::Reader(csv::Table table)
    : table_(std::move(table)),
      columns_(table_.columns(kColumns, "power timeline",
                              "it is the file that `zeus monitor --timeline` writes")),
      celsius_column_(table_.find_column("celsius").value_or(kNoColumn)) {}

Reader::Reader(const std::filesystem::path& path)
    : Reader(csv::Table(csv::LineReader(path, "power timeline", kDialect))) {}

bool Reader::next(Row& row) {
  if (!table_.next(fields_)) {
    return false;
  }
  row.line = fields_.line;
  row.unix_s = table_.number(fields_, columns_[0]);
  if (row.unix_s < 0.0 || row.unix_s >= csv::kMaxUnixTimeS) {
    table_.fail(row.line, fmt::format("{} {} is not a Unix time in seconds (0 to {:g})",
                                      table_.header().at(columns_[0]),
                                      fields_.fields.at(columns_[0]), csv::kMaxUnixTimeS));
  }
  row.device = fields_.fields.at(columns_[1]);
  row.domain = fields_.fields.at(columns_[2]);
  row.watts = 0.0;
  row.celsius = 0.0;
  if (row.is_temperature()) {
    if (celsius_column_ == kNoColumn) {
      table_.fail(row.line,
                  "a temperature row, but the header has no celsius column "
                  "(timestamp,device,domain,watts,celsius)");
    }
    row.celsius = table_.number(fields_, celsius_column_);
    if (row.celsius < -273.15 || row.celsius > 1000.0) {
      table_.fail(row.line, fmt::format("celsius {} is not a GPU temperature",
                                        fields_.fields.at(celsius_column_)));
    }
  } else {
    row.watts = table_.number(fields_, columns_[3]);
  }
  return true;
}

}  // namespace zeus::monitor::timeline_csv
