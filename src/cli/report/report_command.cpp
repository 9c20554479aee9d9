// `zeus report INPUT... --out report.html`: one self-contained HTML page with plots of power
// timelines, simulator results and power-limit profiles (docs/report.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/carbon_spec.hpp"
#include "cli/commands.hpp"
#include "cli/price_spec.hpp"
#include "cli/report/report_footprint.hpp"
#include "cli/report/report_model.hpp"
#include "common/output_file.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"

namespace zeus::cli {
namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string out;
  std::string selector = "zeus-cost:0.5";
  int world_size = 1;
  std::string title = "Zeus report";
  std::optional<std::string> carbon_intensity;  // SPEC, as zeus monitor's
  std::optional<std::string> price;
};

// A --carbon-intensity or --price SPEC, parsed before anything is read or written: every way
// it can be wrong is a usage error here (exit 2), a missing file included, as for the inputs.
template <typename Parse>
auto provider_from(const std::optional<std::string>& spec, Parse parse) -> decltype(parse(*spec)) {
  if (!spec) {
    return nullptr;
  }
  try {
    return parse(*spec);
  } catch (const Error& error) {
    throw Error(ErrorKind::kInvalidArgument, error.what());
  }
}

// Every file read for the page, so that the page never replaces one of them.
std::vector<fs::path> files_read(const report::Inputs& inputs) {
  std::vector<fs::path> files;
  for (const report::Timeline& timeline : inputs.timelines) {
    files.push_back(timeline.path);
    if (!timeline.windows_path.empty()) {
      files.push_back(timeline.windows_path);
    }
  }
  for (const report::WindowLog& log : inputs.window_logs) {
    files.push_back(log.path);
  }
  for (const report::SimResults& simulation : inputs.simulations) {
    files.push_back(simulation.dir / "summary.json");
    for (const report::SimGroup& group : simulation.groups) {
      if (!group.configurations_path.empty()) {
        files.push_back(group.configurations_path);
      }
      for (const report::PolicyHistory& policy : group.policies) {
        files.push_back(policy.path);
      }
    }
  }
  for (const report::Profile& profile : inputs.profiles) {
    files.push_back(profile.path);
  }
  return files;
}

int run(const ReportArgs& args) {
  if (args.world_size < 1) {
    throw Error(ErrorKind::kInvalidArgument, "--world-size must be at least 1");
  }
  const auto selector = parse_selector(args.selector, args.world_size);
  const std::shared_ptr<monitor::CarbonIntensityProvider> carbon =
      provider_from(args.carbon_intensity,
                    [](const std::string& spec) { return carbon_provider_from_spec(spec); });
  const std::shared_ptr<monitor::ElectricityPriceProvider> price = provider_from(
      args.price, [](const std::string& spec) { return price_provider_from_spec(spec); });
  // Opened first, so that a bad --out is reported before a long timeline is read; the page is
  // written to a temporary beside it and put in place at the end (docs/cli.md, "Input and output
  // files").
  OutputFileOptions out_options;
  out_options.what = "--out";
  out_options.inputs.assign(args.inputs.begin(), args.inputs.end());
  // A series or tariff file is an input too (a path that is no file is ignored).
  for (const std::optional<std::string>* spec : {&args.carbon_intensity, &args.price}) {
    if (*spec && !(*spec)->empty()) {
      out_options.inputs.emplace_back(**spec);
    }
  }
  OutputFile out(args.out, std::move(out_options));
  report::ReadOptions read_options;
  read_options.keep_power_samples = carbon != nullptr || price != nullptr;
  report::Inputs inputs = report::read_inputs(args.inputs, *selector, read_options);
  out.refuse_inputs(files_read(inputs));
  if (inputs.timelines.empty()) {
    for (const auto& [flag, given] : {std::pair{"--carbon-intensity", carbon != nullptr},
                                      std::pair{"--price", price != nullptr}}) {
      if (given) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("{} needs a power timeline among the inputs (the CSV that `zeus "
                                "monitor --timeline FILE` writes): it integrates the timeline's "
                                "power",
                                flag));
      }
    }
  }
  for (report::Timeline& timeline : inputs.timelines) {
    if (carbon) {
      timeline.carbon = report::carbon_footprint(timeline, *carbon, *args.carbon_intensity);
    }
    if (price) {
      timeline.cost = report::cost_footprint(timeline, *price, *args.price);
    }
    for (report::PowerSeries& series : timeline.series) {
      series.all_points = {};  // integrated: only the plotted points are needed from here on
    }
  }
  out.write(report::render_html(inputs, args.title));
  out.commit();
  return kExitOk;
}

}  // namespace

void add_report(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (no network needed) plotting power timelines (with "
      "their carbon emissions and electricity cost), simulator results and power-limit "
      "profiles");
  auto args = std::make_shared<ReportArgs>();
  command
      ->add_option("inputs", args->inputs,
                   "A `zeus monitor --timeline` CSV (with its .windows.csv when present), a "
                   "ZeusMonitor log CSV, a `zeus sim --out` directory or a power-limit profile "
                   "JSON; any number, in any order")
      ->required();
  command->add_option("-o,--out", args->out, "The HTML file to write")->required();
  command
      ->add_option("--selector", args->selector,
                   "How a profile's power limit is chosen: zeus-cost[:ETA], energy, time or "
                   "max-slowdown[:FACTOR], as in `zeus plo show`")
      ->capture_default_str();
  command
      ->add_option("--world-size", args->world_size,
                   "GPUs whose energies a profile sums (for zeus-cost: MaxPower = max limit x "
                   "this)")
      ->capture_default_str();
  command->add_option("--title", args->title, "The page's title")->capture_default_str();
  command->add_option("--carbon-intensity", args->carbon_intensity,
                      "With a power timeline: chart its cumulative carbon emissions (gCO2eq) per "
                      "device beside power. SPEC as for zeus monitor: gCO2eq/kWh (e.g. 350), a "
                      "time series file (timestamp,gco2eq_per_kwh) or electricitymaps:ZONE (its "
                      "history covers the last 24 hours only)");
  command->add_option("--price", args->price,
                      "With a power timeline: chart its cumulative electricity cost per device "
                      "beside power. SPEC as for zeus monitor: a price per kWh (e.g. 0.15), a "
                      "JSON tariff file or openei:LABEL@LAT,LON");
  command->footer(
      "The kind of each input is detected from its content. Exit code 2 names the input that "
      "cannot be read and what was expected. See docs/report.md.");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
