// `zeus report`'s readers (src/cli/report/report_inputs.cpp) and page (report_html.cpp) on
// hostile files. The first byte picks what the rest is; parts are separated by NUL bytes:
//   0: one input file, its kind detected by content as `zeus report FILE` does (a timeline, a
//      ZeusMonitor log, a power-limit profile JSON, or anything else)
//   1: a `zeus monitor --timeline` CSV, NUL, its sibling <timeline>.windows.csv
//   2: a `zeus sim --out` directory: summary.json, NUL, the history w_g_p.csv, NUL, the
//      configuration table configurations_w_g.csv (so the seeds name workload w, GPU g, policy p)
//
// read_inputs either returns inputs that hold what report_model.hpp says (series ascending in
// time, finite numbers, a profile's choice among its points) or throws zeus::Error; render_html
// then writes a page whose embedded data is valid JSON that no "</" can cut short.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/report/report_model.hpp"
#include "fuzz_check.hpp"
#include "fuzz_files.hpp"
#include "zeus/common/error.hpp"
#include "zeus/optimizer/power_limit_selector.hpp"

// The page's embedded assets, which the CLI generates at build time: empty here, since only the
// code around them is under test.
namespace zeus::cli::assets {
std::string_view chart_js() {
  return {};
}
std::string_view report_js() {
  return {};
}
std::string_view report_css() {
  return {};
}
}  // namespace zeus::cli::assets

namespace {

namespace fs = std::filesystem;
namespace report = zeus::cli::report;

// The files every mode may write; all are removed first, so that no input sees another's files.
struct Paths {
  fs::path single = zeus::fuzz::scratch_dir() / "input";
  fs::path timeline = zeus::fuzz::scratch_dir() / "timeline.csv";
  fs::path windows = zeus::fuzz::scratch_dir() / "timeline.csv.windows.csv";
  fs::path sim = zeus::fuzz::scratch_dir() / "sim";
};

const Paths& paths() {
  static const Paths created = [] {
    Paths p;
    fs::create_directories(p.sim);
    return p;
  }();
  return created;
}

void clear_sim_dir() {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(paths().sim, error)) {
    fs::remove_all(entry.path(), error);
  }
}

void check_windows(const std::vector<report::Window>& windows) {
  for (const report::Window& window : windows) {
    ZEUS_FUZZ_CHECK(std::isfinite(window.start_s));
    ZEUS_FUZZ_CHECK(std::isfinite(window.elapsed_s) && window.elapsed_s >= 0.0);
    for (const auto& [column, energy_j] : window.energy_j) {
      ZEUS_FUZZ_CHECK(!column.empty() && std::isfinite(energy_j));
    }
  }
}

void check_inputs(const report::Inputs& inputs) {
  for (const report::Timeline& timeline : inputs.timelines) {
    ZEUS_FUZZ_CHECK(!timeline.series.empty());
    ZEUS_FUZZ_CHECK(timeline.start_s <= timeline.end_s);
    for (const report::PowerSeries& series : timeline.series) {
      ZEUS_FUZZ_CHECK(!series.points.empty());
      ZEUS_FUZZ_CHECK(series.points.size() <= report::kMaxSeriesPoints);
      ZEUS_FUZZ_CHECK(series.samples >= series.points.size());
      if (series.samples != series.points.size()) {
        continue;  // averaged in buckets: rounding may reorder equal times by an ulp
      }
      for (std::size_t i = 0; i < series.points.size(); ++i) {
        const auto [time_s, watts] = series.points[i];
        ZEUS_FUZZ_CHECK(std::isfinite(time_s) && std::isfinite(watts));
        ZEUS_FUZZ_CHECK(time_s >= timeline.start_s && time_s <= timeline.end_s);
        ZEUS_FUZZ_CHECK(i == 0 || series.points[i - 1].first <= time_s);
      }
    }
    check_windows(timeline.windows);
  }
  for (const report::WindowLog& log : inputs.window_logs) {
    ZEUS_FUZZ_CHECK(!log.windows.empty());
    check_windows(log.windows);
  }
  for (const report::SimResults& results : inputs.simulations) {
    ZEUS_FUZZ_CHECK(!results.groups.empty());
    for (const report::SimGroup& group : results.groups) {
      ZEUS_FUZZ_CHECK(!group.policies.empty());
      for (const report::PolicyHistory& history : group.policies) {
        ZEUS_FUZZ_CHECK(!history.rows.empty());
      }
    }
  }
  for (const report::Profile& profile : inputs.profiles) {
    ZEUS_FUZZ_CHECK(!profile.points.empty());
    bool chosen_is_a_point = false;
    for (std::size_t i = 0; i < profile.points.size(); ++i) {
      const report::ProfilePoint& point = profile.points[i];
      ZEUS_FUZZ_CHECK(i == 0 || profile.points[i - 1].power_limit_w < point.power_limit_w);
      chosen_is_a_point = chosen_is_a_point || point.power_limit_w == profile.chosen_w;
    }
    ZEUS_FUZZ_CHECK(chosen_is_a_point);
  }
}

// The page embeds its data once, as JSON that the element's end tag cannot appear in.
void check_page(const std::string& html) {
  constexpr std::string_view kOpen = R"(<script type="application/json" id="zeus-report-data">)";
  const std::size_t open = html.find(kOpen);
  ZEUS_FUZZ_CHECK(open != std::string::npos);
  ZEUS_FUZZ_CHECK(html.find(kOpen, open + 1) == std::string::npos);
  const std::size_t begin = open + kOpen.size();
  const std::size_t end = html.find("</", begin);
  ZEUS_FUZZ_CHECK(end != std::string::npos && html.compare(end, 9, "</script>") == 0);
  ZEUS_FUZZ_CHECK(nlohmann::json::accept(html.substr(begin, end - begin)));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zeus::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Paths& p = paths();
  std::error_code error;
  fs::remove(p.single, error);
  fs::remove(p.timeline, error);
  fs::remove(p.windows, error);
  clear_sim_dir();

  std::vector<std::string> inputs;
  switch (data[0] % 3) {
    case 0:
      zeus::fuzz::write_file(p.single, rest);
      inputs.push_back(p.single.string());
      break;
    case 1: {
      const auto parts = zeus::fuzz::split_parts(rest, 2);
      zeus::fuzz::write_file(p.timeline, parts[0]);
      zeus::fuzz::write_file(p.windows, parts[1]);
      inputs.push_back(p.timeline.string());
      break;
    }
    default: {
      const auto parts = zeus::fuzz::split_parts(rest, 3);
      zeus::fuzz::write_file(p.sim / "summary.json", parts[0]);
      zeus::fuzz::write_file(p.sim / "w_g_p.csv", parts[1]);
      zeus::fuzz::write_file(p.sim / "configurations_w_g.csv", parts[2]);
      inputs.push_back(p.sim.string());
      break;
    }
  }

  static const zeus::optimizer::ZeusCostSelector selector(0.5);
  report::Inputs read;
  try {
    read = report::read_inputs(inputs, selector);
  } catch (const zeus::Error& read_error) {
    ZEUS_FUZZ_CHECK(read_error.kind() == zeus::ErrorKind::kInvalidArgument);
    ZEUS_FUZZ_CHECK(std::string_view(read_error.what()).find(p.single.parent_path().string()) !=
                    std::string_view::npos);
    return 0;
  }
  check_inputs(read);
  check_page(report::render_html(read, "fuzz </title><script>"));
  return 0;
}
