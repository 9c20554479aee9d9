// `zeus report`'s page: HTML structure, one <canvas> per plot, the data as embedded JSON, and the
// embedded Chart.js and page script that draw it. Nothing is loaded from elsewhere.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/report/report_model.hpp"
#include "cli/report/report_page.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"
#include "zeus/version.hpp"

namespace zeus::cli::report {

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// JSON for inside <script>: "</" could end the element early, "<!" could start a comment. In
// JSON, '<' occurs only inside strings, where \u003c means the same.
std::string script_safe_json(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '!')) {
      out += "\\u003c";
    } else {
      out += text[i];
    }
  }
  return out;
}

// Script code must not contain "</script" or "<!--" (which would change how HTML parses it); the
// embedded scripts never do, and this checks it rather than rewriting code.
std::string_view script_code(std::string_view code, std::string_view what) {
  const std::string lower = text::ascii_lower(code);
  if (lower.find("</script") != std::string::npos || lower.find("<!--") != std::string::npos) {
    throw Error(ErrorKind::kUnknown,
                fmt::format("the embedded {} contains \"</script\" or \"<!--\"", what));
  }
  return code;
}

std::string utc_time(double unix_s) {
  // The readers bound times (report_inputs.cpp); a time that is no date is printed as a number
  // rather than converted (out of time_t's range, the conversion is undefined).
  std::tm tm{};
  if (!(unix_s >= 0.0 && unix_s < 1e11)) {
    return fmt::format("{:g} s (Unix time)", unix_s);
  }
  const auto seconds = static_cast<std::time_t>(std::floor(unix_s));
  if (gmtime_r(&seconds, &tm) == nullptr) {
    return fmt::format("{:g} s (Unix time)", unix_s);
  }
  return fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", tm);
}

std::string quantity(double value, std::string_view unit) {
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e9) {
    return fmt::format("{:.2f} G{}", value / 1e9, unit);
  }
  if (magnitude >= 1e6) {
    return fmt::format("{:.2f} M{}", value / 1e6, unit);
  }
  if (magnitude >= 1e4) {
    return fmt::format("{:.2f} k{}", value / 1e3, unit);
  }
  return fmt::format("{:.2f} {}", value, unit);
}

double round_to(double value, double step) {
  return std::round(value / step) * step;
}

json window_bands(const std::vector<Window>& windows, double origin_s, double start_s,
                  double end_s) {
  json bands = json::array();
  for (const Window& window : windows) {
    const double from = window.start_s;
    const double to = window.start_s + window.elapsed_s;
    if (to < start_s || from > end_s) {
      continue;  // another run's window
    }
    bands.push_back({{"from", round_to(from - origin_s, 1e-3)},
                     {"to", round_to(to - origin_s, 1e-3)},
                     {"label", window.name}});
  }
  return bands;
}

void window_table(Page& page, const std::vector<Window>& windows) {
  if (windows.empty()) {
    return;
  }
  std::vector<std::string> energy_columns;
  for (const Window& window : windows) {
    for (const auto& [column, energy] : window.energy_j) {
      if (std::find(energy_columns.begin(), energy_columns.end(), column) == energy_columns.end()) {
        energy_columns.push_back(column);
      }
    }
  }
  page.html("<table><thead><tr><th>window</th><th>start</th><th>duration (s)</th>");
  for (const std::string& column : energy_columns) {
    page.html(fmt::format("<th>{} (J)</th>", escape_html(column)));
  }
  page.html("</tr></thead><tbody>\n");
  for (const Window& window : windows) {
    page.html(fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{:.3f}</td>",
                          escape_html(window.name), utc_time(window.start_s), window.elapsed_s));
    for (const std::string& column : energy_columns) {
      const auto found = std::find_if(window.energy_j.begin(), window.energy_j.end(),
                                      [&](const auto& entry) { return entry.first == column; });
      page.html(found == window.energy_j.end()
                    ? std::string("<td></td>")
                    : fmt::format("<td class=\"num\">{:.3f}</td>", found->second));
    }
    page.html("</tr>\n");
  }
  page.html("</tbody></table>\n");
}

