// `zeus plo show PROFILE.json`: a power-limit profile's measurements and what each selector picks.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/cost.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus::cli {

// "zeus-cost:0.5", "energy", "time", "max-slowdown:1.1".
std::shared_ptr<const optimizer::OptimumSelector> parse_selector(const std::string& text,
                                                                 int world_size) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const std::string parameter = colon == std::string::npos ? "" : text.substr(colon + 1);
  const auto number = [&](const char* what) {
    try {
      std::size_t used = 0;
      const double value = std::stod(parameter, &used);
      if (used == parameter.size()) {
        return value;
      }
    } catch (const std::exception&) {
    }
    throw Error(ErrorKind::kInvalidArgument, "--selector " + text + ": " + what +
                                                 " must be a number, e.g. " + name + ":" +
                                                 (name == "zeus-cost" ? "0.5" : "1.1"));
  };
  if (colon != std::string::npos && parameter.empty()) {
    // "zeus-cost:" is a value that was cut off, not a request for the default.
    throw Error(ErrorKind::kInvalidArgument,
                "--selector " + text + ": nothing after ':'; give a number (e.g. " + name + ":" +
                    (name == "max-slowdown" ? "1.1" : "0.5") + ") or drop the ':'");
  }
  if (name == "energy" && parameter.empty()) {
    return std::make_shared<optimizer::EnergySelector>();
  }
  if (name == "time" && parameter.empty()) {
    return std::make_shared<optimizer::TimeSelector>();
  }
  if (name == "zeus-cost") {
    return std::make_shared<optimizer::ZeusCostSelector>(parameter.empty() ? 0.5 : number("eta"),
                                                         world_size);
  }
  if (name == "max-slowdown") {
    return std::make_shared<optimizer::MaxSlowdownSelector>(
        parameter.empty() ? 1.1 : number("the factor"));
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown selector \"" + text +
                  "\"; use zeus-cost[:ETA], energy, time or max-slowdown[:FACTOR]");
}

namespace {

int run_show(const std::string& path, const std::vector<std::string>& selector_texts,
             int world_size, bool as_json) {
  if (world_size < 1) {
    throw Error(ErrorKind::kInvalidArgument, "--world-size must be at least 1");
  }
  const runtime::PowerLimitProfile profile = runtime::load_power_limit_profile(path);
  std::vector<std::string> texts = selector_texts;
  if (texts.empty()) {
    texts = {"zeus-cost:0.5", "energy", "time", "max-slowdown:1.1"};
  }
  std::vector<std::pair<std::string, int>> choices;
  for (const std::string& text : texts) {
    const auto selector = parse_selector(text, world_size);
    choices.emplace_back(selector->describe(), selector->select(profile.measurements));
  }
  if (as_json) {
    nlohmann::json out;
    out["profile"] = path;
    out["measurements"] = nlohmann::json::array();
    for (const auto& m : profile.measurements) {
      out["measurements"].push_back(
          {{"power_limit_w", m.power_limit_w}, {"energy_j", m.energy_j}, {"time_s", m.time_s}});
    }
    out["choices"] = nlohmann::json::array();
    for (const auto& [selector, limit_w] : choices) {
      out["choices"].push_back({{"selector", selector}, {"power_limit_w", limit_w}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << fmt::format("Power-limit profile {}\n\n  {:>8}  {:>12}  {:>10}  {:>10}\n", path,
                           "limit W", "energy J", "time s", "power W");
  for (const auto& m : profile.measurements) {
    std::cout << fmt::format("  {:>8}  {:>12.3f}  {:>10.3f}  {:>10.1f}\n", m.power_limit_w,
                             m.energy_j, m.time_s, m.energy_j / m.time_s);
  }
  std::cout << "\n";
  for (const auto& [selector, limit_w] : choices) {
    std::cout << fmt::format("  {:<40} {} W\n", selector, limit_w);
  }
  return kExitOk;
}

}  // namespace

void add_plo(CLI::App& app, Action& action) {
  CLI::App* plo = app.add_subcommand("plo", "The power-limit optimizer's profiles");
  plo->require_subcommand(1);
  CLI::App* show = plo->add_subcommand(
      "show", "Print a power-limit profile's measurements and the limit each selector chooses");
  auto path = std::make_shared<std::string>();
  auto selectors = std::make_shared<std::vector<std::string>>();
  auto world_size = std::make_shared<int>(1);
  auto as_json = std::make_shared<bool>(false);
  show->add_option("profile", *path, "The profile JSON ({\"measurements\": [...]})")->required();
  show->add_option("--selector", *selectors,
                   "zeus-cost[:ETA] (default 0.5), energy, time or max-slowdown[:FACTOR] (default "
                   "1.1); repeat for several (default: all four)");
  show->add_option("--world-size", *world_size,
                   "GPUs whose energies the profile sums (MaxPower = max limit x this)")
      ->capture_default_str();
  show->add_flag("--json", *as_json, "Print one JSON object");
  show->callback([&action, path, selectors, world_size, as_json] {
    action = [=] { return run_show(*path, *selectors, *world_size, *as_json); };
  });
}

}  // namespace zeus::cli
