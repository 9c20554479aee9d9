// `zeus report`'s inputs: detected by content, parsed, and checked with errors that name the file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

#include "commands.hpp"
#include "common/text.hpp"
#include "report.hpp"
#include "zeus/common/error.hpp"
#include "zeus/monitor/replay_monitor.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus::cli::report {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTimelineColumns[] = {"timestamp", "device", "domain", "watts"};
constexpr std::string_view kHistoryColumns[] = {
    "seed", "recurrence", "batch_size", "power_limit_w", "energy_j", "time_s", "cost"};
constexpr std::string_view kConfigurationColumns[] = {
    "batch_size", "power_limit_w", "time_s", "energy_j", "cost", "default", "oracle", "pareto"};

constexpr const char* kKinds =
    "expected a `zeus monitor --timeline` CSV (timestamp,device,domain,watts), a ZeusMonitor log "
    "CSV (start_time,window_name,elapsed_time,...), a `zeus sim --out` directory (with "
    "summary.json) or a power-limit profile JSON ({\"measurements\": [...]})";

Error bad_input(const fs::path& path, std::string_view what) {
  return Error(ErrorKind::kInvalidArgument, fmt::format("{}: {}", path.string(), what));
}

constexpr double kMaxUnixTimeS = 1e11;

// Fields are trimmed of blanks and of the quotes some writers put around every field.
void split_fields(std::string_view line, std::vector<std::string>& fields) {
  fields = text::split_to_strings(line, ',', false, " \"");
}

// A data line of a CSV file: its 1-based line number and fields.
using Row = std::pair<int, std::vector<std::string>>;

// A CSV file: its header, and its non-empty data lines with their 1-based line numbers.
struct Csv {
  fs::path path;
  std::vector<std::string> header;
  std::vector<Row> rows;  // filled by read_all

  // The index of each of `columns` in the header; an error naming the missing ones otherwise.
  template <std::size_t N>
  std::vector<std::size_t> columns(const std::string_view (&names)[N], std::string_view what,
                                   std::string_view how) const {
    std::vector<std::size_t> indices;
    std::vector<std::string_view> missing;
    for (const std::string_view name : names) {
      const auto found = std::find(header.begin(), header.end(), name);
      if (found == header.end()) {
        missing.push_back(name);
      } else {
        indices.push_back(static_cast<std::size_t>(found - header.begin()));
      }
    }
    if (!missing.empty()) {
      throw bad_input(path,
                      fmt::format("the {} lacks the column{} {}; its header must have {} "
                                  "(read \"{}\"); {}",
                                  what, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                                  fmt::join(names, ","), fmt::join(header, ","), how));
    }
    return indices;
  }

  double number(const Row& row, std::size_t column) const {
    const std::string& text = row.second.at(column);
    double value = 0.0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        !std::isfinite(value)) {
      throw bad_input(path, fmt::format("line {}: {} is not a number (\"{}\")", row.first,
                                        header.at(column), text));
    }
    return value;
  }

  // A Unix time in seconds: from 1970 to about the year 5138 (1e11 s), so that every date the page
  // prints exists; a timestamp beyond that is a corrupted row, not a measurement.
  double unix_time(const Row& row, std::size_t column) const {
    const double value = number(row, column);
    if (value < 0.0 || value >= kMaxUnixTimeS) {
      throw bad_input(
          path, fmt::format("line {}: {} {} is not a Unix time in seconds (0 to {:g})", row.first,
                            header.at(column), row.second.at(column), kMaxUnixTimeS));
    }
    return value;
  }

  int integer(const Row& row, std::size_t column) const {
    const double value = number(row, column);
    if (value != std::floor(value) || std::fabs(value) > 1e9) {
      throw bad_input(path, fmt::format("line {}: {} is not an integer (\"{}\")", row.first,
                                        header.at(column), row.second.at(column)));
    }
    return static_cast<int>(value);
  }
};

// Reads a CSV file line by line, so that a long timeline is never held as text: the header at
// construction, then the non-empty data lines.
class CsvReader {
 public:
  CsvReader(const fs::path& path, std::istream& in) : in_(in) {
    csv_.path = path;
    Row first;
    if (next_line(first)) {
      csv_.header = std::move(first.second);
    }
  }

