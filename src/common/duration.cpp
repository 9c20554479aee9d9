#include "common/duration.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>

#include "zeus/common/error.hpp"
#include "zeus/common/units.hpp"

namespace zeus {
namespace {

struct Unit {
  std::string_view suffix;
  double seconds;
};

// Longest suffixes first, so that "ms" is not read as "m" followed by garbage.
constexpr std::array<Unit, 6> kUnits{
    {{"min", 60.0}, {"ms", 1e-3}, {"s", 1.0}, {"m", 60.0}, {"h", 3600.0}, {"d", 86400.0}}};

[[noreturn]] void malformed(std::string_view text, std::string_view what, std::string_view why) {
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("{} \"{}\" is not a valid duration: {}; expected a number with an "
                          "optional unit ms, s, m, h or d (no unit means seconds), e.g. 10s, "
                          "500ms, 2m, 0.5",
                          what, text, why));
}

}  // namespace

double parse_duration_s(std::string_view text, std::string_view what) {
  std::string_view rest = text;
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())) != 0) {
    rest.remove_prefix(1);
  }
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())) != 0) {
    rest.remove_suffix(1);
  }
  if (rest.empty()) {
    malformed(text, what, "it is empty");
  }
  if (rest.front() == '-') {
    malformed(text, what, "it is negative");
  }
  if (rest.front() == '+') {
    rest.remove_prefix(1);
  }
  double value = 0.0;
  const auto [end, ec] =
      std::from_chars(rest.data(), rest.data() + rest.size(), value, std::chars_format::fixed);
  if (ec == std::errc::result_out_of_range) {
    malformed(text, what, "the number is out of range");
  }
  if (ec != std::errc() || end == rest.data()) {
    malformed(text, what, "it does not start with a number");
  }
  std::string_view suffix = rest.substr(static_cast<std::size_t>(end - rest.data()));
  while (!suffix.empty() && suffix.front() == ' ') {  // "10 s" is fine too
    suffix.remove_prefix(1);
  }
  double unit_s = 1.0;
  if (!suffix.empty()) {
    bool known = false;
    for (const Unit& unit : kUnits) {
      if (suffix == unit.suffix) {
        unit_s = unit.seconds;
        known = true;
        break;
      }
    }
    if (!known) {
      malformed(text, what, fmt::format("unknown unit \"{}\"", suffix));
    }
  }
  const double seconds = value * unit_s;
  if (!std::isfinite(seconds)) {
    malformed(text, what, "it is not finite");
  }
  return seconds;
}

std::string format_duration(double duration_s) {
  if (duration_s < 1.0) {
    return fmt::format("{:g} ms", units::milliseconds_from_seconds(duration_s));
  }
  if (duration_s < 60.0) {
    return fmt::format("{:g} s", duration_s);
  }
  return fmt::format("{:g} min", duration_s / 60.0);
}

}  // namespace zeus
