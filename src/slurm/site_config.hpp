// The Slurm plugin's settings: the site's arguments from plugstack.conf and the user's options
// (docs/slurm.md, "plugstack.conf" and "Options"). Pure parsing: every mistake is a zeus::Error
// (kInvalidArgument) whose text names the argument or option, what was wrong and what is allowed,
// so that srun/sbatch/salloc refuse a job at submission with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/zeusd_config.hpp"

namespace zeus::slurm {

// A power limit the user asked for: off (no cap) or a value in watts.
struct PowerLimitRequest {
  bool off = false;
  std::uint32_t watts = 0;  // when !off
  bool operator==(const PowerLimitRequest&) const = default;
};

// The site's arguments, `key=value` words after the plugin's path in plugstack.conf.
struct SiteConfig {
  // The allowed range of --zeus-power-limit, in watts (min_power_limit=, max_power_limit=).
  std::uint32_t min_power_limit_w = 100;
  std::uint32_t max_power_limit_w = 1000;
  // The cap of a job that gives no --zeus-power-limit (default_power_limit=W|none); a user's
  // --zeus-power-limit=off lifts it unless allow_off=no.
  std::optional<std::uint32_t> default_power_limit_w;
  bool allow_off = true;
  // How to reach zeusd: zeusd_socket=PATH (default /run/zeusd/zeusd.sock) or
  // zeusd_host_port=HOST:PORT, and zeusd_token_file=PATH (read by root at step start).
  device::ZeusdConfig zeusd;
  std::optional<std::string> zeusd_token_file;
  // Where steps leave their state (caps to restore, energy so far, for the epilog and the
  // exporter): state_dir=PATH, default /run/zeus-slurm.
  std::string state_dir = "/run/zeus-slurm";
  // Whether each step's energy goes into the job's AdminComment (admin_comment=yes|no).
  bool admin_comment = true;
  // How often the power of a GPU without an energy counter is read (poll_interval=MS, 10-10000).
  double poll_interval_s = 0.1;
  // How often a running step's record so far goes into AdminComment (update_interval=S, 0: only
  // at its end). A job cancelled before its steps end keeps the last one.
  double update_interval_s = 60.0;
  // The most steps recorded one by one in AdminComment; later ones are summed (max_steps=N).
  std::uint32_t max_recorded_steps = 256;
};

// Parses plugstack.conf's arguments. Unknown keys, a missing '=', a number out of range, a
// default outside [min, max] or min > max are errors naming the argument.
SiteConfig parse_site_args(const std::vector<std::string>& args);

// Parses the value of --zeus-power-limit against the site's range: "off" (when allowed) or whole
// watts, optionally followed by "W" ("250", "250W"). Errors name the option and the range.
PowerLimitRequest parse_power_limit_option(std::string_view value, const SiteConfig& site);

// The cap a step gets: the user's request when there is one, else the site default.
std::optional<std::uint32_t> effective_cap_w(const std::optional<PowerLimitRequest>& requested,
                                             const SiteConfig& site);

// "100-700 W", for messages.
std::string describe_range(const SiteConfig& site);

}  // namespace zeus::slurm