  // The next data row, its field count checked; false at the end of the file.
  bool next(Row& row) {
    if (!next_line(row)) {
      return false;
    }
    if (row.second.size() != csv_.header.size()) {
      throw bad_input(csv_.path,
                      fmt::format("line {}: expected {} fields as in the header, found {}",
                                  row.first, csv_.header.size(), row.second.size()));
    }
    return true;
  }

  // Every remaining row, into csv().rows.
  const Csv& read_all() {
    Row row;
    while (next(row)) {
      csv_.rows.push_back(row);
    }
    return csv_;
  }

  const Csv& csv() const { return csv_; }

 private:
  bool next_line(Row& row) {
    while (std::getline(in_, line_)) {
      ++number_;
      if (!line_.empty() && line_.back() == '\r') {
        line_.pop_back();
      }
      if (line_.empty()) {
        continue;
      }
      row.first = number_;
      split_fields(line_, row.second);
      return true;
    }
    if (in_.bad()) {
      throw bad_input(csv_.path, fmt::format("reading failed after line {}", number_));
    }
    return false;
  }

  std::istream& in_;
  Csv csv_;
  std::string line_;
  int number_ = 0;
};

// `path` opened for reading after any UTF-8 byte-order mark. Only a regular file: a FIFO would
// block (and could not be read twice), a device never ends.
std::ifstream open_input(const fs::path& path) {
  try {
    text::require_regular_file(path);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, error.what());
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw bad_input(path,
                    fmt::format("cannot open it: {}", std::generic_category().message(errno)));
  }
  char start[3] = {};
  file.read(start, sizeof start);
  const std::string_view read(start, static_cast<std::size_t>(file.gcount()));
  file.clear();
  file.seekg(static_cast<std::streamoff>(read.size() - text::without_utf8_bom(read).size()));
  return file;
}

Csv read_csv(const fs::path& path) {
  std::ifstream file = open_input(path);
  CsvReader reader(path, file);
  return reader.read_all();
}

bool has_column(const Csv& csv, std::string_view name) {
  return std::find(csv.header.begin(), csv.header.end(), name) != csv.header.end();
}

// Averages `points` in equal buckets down to at most `limit` points.
// (By reference: a kept series is averaged without a copy of every sample.)
std::vector<std::pair<double, double>> downsample(
    const std::vector<std::pair<double, double>>& points, std::size_t limit) {
  if (points.size() <= limit || limit == 0) {
    return points;
  }
  std::vector<std::pair<double, double>> result;
  result.reserve(limit);
  for (std::size_t bucket = 0; bucket < limit; ++bucket) {
    const std::size_t begin = bucket * points.size() / limit;
    const std::size_t end = (bucket + 1) * points.size() / limit;
    double time = 0.0;
    double watts = 0.0;
    for (std::size_t i = begin; i < end; ++i) {
      time += points[i].first;
      watts += points[i].second;
    }
    const auto count = static_cast<double>(end - begin);
    result.emplace_back(time / count, watts / count);
  }
  return result;
}

// A ZeusMonitor log, read by the one reader of that format (monitor::ReplayMonitor), so that
// `zeus report` and a replay accept exactly the same files.
std::vector<Window> read_windows(const fs::path& path) {
  std::optional<monitor::ReplayMonitor> log;
  try {
    log.emplace(path, /*match_window_name=*/false);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, error.what());  // a bad input, whatever went wrong
  }
  std::vector<Window> windows;
  for (const monitor::ReplayRow& row : log->rows()) {
    Window window;
    window.name = row.window_name;
    window.start_s = row.start_time_s;
    window.elapsed_s = row.elapsed_time_s;
    for (std::size_t i = 0; i < row.gpu_energy_j.size(); ++i) {
      window.energy_j.emplace_back(fmt::format("gpu{}_energy", log->gpu_indices().at(i)),
                                   row.gpu_energy_j[i]);
    }
    windows.push_back(std::move(window));
  }
  return windows;
}