void timeline_section(Page& page, const Timeline& timeline,
                      const std::vector<WindowLog>& window_logs) {
  page.html(fmt::format("<section><h2>Power timeline: <code>{}</code></h2>\n",
                        escape_html(timeline.path.string())));
  std::vector<Window> windows = timeline.windows;
  for (const WindowLog& log : window_logs) {
    windows.insert(windows.end(), log.windows.begin(), log.windows.end());
  }
  const json bands = window_bands(windows, timeline.start_s, timeline.start_s, timeline.end_s);
  std::size_t samples = 0;
  for (const PowerSeries& series : timeline.series) {
    samples += series.samples;
  }
  page.html(fmt::format(
      "<p>{} samples from {} to {} ({:.3f} s). {}</p>\n", samples, utc_time(timeline.start_s),
      utc_time(timeline.end_s), timeline.end_s - timeline.start_s,
      bands.empty() ? std::string("No measurement window overlaps this timeline.")
                    : fmt::format("Shaded: {} measurement window{}{}.", bands.size(),
                                  bands.size() == 1 ? "" : "s",
                                  timeline.windows_path.empty()
                                      ? std::string()
                                      : fmt::format(" (from <code>{}</code>)",
                                                    escape_html(timeline.windows_path.string())))));
  std::vector<std::string> devices;
  for (const PowerSeries& series : timeline.series) {
    if (std::find(devices.begin(), devices.end(), series.device) == devices.end()) {
      devices.push_back(series.device);
    }
  }
  for (const std::string& device : devices) {
    json spec{{"kind", "timeline"},
              {"title", fmt::format("Power of {}", device)},
              {"series", json::array()},
              {"bands", bands}};
    bool averaged = false;
    for (const PowerSeries& series : timeline.series) {
      if (series.device != device) {
        continue;
      }
      json points = json::array();
      for (const auto& [time, watts] : series.points) {
        points.push_back({round_to(time - timeline.start_s, 1e-6), round_to(watts, 1e-3)});
      }
      averaged = averaged || series.points.size() < series.samples;
      spec["series"].push_back({{"label", series.domain}, {"points", std::move(points)}});
    }
    page.chart(
        std::move(spec),
        fmt::format("Power of {} per domain over time{}.", device,
                    averaged ? fmt::format(" (long series averaged to {} points)", kMaxSeriesPoints)
                             : std::string()));
  }
  if (!timeline.temperatures.empty()) {
    // Temperature changes, held until the next one (zeus monitor writes changes only).
    json spec{
        {"kind", "timeline"}, {"title", "GPU temperature"}, {"y_title", "Temperature (\u00b0C)"},
        {"stepped", true},    {"series", json::array()},    {"bands", bands}};
    for (const PowerSeries& series : timeline.temperatures) {
      json points = json::array();
      for (const auto& [time, celsius] : series.points) {
        points.push_back({round_to(time - timeline.start_s, 1e-6), round_to(celsius, 1e-3)});
      }
      // The last reading holds to the end of the timeline.
      if (!series.points.empty() && series.points.back().first < timeline.end_s) {
        points.push_back({round_to(timeline.end_s - timeline.start_s, 1e-6),
                          round_to(series.points.back().second, 1e-3)});
      }
      spec["series"].push_back({{"label", series.device}, {"points", std::move(points)}});
    }
    page.chart(std::move(spec), "GPU temperature over time (each change, held until the next).");
  }
  footprint_section(page, timeline, bands);
  window_table(page, windows);
  page.html("</section>\n");
}

const Configuration* find_configuration(const SimGroup& group, int batch_size, int limit_w) {
  for (const Configuration& c : group.configurations) {
    if (c.batch_size == batch_size && c.power_limit_w == limit_w) {
      return &c;
    }
  }
  return nullptr;
}

json point(const Configuration& c) {
  return {c.time_s, c.energy_j, c.batch_size, c.power_limit_w};
}

struct FinalChoice {
  int batch_size = 0;
  int power_limit_w = 0;
  std::size_t votes = 0;  // seeds that end with it
  std::size_t seeds = 0;
};

