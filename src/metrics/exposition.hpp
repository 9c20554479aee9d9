// The Prometheus text exposition format's small pieces, shared by the metric families of this
// layer (internal: a user renders through DeviceMetrics, WindowHistograms or MetricsServer).
#pragma once

#include <string>
#include <string_view>

namespace zeus::metrics {

// A label value escaped for the text format: backslash, double quote and line feed.
std::string escape_label_value(std::string_view value);
// HELP text escaped for the text format: backslash and line feed.
std::string escape_help(std::string_view text);
// A sample value: integers without a fraction, +Inf/-Inf/NaN spelled as the format wants.
std::string format_value(double value);

// Appends "# HELP name help\n# TYPE name type\n".
void write_family_header(std::string& out, std::string_view name, std::string_view type,
                         std::string_view help);

}  // namespace zeus::metrics