Timeline parse_timeline(CsvReader& reader, bool keep_power_samples) {
  const Csv& csv = reader.csv();
  const auto columns = csv.columns(kTimelineColumns, "power timeline",
                                   "it is the file that `zeus monitor --timeline` writes");
  Timeline timeline;
  timeline.path = csv.path;
  timeline.start_s = std::numeric_limits<double>::infinity();
  timeline.end_s = -std::numeric_limits<double>::infinity();
  // Since temperature rows were added, a fifth column: celsius (empty on the power rows).
  // (An index, not an optional: GCC 12 -O3 warns falsely of an uninitialised optional here.)
  constexpr std::size_t kNoColumn = std::numeric_limits<std::size_t>::max();
  const auto celsius_at = std::find(csv.header.begin(), csv.header.end(), "celsius");
  const std::size_t celsius_column =
      celsius_at == csv.header.end() ? kNoColumn
                                     : static_cast<std::size_t>(celsius_at - csv.header.begin());
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::map<std::string, std::size_t> temperature_index;
  Row row;
  while (reader.next(row)) {
    const double time = csv.unix_time(row, columns[0]);
    const std::string& device = row.second.at(columns[1]);
    const std::string& domain = row.second.at(columns[2]);
    if (domain == "temperature") {
      if (celsius_column == kNoColumn) {
        throw bad_input(csv.path, fmt::format("line {}: a temperature row, but the header has no "
                                              "celsius column (timestamp,device,domain,watts,"
                                              "celsius)",
                                              row.first));
      }
      const double celsius = csv.number(row, celsius_column);
      if (celsius < -273.15 || celsius > 1000.0) {
        throw bad_input(csv.path, fmt::format("line {}: celsius {} is not a GPU temperature",
                                              row.first, row.second.at(celsius_column)));
      }
      const auto [found, inserted] =
          temperature_index.try_emplace(device, timeline.temperatures.size());
      if (inserted) {
        timeline.temperatures.push_back(PowerSeries{device, domain, {}, 0, {}});
      }
      timeline.temperatures[found->second].points.emplace_back(time, celsius);
    } else {
      const double watts = csv.number(row, columns[3]);
      const auto [found, inserted] = index.try_emplace({device, domain}, timeline.series.size());
      if (inserted) {
        timeline.series.push_back(PowerSeries{device, domain, {}, 0, {}});
      }
      timeline.series[found->second].points.emplace_back(time, watts);
    }
    timeline.start_s = std::min(timeline.start_s, time);
    timeline.end_s = std::max(timeline.end_s, time);
  }
  if (timeline.series.empty()) {
    throw bad_input(csv.path,
                    "the power timeline is empty (no samples after the header); measure for longer "
                    "than one sampling period, or pass a shorter --interval to zeus monitor");
  }
  for (std::vector<PowerSeries>* kind : {&timeline.series, &timeline.temperatures}) {
    for (PowerSeries& series : *kind) {
      std::stable_sort(series.points.begin(), series.points.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      series.samples = series.points.size();
      if (keep_power_samples && kind == &timeline.series) {
        // Kept whole, and a copy only of what the chart needs (no second copy of every sample).
        series.all_points = std::move(series.points);
        series.points = downsample(series.all_points, kMaxSeriesPoints);
      } else if (series.points.size() > kMaxSeriesPoints) {
        series.points = downsample(series.points, kMaxSeriesPoints);
      }
    }
  }
  // `zeus monitor --timeline T` records its window in T.windows.csv.
  fs::path windows_path = csv.path;
  windows_path += ".windows.csv";
  std::error_code error;
  if (fs::is_regular_file(windows_path, error)) {
    timeline.windows = read_windows(windows_path);
    timeline.windows_path = windows_path;
  }
  return timeline;
}

// The (batch size, power limit) chosen most often, over seeds, at each seed's last recurrence.
std::vector<HistoryRow> read_history(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    throw bad_input(path.parent_path(),
                    fmt::format("summary.json lists a cell whose history {} is missing; rerun "
                                "`zeus sim --out {}`",
                                path.filename().string(), path.parent_path().string()));
  }
  const Csv csv = read_csv(path);
  const auto columns = csv.columns(kHistoryColumns, "simulation history",
                                   "it is a <workload>_<gpu>_<policy>.csv of `zeus sim --out`");
  if (csv.rows.empty()) {
    throw bad_input(path, "the simulation history has no recurrence");
  }
  std::vector<HistoryRow> rows;
  for (const auto& row : csv.rows) {
    HistoryRow history;
    history.seed = static_cast<std::uint64_t>(csv.integer(row, columns[0]));
    history.recurrence = csv.integer(row, columns[1]);
    history.batch_size = csv.integer(row, columns[2]);
    history.power_limit_w = csv.integer(row, columns[3]);
    history.energy_j = csv.number(row, columns[4]);
    history.time_s = csv.number(row, columns[5]);
    history.cost = csv.number(row, columns[6]);
    rows.push_back(history);
  }
  return rows;
}

