// `zeus report`'s page under construction, shared by the files that render its sections
// (report_html.cpp, report_footprint_page.cpp).
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/report/report_model.hpp"

namespace zeus::cli::report {

using json = nlohmann::ordered_json;

// Text for HTML content and attribute values.
std::string escape_html(std::string_view text);

// Body HTML and the chart specifications keyed by canvas id.
class Page {
 public:
  void html(std::string_view text) { body_ += text; }

  // A canvas for `spec`, with a caption under it.
  void chart(json spec, std::string_view caption) {
    const std::string id = fmt::format("chart-{}", charts_.size() + 1);
    const std::string kind = spec.at("kind").get<std::string>();
    fmt::format_to(std::back_inserter(body_),
                   "<figure class=\"chart\"><div class=\"chart-box\"><canvas id=\"{}\" "
                   "data-chart=\"{}\" role=\"img\" aria-label=\"{}\"></canvas></div>"
                   "<figcaption>{}</figcaption></figure>\n",
                   id, escape_html(kind), escape_html(spec.value("title", kind)),
                   escape_html(caption));
    charts_[id] = std::move(spec);
  }

  std::size_t chart_count() const { return charts_.size(); }
  const std::string& body() const { return body_; }
  const json& charts() const { return charts_; }

 private:
  std::string body_;
  json charts_ = json::object();
};

// The charts of a timeline's carbon emissions and electricity cost (when computed), each with
// its rate on a second axis, and a table of their totals per device. `bands`: the measurement
// windows shaded on the timeline's charts.
void footprint_section(Page& page, const Timeline& timeline, const json& bands);

}  // namespace zeus::cli::report