// The (batch size, power limit) of the last recurrence that most seeds end with.
FinalChoice final_choice(const PolicyHistory& history) {
  std::map<std::uint64_t, const HistoryRow*> last;
  for (const HistoryRow& row : history.rows) {
    const HistoryRow*& current = last[row.seed];
    if (current == nullptr || row.recurrence >= current->recurrence) {
      current = &row;
    }
  }
  std::map<std::pair<int, int>, std::size_t> votes;
  for (const auto& [seed, row] : last) {
    ++votes[{row->batch_size, row->power_limit_w}];
  }
  const auto best = std::max_element(
      votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return {best->first.first, best->first.second, best->second, last.size()};
}

void simulation_section(Page& page, const SimResults& results) {
  page.html(
      fmt::format("<section><h2>Simulation: <code>{}</code></h2>\n<p>η = {} (cost = η·energy "
                  "+ (1 − η)·MaxPower·time, in joules).</p>\n",
                  escape_html(results.dir.string()), results.eta));
  for (const SimGroup& group : results.groups) {
    page.html(
        fmt::format("<h3>{} on {}</h3>\n", escape_html(group.workload), escape_html(group.gpu)));
    // Cost per recurrence, mean over seeds, against the oracle's expected cost.
    json cost{{"kind", "sim-cost"},
              {"title", fmt::format("Cost per recurrence, {} on {}", group.workload, group.gpu)},
              {"oracle", group.oracle_cost},
              {"series", json::array()}};
    std::size_t seeds = 0;
    for (const PolicyHistory& policy : group.policies) {
      std::map<int, std::pair<double, int>> sums;
      std::map<std::uint64_t, bool> seed_set;
      for (const HistoryRow& row : policy.rows) {
        auto& [sum, count] = sums[row.recurrence];
        sum += row.cost;
        ++count;
        seed_set[row.seed] = true;
      }
      seeds = std::max(seeds, seed_set.size());
      json points = json::array();
      for (const auto& [recurrence, sum_count] : sums) {
        points.push_back({recurrence + 1, sum_count.first / sum_count.second});
      }
      cost["series"].push_back({{"label", policy.policy}, {"points", std::move(points)}});
    }
    page.chart(std::move(cost),
               fmt::format("Cost of each recurrence (all tries), mean over {} seed{}, against the "
                           "oracle's expected cost per recurrence ({}).",
                           seeds, seeds == 1 ? "" : "s", quantity(group.oracle_cost, "J")));

    // The configuration each policy chose, recurrence by recurrence, for the first seed.
    std::vector<const PolicyHistory*> adaptive;
    for (const PolicyHistory& policy : group.policies) {
      if (policy.policy != "default" && policy.policy != "oracle") {
        adaptive.push_back(&policy);
      }
    }
    if (adaptive.empty()) {
      for (const PolicyHistory& policy : group.policies) {
        adaptive.push_back(&policy);
      }
    }
    const std::uint64_t first_seed = adaptive.front()->rows.front().seed;
    json choice{{"kind", "sim-choice"},
                {"title", fmt::format("Chosen configuration, {} on {}", group.workload, group.gpu)},
                {"series", json::array()}};
    for (const PolicyHistory* policy : adaptive) {
      json points = json::array();
      for (const HistoryRow& row : policy->rows) {
        if (row.seed == first_seed) {
          points.push_back({row.recurrence + 1, row.batch_size, row.power_limit_w});
        }
      }
      choice["series"].push_back({{"label", policy->policy}, {"points", std::move(points)}});
    }
    page.chart(std::move(choice),
               fmt::format("Batch size (left axis) and power limit (right axis) chosen at each "
                           "recurrence, seed {}; the oracle's choice is batch size {} at {} W.",
                           first_seed, group.oracle_batch_size, group.oracle_power_limit_w));

    // Every configuration's expected time and energy (the paper's figure).
    if (group.configurations.empty()) {
      page.html(fmt::format(
          "<p class=\"note\">No configurations_{}_{}.csv in this directory, so the time–energy "
          "scatter is left out; rerun <code>zeus sim --out</code> to write it.</p>\n",
          escape_html(group.workload), escape_html(group.gpu)));
      continue;
    }
    json scatter{{"kind", "sim-scatter"},
                 {"title", fmt::format("Time and energy, {} on {}", group.workload, group.gpu)},
                 {"configurations", json::array()},
                 {"pareto", json::array()},
                 {"markers", json::array()}};
    std::vector<const Configuration*> pareto;
    for (const Configuration& c : group.configurations) {
      scatter["configurations"].push_back(point(c));
      if (c.is_pareto) {
        pareto.push_back(&c);
      }
    }
    std::sort(pareto.begin(), pareto.end(),
              [](const auto* a, const auto* b) { return a->time_s < b->time_s; });
    for (const Configuration* c : pareto) {
      scatter["pareto"].push_back(point(*c));
    }
    for (const Configuration& c : group.configurations) {
      if (c.is_default) {
        scatter["markers"].push_back(
            {{"label", "Default"}, {"style", "rect"}, {"point", point(c)}});
      }
    }
    for (const Configuration& c : group.configurations) {
      if (c.is_oracle) {
        scatter["markers"].push_back({{"label", "Oracle"}, {"style", "star"}, {"point", point(c)}});
      }
    }
    std::string finals;
    for (const PolicyHistory& policy : group.policies) {
      if (policy.policy == "default" || policy.policy == "oracle") {
        continue;
      }
      const FinalChoice last = final_choice(policy);
      const Configuration* c = find_configuration(group, last.batch_size, last.power_limit_w);
      const std::string name = policy.policy == "zeus" ? "Zeus" : policy.policy;
      fmt::format_to(std::back_inserter(finals),
                     " {}'s final choice: batch size {} at {} W (the last recurrence of {} of {} "
                     "seeds).",
                     name, last.batch_size, last.power_limit_w, last.votes, last.seeds);
      if (c != nullptr) {
        scatter["markers"].push_back({{"label", fmt::format("{} final", name)},
                                      {"style", policy.policy == "zeus" ? "triangle" : "rectRot"},
                                      {"point", point(*c)}});
      }
    }
    page.chart(std::move(scatter),
               fmt::format("Expected time and energy per recurrence of every (batch size, power "
                           "limit) that reaches the target, with the Pareto front.{}",
                           finals));
  }
  if (!results.failed_cells.empty()) {
    page.html("<p class=\"note\">Cells that failed:</p><ul>");
    for (const std::string& cell : results.failed_cells) {
      page.html(fmt::format("<li>{}</li>", escape_html(cell)));
    }
    page.html("</ul>\n");
  }
  page.html("</section>\n");
}

void profile_section(Page& page, const Profile& profile) {
  page.html(fmt::format("<section><h2>Power-limit profile: <code>{}</code></h2>\n",
                        escape_html(profile.path.string())));
  json spec{{"kind", "profile"},
            {"title", "Energy and time per power limit"},
            {"chosen", profile.chosen_w},
            {"selector", profile.selector},
            {"points", json::array()}};
  for (const ProfilePoint& p : profile.points) {
    spec["points"].push_back({p.power_limit_w, p.energy_j, p.time_s});
  }
  page.chart(std::move(spec), fmt::format("Energy (left axis) and time (right axis) of the "
                                          "profiled iterations at each power limit; {} chooses "
                                          "{} W (shaded).",
                                          profile.selector, profile.chosen_w));
  page.html(
      "<table><thead><tr><th>power limit (W)</th><th>energy (J)</th><th>time (s)</th>"
      "<th>average power (W)</th></tr></thead><tbody>\n");
  for (const ProfilePoint& p : profile.points) {
    page.html(
        fmt::format("<tr{}><td class=\"num\">{}</td><td class=\"num\">{:.3f}</td><td "
                    "class=\"num\">{:.3f}</td><td class=\"num\">{:.1f}</td></tr>\n",
                    p.power_limit_w == profile.chosen_w ? " class=\"chosen\"" : "", p.power_limit_w,
                    p.energy_j, p.time_s, p.time_s > 0 ? p.energy_j / p.time_s : 0.0));
  }
  page.html("</tbody></table></section>\n");
}

}  // namespace

