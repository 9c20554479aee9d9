// `zeus report INPUT... --out report.html`: one self-contained HTML page with plots of power
// timelines, simulator results and power-limit profiles (docs/report.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common/output_file.hpp"
#include "report.hpp"
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
};

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
  // Opened first, so that a bad --out is reported before a long timeline is read; the page is
  // written to a temporary beside it and put in place at the end (docs/cli.md, "Input and output
  // files").
  OutputFileOptions out_options;
  out_options.what = "--out";
  out_options.inputs.assign(args.inputs.begin(), args.inputs.end());
  OutputFile out(args.out, std::move(out_options));
  const report::Inputs inputs = report::read_inputs(args.inputs, *selector);
  out.refuse_inputs(files_read(inputs));
  out.write(report::render_html(inputs, args.title));
  out.commit();
  return kExitOk;
}

}  // namespace

void add_report(CLI::App& app, Action& action) {
  CLI::App* command = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (no network needed) plotting power timelines, "
      "simulator results and power-limit profiles");
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
  command->footer(
      "The kind of each input is detected from its content. Exit code 2 names the input that "
      "cannot be read and what was expected. See docs/report.md.");
  command->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace zeus::cli
