// `zeus report`'s data model: the inputs it reads (report_inputs.cpp) and the self-contained HTML
// page it writes (report_html.cpp). The command itself is report_command.cpp.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zeus::optimizer {
class OptimumSelector;
}

namespace zeus::cli::report {

// One ZeusMonitor window: a row of a monitor log (start_time,window_name,elapsed_time,...).
struct Window {
  std::string name;
  double start_s = 0.0;  // Unix time
  double elapsed_s = 0.0;
  std::vector<std::pair<std::string, double>> energy_j;  // ("gpu0", J) as the log's columns
};

struct WindowLog {
  std::filesystem::path path;
  std::vector<Window> windows;
};

// One (device, domain) series of a `zeus monitor --timeline` CSV.
struct PowerSeries {
  std::string device;                             // "gpu0"
  std::string domain;                             // "instant", "average", ...
  std::vector<std::pair<double, double>> points;  // (Unix time s, W), ascending in time
  std::size_t samples = 0;                        // before any downsampling
  // Every sample, ascending in time; kept only when ReadOptions::keep_power_samples is set (the
  // carbon and cost integration needs them all, the charts only `points`).
  std::vector<std::pair<double, double>> all_points;
};

// The carbon emissions or the electricity cost of a timeline: each device's power times the
// rate (gCO2eq/kWh or price/kWh) in force at each instant, integrated (report_footprint.cpp).
struct DeviceFootprint {
  std::string device;  // "gpu0"
  std::string domain;  // the power series integrated: "device_instant", ...
  double energy_j = 0.0;
  double amount = 0.0;             // gCO2eq or currency units
  std::vector<double> cumulative;  // the amount up to each of Footprint::times_unix_s
};

struct Footprint {
  std::string quantity;   // "Carbon emissions" or "Electricity cost"
  std::string unit;       // "gCO2eq", or the currency ("" when the provider does not say)
  std::string rate_name;  // "Carbon intensity" or "Electricity price"
  std::string rate_unit;  // "gCO2eq/kWh", "EUR/kWh" or "per kWh"
  std::string flag;       // "--carbon-intensity" or "--price"
  std::string spec;       // as given
  std::vector<double> times_unix_s;  // ascending, from the timeline's start to its end
  std::vector<DeviceFootprint> devices;
  std::vector<double> total_cumulative;               // the devices' sum at each time
  std::vector<std::pair<double, double>> rate_steps;  // (Unix time s, rate) from then on
  double energy_j = 0.0;
  double amount = 0.0;
  double mean_rate = 0.0;  // time-weighted over the timeline
  std::vector<std::string> notes;
};

struct Timeline {
  std::filesystem::path path;
  double start_s = 0.0;  // the earliest timestamp
  double end_s = 0.0;
  std::vector<PowerSeries> series;  // in order of first appearance
  // The temperature rows (domain "temperature", points (Unix time s, degrees C)), one per device.
  std::vector<PowerSeries> temperatures;
  std::vector<Window> windows;  // from <path>.windows.csv, when present
  std::filesystem::path windows_path;
  std::optional<Footprint> carbon;  // with --carbon-intensity
  std::optional<Footprint> cost;    // with --price
};

// One policy's histories in a `zeus sim --out` directory.
struct HistoryRow {
  std::uint64_t seed = 0;
  int recurrence = 0;
  int batch_size = 0;
  int power_limit_w = 0;
  double energy_j = 0.0;
  double time_s = 0.0;
  double cost = 0.0;
};

struct PolicyHistory {
  std::string policy;
  std::filesystem::path path;
  std::vector<HistoryRow> rows;
};

struct Configuration {
  int batch_size = 0;
  int power_limit_w = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  double cost = 0.0;
  bool is_default = false;
  bool is_oracle = false;
  bool is_pareto = false;
};

// One (workload, GPU) of a simulation.
struct SimGroup {
  std::string workload;
  std::string gpu;
  double oracle_cost = 0.0;
  int oracle_batch_size = 0;
  int oracle_power_limit_w = 0;
  std::vector<PolicyHistory> policies;
  std::vector<Configuration> configurations;  // empty when the directory has none
  std::filesystem::path configurations_path;
};

struct SimResults {
  std::filesystem::path dir;
  double eta = 0.5;
  std::vector<SimGroup> groups;
  std::vector<std::string> failed_cells;  // "workload/gpu/policy: error"
};

struct ProfilePoint {
  int power_limit_w = 0;
  double energy_j = 0.0;
  double time_s = 0.0;
};

struct Profile {
  std::filesystem::path path;
  std::vector<ProfilePoint> points;  // ascending power limit
  int chosen_w = 0;
  std::string selector;  // the selector's description
};

struct Inputs {
  std::vector<Timeline> timelines;
  std::vector<WindowLog> window_logs;
  std::vector<SimResults> simulations;
  std::vector<Profile> profiles;
};

// At most this many points per plotted power series; longer ones are averaged in buckets.
constexpr std::size_t kMaxSeriesPoints = 4000;

struct ReadOptions {
  bool keep_power_samples = false;  // fill PowerSeries::all_points
};

// Reads every input, detecting its kind by content. Errors (zeus::Error, kInvalidArgument) name
// the file and say what was expected.
Inputs read_inputs(const std::vector<std::string>& paths,
                   const optimizer::OptimumSelector& selector, ReadOptions options = {});

// The whole page.
std::string render_html(const Inputs& inputs, std::string_view title);

}  // namespace zeus::cli::report

namespace zeus::cli::assets {
std::string_view chart_js();
std::string_view report_js();
std::string_view report_css();
}  // namespace zeus::cli::assets
