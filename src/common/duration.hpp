// Durations typed by people (and their short form in messages), one grammar for every command line
// (zeus's --interval, --duration,
// --kill-after, the profile's candidate lists; zeusd token issue's --expires): a decimal number,
// optional spaces, and an optional unit, `ms`, `s`, `m` (or `min`), `h` or `d`; no unit means
// seconds ("10s", "500ms", "2m", "1.5h", "7d", "0.5"). Blanks around the whole are ignored, and a
// leading '+' is allowed.
#pragma once

#include <string>
#include <string_view>

namespace zeus {

// The duration in seconds: non-negative and finite. Throws Error(kInvalidArgument) naming `what`
// (the flag, e.g. "--interval"), quoting `text` and saying why, when it is malformed, negative or
// not finite.
double parse_duration_s(std::string_view text, std::string_view what);

// A short human form of a duration for messages: "1 ms", "0.5 s", "2 min".
std::string format_duration(double duration_s);

}  // namespace zeus
