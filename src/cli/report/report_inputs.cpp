// `zeus report`'s inputs: detected by content, parsed, and checked with errors that name the file.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>

#include "cli/commands.hpp"
#include "cli/report/report_model.hpp"
#include "common/csv.hpp"
#include "common/text.hpp"
#include "monitor/timeline_csv.hpp"
#include "monitor/window_log.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus::cli::report {
namespace {

namespace fs = std::filesystem;

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

// A CSV input streamed from `in` (positioned after any byte-order mark), its header read. Every
// input of the report is read in the timeline's dialect: fields trimmed of blanks and quotes.
csv::Table open_table(const fs::path& path, std::istream& in) {
  return csv::Table(csv::LineReader(path.string(), in, monitor::timeline_csv::Reader::kDialect));
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

// A ZeusMonitor log, read by the one reader of that format (monitor/window_log.hpp, ReplayMonitor's
// too), so that `zeus report` and a replay accept exactly the same files.
std::vector<Window> read_windows(const fs::path& path) {
  monitor::window_log::Log log;
  try {
    log = monitor::window_log::read(path);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, error.what());  // a bad input, whatever went wrong
  }
  std::vector<Window> windows;
  for (const monitor::ReplayRow& row : log.rows) {
    Window window;
    window.name = row.window_name;
    window.start_s = row.start_time_s;
    window.elapsed_s = row.elapsed_time_s;
    for (std::size_t i = 0; i < row.gpu_energy_j.size(); ++i) {
      window.energy_j.emplace_back(fmt::format("gpu{}_energy", log.gpu_indices.at(i)),
                                   row.gpu_energy_j[i]);
    }
    windows.push_back(std::move(window));
  }
  return windows;
}

// A timeline read by the one reader of that format (monitor/timeline_csv.hpp), its samples
// gathered into series.
Timeline parse_timeline(monitor::timeline_csv::Reader& reader, bool keep_power_samples) {
  Timeline timeline;
  timeline.path = reader.name();
  timeline.start_s = std::numeric_limits<double>::infinity();
  timeline.end_s = -std::numeric_limits<double>::infinity();
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::map<std::string, std::size_t> temperature_index;
  monitor::timeline_csv::Row row;
  while (reader.next(row)) {
    std::string device(row.device);
    std::string domain(row.domain);
    if (row.is_temperature()) {
      const auto [found, inserted] =
          temperature_index.try_emplace(device, timeline.temperatures.size());
      if (inserted) {
        timeline.temperatures.push_back(PowerSeries{device, domain, {}, 0, {}});
      }
      timeline.temperatures[found->second].points.emplace_back(row.unix_s, row.celsius);
    } else {
      const auto [found, inserted] = index.try_emplace({device, domain}, timeline.series.size());
      if (inserted) {
        timeline.series.push_back(PowerSeries{device, domain, {}, 0, {}});
      }
      timeline.series[found->second].points.emplace_back(row.unix_s, row.watts);
    }
    timeline.start_s = std::min(timeline.start_s, row.unix_s);
    timeline.end_s = std::max(timeline.end_s, row.unix_s);
  }
  if (timeline.series.empty()) {
    reader.fail(
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
  const fs::path windows_path = monitor::timeline_csv::windows_path(timeline.path);
  std::error_code error;
  if (fs::is_regular_file(windows_path, error)) {
    timeline.windows = read_windows(windows_path);
    timeline.windows_path = windows_path;
  }
  return timeline;
}

// A CSV file of `zeus sim --out`, opened as every input is (open_input), its header read.
struct CsvFile {
  explicit CsvFile(const fs::path& path) : file(open_input(path)), table(open_table(path, file)) {}
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;

  std::ifstream file;
  csv::Table table;  // reads `file`
};

// The (batch size, power limit) chosen most often, over seeds, at each seed's last recurrence.
std::vector<HistoryRow> read_history(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    throw bad_input(path.parent_path(),
                    fmt::format("summary.json lists a cell whose history {} is missing; rerun "
                                "`zeus sim --out {}`",
                                path.filename().string(), path.parent_path().string()));
  }
  CsvFile file(path);
  const csv::Table& csv = file.table;
  const std::vector<csv::Table::Row> csv_rows = file.table.read_all();
  const auto columns = csv.columns(kHistoryColumns, "simulation history",
                                   "it is a <workload>_<gpu>_<policy>.csv of `zeus sim --out`");
  if (csv_rows.empty()) {
    throw bad_input(path, "the simulation history has no recurrence");
  }
  std::vector<HistoryRow> rows;
  for (const auto& row : csv_rows) {
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
  CsvFile file(path);
  const csv::Table& csv = file.table;
  const std::vector<csv::Table::Row> csv_rows = file.table.read_all();
  const auto columns =
      csv.columns(kConfigurationColumns, "configuration table",
                  "it is a configurations_<workload>_<gpu>.csv of `zeus sim --out`");
  std::vector<Configuration> configurations;
  for (const auto& row : csv_rows) {
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
  if constexpr (std::is_integral_v<T>) {
    // A whole number that fits: nlohmann's get<int> of 6e33 (or of an int64 past int's range) is
    // undefined behaviour, not an error.
    const bool whole = found->is_number_integer() ||
                       (found->is_number_float() && std::isfinite(found->get<double>()) &&
                        std::trunc(found->get<double>()) == found->get<double>());
    if (!whole) {
      throw bad_input(path, fmt::format("\"{}\" is not a whole number", key));
    }
    const double value =
        found->is_number_unsigned()  ? static_cast<double>(found->get<std::uint64_t>())
        : found->is_number_integer() ? static_cast<double>(found->get<std::int64_t>())
                                     : found->get<double>();
    if (value < static_cast<double>(std::numeric_limits<T>::min()) ||
        value > static_cast<double>(std::numeric_limits<T>::max())) {
      throw bad_input(path, fmt::format("\"{}\" is out of range ({})", key, found->dump()));
    }
    return static_cast<T>(value);
  } else {
    try {
      return found->get<T>();
    } catch (const nlohmann::json::exception&) {
      throw bad_input(path, fmt::format("\"{}\" has the wrong type", key));
    }
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
  } catch (const nlohmann::json::exception& parse_error) {  // a syntax error, 1e999 too
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
    } catch (const nlohmann::json::exception& parse_error) {  // a syntax error, 1e999 too
      // A file meant as a power-limit profile gets its reader's answer (the one `zeus plo show`
      // gives, naming the field).
      file.clear();
      file.seekg(start);
      const std::string content{std::istreambuf_iterator<char>(file), {}};
      if (content.find("\"measurements\"") != std::string::npos) {
        inputs.profiles.push_back(read_profile(path, selector));
        return;
      }
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
  csv::Table table = open_table(path, file);
  if (monitor::timeline_csv::Reader::recognises(table)) {
    monitor::timeline_csv::Reader reader(std::move(table));
    inputs.timelines.push_back(parse_timeline(reader, options.keep_power_samples));
    return;
  }
  if (monitor::window_log::recognises(table.header())) {
    WindowLog log{path, read_windows(path)};
    if (log.windows.empty()) {
      throw bad_input(path, "the ZeusMonitor log has no window (a header and no rows)");
    }
    inputs.window_logs.push_back(std::move(log));
    return;
  }
  throw bad_input(path, fmt::format("unrecognised content (first line \"{}\"); {}",
                                    fmt::join(table.header(), ","), kKinds));
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