std::vector<Configuration> read_configurations(const fs::path& path) {
  const Csv csv = read_csv(path);
  const auto columns =
      csv.columns(kConfigurationColumns, "configuration table",
                  "it is a configurations_<workload>_<gpu>.csv of `zeus sim --out`");
  std::vector<Configuration> configurations;
  for (const auto& row : csv.rows) {
    Configuration c;
    c.batch_size = csv.integer(row, columns[0]);
    c.power_limit_w = csv.integer(row, columns[1]);
    c.time_s = csv.number(row, columns[2]);
    c.energy_j = csv.number(row, columns[3]);
    c.cost = csv.number(row, columns[4]);
    c.is_default = csv.integer(row, columns[5]) != 0;
    c.is_oracle = csv.integer(row, columns[6]) != 0;
    c.is_pareto = csv.integer(row, columns[7]) != 0;
    configurations.push_back(c);
  }
  if (configurations.empty()) {
    throw bad_input(path, "the configuration table has no configuration");
  }
  return configurations;
}

template <typename T>
T json_value(const nlohmann::json& object, const char* key, const fs::path& path) {
  const auto found = object.find(key);
  if (found == object.end()) {
    throw bad_input(path, fmt::format("\"{}\" is missing; is it the summary.json of `zeus sim "
                                      "--out`?",
                                      key));
  }
  try {
    return found->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw bad_input(path, fmt::format("\"{}\" has the wrong type", key));
  }
}

SimResults read_simulation(const fs::path& dir) {
  const fs::path summary_path = dir / "summary.json";
  std::error_code error;
  if (!fs::is_regular_file(summary_path, error)) {
    throw bad_input(dir, fmt::format("a directory without summary.json; {}", kKinds));
  }
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(text::read_file(summary_path));
  } catch (const nlohmann::json::parse_error& parse_error) {
    throw bad_input(summary_path,
                    fmt::format("not valid JSON: {}", text::json_error_text(parse_error.what())));
  }
  if (!summary.is_object()) {
    throw bad_input(summary_path, "expected a JSON object, as `zeus sim --out` writes");
  }
  SimResults results;
  results.dir = dir;
  results.eta = json_value<double>(summary, "eta", summary_path);
  const auto cells = json_value<nlohmann::json>(summary, "cells", summary_path);
  if (!cells.is_array()) {
    throw bad_input(summary_path, "\"cells\" must be an array");
  }
  for (const nlohmann::json& cell : cells) {
    const auto workload = json_value<std::string>(cell, "workload", summary_path);
    const auto gpu = json_value<std::string>(cell, "gpu", summary_path);
    const auto policy = json_value<std::string>(cell, "policy", summary_path);
    if (cell.contains("error")) {
      results.failed_cells.push_back(
          fmt::format("{}/{}/{}: {}", workload, gpu, policy,
                      cell["error"].is_string() ? cell["error"].get<std::string>() : "failed"));
      continue;
    }
    auto group = std::find_if(results.groups.begin(), results.groups.end(), [&](const auto& g) {
      return g.workload == workload && g.gpu == gpu;
    });
    if (group == results.groups.end()) {
      SimGroup fresh;
      fresh.workload = workload;
      fresh.gpu = gpu;
      fresh.oracle_cost = json_value<double>(cell, "oracle_expected_cost", summary_path);
      fresh.oracle_batch_size = json_value<int>(cell, "oracle_batch_size", summary_path);
      fresh.oracle_power_limit_w = json_value<int>(cell, "oracle_power_limit_w", summary_path);
      const fs::path configurations = dir / fmt::format("configurations_{}_{}.csv", workload, gpu);
      if (fs::is_regular_file(configurations, error)) {
        fresh.configurations = read_configurations(configurations);
        fresh.configurations_path = configurations;
      }
      results.groups.push_back(std::move(fresh));
      group = std::prev(results.groups.end());
    }
    const fs::path history = dir / fmt::format("{}_{}_{}.csv", workload, gpu, policy);
    group->policies.push_back(PolicyHistory{policy, history, read_history(history)});
  }
  if (results.groups.empty()) {
    throw bad_input(dir, results.failed_cells.empty()
                             ? "summary.json lists no simulated cell: the directory has no "
                               "results; run `zeus sim --out DIR` first"
                             : fmt::format("no cell of the simulation succeeded ({}), so there "
                                           "is nothing to plot",
                                           fmt::join(results.failed_cells, "; ")));
  }
  return results;
}

