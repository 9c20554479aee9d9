// `zeus report INPUT... --out report.html`: one self-contained HTML page with plots of power
// timelines, simulator results and power-limit profiles (docs/report.md).
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "commands.hpp"
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

// Writes `content` to a temporary sibling and renames it, so that a failed write leaves no
// half-written page behind.
void write_atomically(const fs::path& path, const std::string& content) {
  fs::path temporary = path;
  temporary += fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) {
      throw Error(ErrorKind::kIo, fmt::format("--out \"{}\": cannot write there: {}", path.string(),
                                              std::generic_category().message(errno)));
    }
    file.write(content.data(), static_cast<std::streamsize>(content.size()));
    file.close();
    if (!file) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw Error(ErrorKind::kIo, fmt::format("writing \"{}\" failed", path.string()));
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw Error(ErrorKind::kIo, fmt::format("--out \"{}\": cannot write there: {}", path.string(),
                                            error.message()));
  }
}

int run(const ReportArgs& args) {
  if (args.world_size < 1) {
    throw Error(ErrorKind::kInvalidArgument, "--world-size must be at least 1");
  }
  const auto selector = parse_selector(args.selector, args.world_size);
  std::error_code error;
  const fs::path out(args.out);
  if (fs::is_directory(out, error)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--out \"{}\" is a directory; give the HTML file to write, e.g. {}",
                            args.out, (out / "report.html").string()));
  }
  if (out.has_parent_path() && !fs::is_directory(out.parent_path(), error)) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--out \"{}\": the directory {} does not exist", args.out,
                            out.parent_path().string()));
  }
  const report::Inputs inputs = report::read_inputs(args.inputs, *selector);
  write_atomically(out, report::render_html(inputs, args.title));
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
