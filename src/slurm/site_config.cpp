// The Slurm plugin's settings (site_config.hpp).
#include "slurm/site_config.hpp"

#include <charconv>

#include "common/utf8.hpp"
#include "zeus/common/error.hpp"

namespace zeus::slurm {

namespace {

constexpr std::uint32_t kMaxWatts = 100000;  // no board draws 100 kW; catches mW typed as W

Error invalid(const std::string& text) {
  return Error(ErrorKind::kInvalidArgument, text);
}

// A value as messages quote it: its first 64 bytes, printable (to_printable) and on one line, so
// that neither a terminal nor a log line can be forged through it.
std::string shown(std::string_view value) {
  std::string out;
  for (const char c : to_printable(value.substr(0, 64))) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// "zeus plugstack.conf argument key=value: "
std::string argument(std::string_view key, std::string_view value) {
  return "zeus plugstack.conf argument " + shown(key) + "=" + shown(value) + ": ";
}

// An absolute path, or an error naming the argument.
std::string absolute_path(std::string_view key, const std::string& value, const char* what) {
  if (value.empty() || value.front() != '/') {
    throw invalid(argument(key, value) + "expected an absolute path" + what);
  }
  return value;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

std::uint32_t parse_watts_arg(std::string_view key, std::string_view value) {
  const auto watts = parse_unsigned(value);
  if (!watts || *watts == 0 || *watts > kMaxWatts) {
    throw invalid(argument(key, value) + "expected whole watts from 1 to " +
                  std::to_string(kMaxWatts));
  }
  return static_cast<std::uint32_t>(*watts);
}

bool parse_yes_no(std::string_view key, std::string_view value) {
  if (value == "yes" || value == "true" || value == "1") {
    return true;
  }
  if (value == "no" || value == "false" || value == "0") {
    return false;
  }
  throw invalid(argument(key, value) + "expected yes or no");
}

}  // namespace

std::string describe_range(const SiteConfig& site) {
  return std::to_string(site.min_power_limit_w) + "-" + std::to_string(site.max_power_limit_w) +
         " W";
}

SiteConfig parse_site_args(const std::vector<std::string>& args) {
  SiteConfig site;
  site.zeusd.socket_path = "/run/zeusd/zeusd.sock";
  site.zeusd.timeout_s = 2.0;
  std::optional<std::string> default_text;
  for (const std::string& arg : args) {
    const auto equals = arg.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw invalid("zeus plugstack.conf argument '" + shown(arg) +
                    "': expected key=value (see docs/slurm.md for the keys)");
    }
    const std::string key = arg.substr(0, equals);
    const std::string value = arg.substr(equals + 1);
    if (key == "min_power_limit") {
      site.min_power_limit_w = parse_watts_arg(key, value);
    } else if (key == "max_power_limit") {
      site.max_power_limit_w = parse_watts_arg(key, value);
    } else if (key == "default_power_limit") {
      default_text = value;
    } else if (key == "allow_off") {
      site.allow_off = parse_yes_no(key, value);
    } else if (key == "zeusd_socket") {
      site.zeusd.socket_path = absolute_path(key, value, " to zeusd's Unix socket");
    } else if (key == "zeusd_host_port") {
      const auto colon = value.rfind(':');
      const auto port =
          colon == std::string::npos ? std::nullopt : parse_unsigned(value.substr(colon + 1));
      if (colon == 0 || !port || *port == 0 || *port > 65535) {
        throw invalid(argument(key, value) + "expected HOST:PORT with a port from 1 to 65535");
      }
      site.zeusd.socket_path.reset();
      site.zeusd.host = value.substr(0, colon);
      site.zeusd.port = static_cast<int>(*port);
    } else if (key == "zeusd_token_file") {
      site.zeusd_token_file = absolute_path(key, value, " to the token file");
    } else if (key == "zeusd_timeout") {
      const auto ms = parse_unsigned(value);
      if (!ms || *ms < 10 || *ms > 60000) {
        throw invalid(argument(key, value) + "expected milliseconds from 10 to 60000");
      }
      site.zeusd.timeout_s = static_cast<double>(*ms) / 1000.0;
    } else if (key == "poll_interval") {
      const auto ms = parse_unsigned(value);
      if (!ms || *ms < 10 || *ms > 10000) {
        throw invalid("zeus plugstack.conf argument poll_interval=" + shown(value) +
                      ": expected milliseconds from 10 to 10000");
      }
      site.poll_interval_s = static_cast<double>(*ms) / 1000.0;
    } else if (key == "update_interval") {
      const auto seconds = parse_unsigned(value);
      if (!seconds || *seconds > 86400) {
        throw invalid("zeus plugstack.conf argument update_interval=" + shown(value) +
                      ": expected seconds from 0 (only at a step's end) to 86400");
      }
      site.update_interval_s = static_cast<double>(*seconds);
    } else if (key == "state_dir") {
      site.state_dir = absolute_path(key, value, "");
    } else if (key == "admin_comment") {
      site.admin_comment = parse_yes_no(key, value);
    } else if (key == "max_steps") {
      const auto steps = parse_unsigned(value);
      if (!steps || *steps == 0 || *steps > 100000) {
        throw invalid(argument(key, value) + "expected a count from 1 to 100000");
      }
      site.max_recorded_steps = static_cast<std::uint32_t>(*steps);
    } else {
      throw invalid(
          "zeus plugstack.conf: unknown argument '" + shown(key) +
          "' (known: min_power_limit, max_power_limit, default_power_limit, allow_off, "
          "zeusd_socket, zeusd_host_port, zeusd_token_file, zeusd_timeout, poll_interval, "
          "update_interval, state_dir, admin_comment, max_steps)");
    }
  }
  if (site.min_power_limit_w > site.max_power_limit_w) {
    throw invalid("zeus plugstack.conf: min_power_limit=" + std::to_string(site.min_power_limit_w) +
                  " is above max_power_limit=" + std::to_string(site.max_power_limit_w));
  }
  if (default_text && *default_text != "none") {
    const std::uint32_t watts = parse_watts_arg("default_power_limit", *default_text);
    if (watts < site.min_power_limit_w || watts > site.max_power_limit_w) {
      throw invalid("zeus plugstack.conf: default_power_limit=" + shown(*default_text) +
                    " is outside the allowed range " + describe_range(site));
    }
    site.default_power_limit_w = watts;
  }
  return site;
}

PowerLimitRequest parse_power_limit_option(std::string_view value, const SiteConfig& site) {
  const std::string quoted = shown(value);
  const std::string range = describe_range(site);
  if (value == "off") {
    if (!site.allow_off) {
      throw invalid(
          "--zeus-power-limit=off: this cluster does not allow jobs without a GPU "
          "power limit; give whole watts in " +
          range);
    }
    return PowerLimitRequest{.off = true};
  }
  std::string_view number = value;
  if (!number.empty() && (number.back() == 'W' || number.back() == 'w')) {
    number.remove_suffix(1);
  }
  const auto watts = parse_unsigned(number);
  if (!watts) {
    throw invalid("--zeus-power-limit=" + quoted + ": expected whole watts in " + range +
                  (site.allow_off ? " or off" : "") +
                  ", e.g. --zeus-power-limit=" + std::to_string(site.max_power_limit_w));
  }
  if (*watts < site.min_power_limit_w || *watts > site.max_power_limit_w) {
    throw invalid("--zeus-power-limit=" + quoted + ": " + std::to_string(*watts) +
                  " W is outside the range this cluster allows, " + range);
  }
  return PowerLimitRequest{.off = false, .watts = static_cast<std::uint32_t>(*watts)};
}

std::optional<std::uint32_t> effective_cap_w(const std::optional<PowerLimitRequest>& requested,
                                             const SiteConfig& site) {
  if (requested) {
    if (requested->off) {
      return std::nullopt;
    }
    return requested->watts;
  }
  return site.default_power_limit_w;
}

}  // namespace zeus::slurm