Profile read_profile(const fs::path& path, const optimizer::OptimumSelector& selector) {
  runtime::PowerLimitProfile loaded;
  try {
    loaded = runtime::load_power_limit_profile(path);
  } catch (const Error& load_error) {
    const std::string message = load_error.what();
    // The loader's messages name the file already; keep them, as usage errors.
    throw Error(ErrorKind::kInvalidArgument, message.find(path.string()) == std::string::npos
                                                 ? fmt::format("{}: {}", path.string(), message)
                                                 : message);
  }
  Profile profile;
  profile.path = path;
  for (const auto& m : loaded.measurements) {
    profile.points.push_back(ProfilePoint{m.power_limit_w, m.energy_j, m.time_s});
  }
  std::sort(profile.points.begin(), profile.points.end(),
            [](const auto& a, const auto& b) { return a.power_limit_w < b.power_limit_w; });
  profile.chosen_w = selector.select(loaded.measurements);
  profile.selector = selector.describe();
  return profile;
}

void read_one(const fs::path& path, const optimizer::OptimumSelector& selector,
              const ReadOptions& options, Inputs& inputs) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) {
    throw bad_input(path, "no such file or directory");
  }
  if (fs::is_directory(status)) {
    inputs.simulations.push_back(read_simulation(path));
    return;
  }
  std::ifstream file = open_input(path);
  const std::streampos start = file.tellg();  // after a byte-order mark
  file >> std::ws;
  const int first = file.peek();
  if (first == std::ifstream::traits_type::eof()) {
    throw bad_input(path, fmt::format("the file is empty; {}", kKinds));
  }
  file.seekg(start);
  if (first == '{' || first == '[') {
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(file);
    } catch (const nlohmann::json::parse_error& parse_error) {
      throw bad_input(path, fmt::format("not valid JSON ({}); {}",
                                        text::json_error_text(parse_error.what()), kKinds));
    }
    if (json.is_object() && json.contains("measurements")) {
      inputs.profiles.push_back(read_profile(path, selector));
      return;
    }
    if (json.is_object() && json.contains("cells") && path.filename() == "summary.json") {
      inputs.simulations.push_back(read_simulation(path.parent_path()));
      return;
    }
    throw bad_input(path, fmt::format("a JSON file without \"measurements\"; {}", kKinds));
  }
  CsvReader reader(path, file);
  const Csv& csv = reader.csv();
  if (has_column(csv, "timestamp") || has_column(csv, "watts")) {
    inputs.timelines.push_back(parse_timeline(reader, options.keep_power_samples));
    return;
  }
  if (has_column(csv, "start_time") || has_column(csv, "window_name")) {
    WindowLog log{path, read_windows(path)};
    if (log.windows.empty()) {
      throw bad_input(path, "the ZeusMonitor log has no window (a header and no rows)");
    }
    inputs.window_logs.push_back(std::move(log));
    return;
  }
  throw bad_input(path, fmt::format("unrecognised content (first line \"{}\"); {}",
                                    fmt::join(csv.header, ","), kKinds));
}

fs::path canonical_or_same(const fs::path& path) {
  std::error_code error;
  fs::path canonical = fs::weakly_canonical(path, error);
  return error ? path : canonical;
}

}  // namespace

Inputs read_inputs(const std::vector<std::string>& paths,
                   const optimizer::OptimumSelector& selector, ReadOptions options) {
  Inputs inputs;
  std::set<fs::path> sibling_windows;
  for (const std::string& path : paths) {
    read_one(fs::path(path), selector, options, inputs);
  }
  // A timeline's own windows file, named as an input too, is not shown twice.
  for (const Timeline& timeline : inputs.timelines) {
    if (!timeline.windows_path.empty()) {
      sibling_windows.insert(canonical_or_same(timeline.windows_path));
    }
  }
  std::erase_if(inputs.window_logs, [&](const WindowLog& log) {
    return sibling_windows.count(canonical_or_same(log.path)) != 0;
  });
  return inputs;
}

}  // namespace zeus::cli::report