std::string render_html(const Inputs& inputs, std::string_view title) {
  Page page;
  for (const Timeline& timeline : inputs.timelines) {
    timeline_section(page, timeline, inputs.window_logs);
  }
  if (inputs.timelines.empty()) {
    for (const WindowLog& log : inputs.window_logs) {
      page.html(fmt::format("<section><h2>Measurement windows: <code>{}</code></h2>\n",
                            escape_html(log.path.string())));
      window_table(page, log.windows);
      page.html("</section>\n");
    }
  }
  for (const SimResults& results : inputs.simulations) {
    simulation_section(page, results);
  }
  for (const Profile& profile : inputs.profiles) {
    profile_section(page, profile);
  }

  const json data{{"charts", page.charts()}, {"chartjs_version", ZEUS_CHARTJS_VERSION}};
  const std::string data_text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string html;
  html.reserve(assets::chart_js().size() + page.body().size() + data_text.size() + 8192);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // The page may load nothing: everything it needs is inline.
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n";
  html +=
      fmt::format("<meta name=\"generator\" content=\"zeus report {}\">\n", ZEUS_VERSION_STRING);
  html += fmt::format("<title>{}</title>\n<style>\n", escape_html(title));
  html += assets::report_css();
  // Errors are recorded from the start, before Chart.js runs.
  html +=
      "</style>\n<script>\nwindow.zeusReportErrors = [];\n"
      "window.addEventListener('error', function (e) { window.zeusReportErrors.push(String("
      "e.message || e)); });\n"
      "(function () { var original = console.error; console.error = function () { "
      "window.zeusReportErrors.push(Array.prototype.join.call(arguments, ' ')); "
      "return original.apply(console, arguments); }; })();\n</script>\n";
  html += fmt::format("<script>\n/* Chart.js {}, MIT licence; embedded by zeus report. */\n",
                      ZEUS_CHARTJS_VERSION);
  html += script_code(assets::chart_js(), "Chart.js");
  html += "\n</script>\n</head>\n<body>\n<header>\n";
  html += fmt::format(
      "<h1>{}</h1>\n<p class=\"meta\">Written by zeus report {} at {}. {} plot{}. "
      "Drawn with the embedded Chart.js {} (MIT licence); this page loads "
      "nothing from the network.</p>\n</header>\n<main>\n",
      escape_html(title), ZEUS_VERSION_STRING, utc_time(static_cast<double>(std::time(nullptr))),
      page.chart_count(), page.chart_count() == 1 ? "" : "s", ZEUS_CHARTJS_VERSION);
  html += page.body();
  html += "</main>\n<script type=\"application/json\" id=\"zeus-report-data\">";
  html += script_safe_json(data_text);
  html += "</script>\n<script>\n";
  html += script_code(assets::report_js(), "page script");
  html += "\n</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace zeus::cli::report
