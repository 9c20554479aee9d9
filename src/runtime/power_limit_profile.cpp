#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/output_file.hpp"
#include "common/text.hpp"
#include "zeus/common/error.hpp"
#include "zeus/runtime/power_limit_optimizer.hpp"

namespace zeus::runtime {

std::string power_limit_measurement_problem(const optimizer::PowerLimitMeasurement& measurement) {
  if (measurement.power_limit_w <= 0) {
    return "power_limit " + std::to_string(measurement.power_limit_w) +
           " W is not a positive number of watts";
  }
  if (!(measurement.energy_j > 0.0) || !std::isfinite(measurement.energy_j) ||
      !(measurement.time_s > 0.0) || !std::isfinite(measurement.time_s)) {
    return fmt::format("energy ({:g} J) and time ({:g} s) must be positive and finite",
                       measurement.energy_j, measurement.time_s);
  }
  return "";
}

PowerLimitProfile load_power_limit_profile(const std::filesystem::path& path,
                                           std::vector<std::string>* skipped) {
  const std::string text = text::read_file(path, "power-limit profile");
  const std::string where = "power-limit profile " + path.string() + ": ";
  // Where the parser was, for a value it cannot hold (1e999 overflows a double): the last key
  // and, inside "measurements", which measurement.
  std::string last_key;
  bool in_measurements = false;
  int measurement_at = -1;
  const auto track = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::key && parsed.is_string()) {
      last_key = parsed.get<std::string>();
    } else if (event == Event::array_start && depth == 1 && last_key == "measurements") {
      in_measurements = true;
    } else if (event == Event::array_end && depth == 1) {
      in_measurements = false;
    } else if (event == Event::object_start && depth == 2 && in_measurements) {
      ++measurement_at;
      last_key.clear();
    }
    return true;
  };
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text, track);
  } catch (const nlohmann::json::exception& error) {
    std::string field;
    if (in_measurements && measurement_at >= 0) {
      field = " in measurement " + std::to_string(measurement_at) +
              (last_key.empty() ? std::string() : ", \"" + last_key + "\"");
    } else if (!last_key.empty()) {
      field = " at \"" + last_key + "\"";
    }
    throw Error(ErrorKind::kInvalidArgument,
                where + "not valid JSON (" +
                    std::string(zeus::text::json_error_text(error.what())) + ")" + field);
  }
  if (!document.is_object() || !document.contains("measurements") ||
      !document["measurements"].is_array()) {
    throw Error(
        ErrorKind::kInvalidArgument,
        where + "expected {\"measurements\": [{\"power_limit\", \"energy\", \"time\"}, ...]}");
  }
  PowerLimitProfile profile;
  std::map<int, std::size_t> seen;  // power limit (W) -> the measurement that has it
  std::size_t index = 0;
  for (const auto& entry : document["measurements"]) {
    const std::size_t this_index = index++;
    const std::string at = where + "measurement " + std::to_string(this_index) + ": ";
    // A bad entry: an error, or (with `skipped`) a message and the next entry.
    const auto refuse = [&](const std::string& why) {
      if (skipped == nullptr) {
        throw Error(ErrorKind::kInvalidArgument, at + why);
      }
      skipped->push_back(at + why);
    };
    if (!entry.is_object() || !entry.contains("power_limit") || !entry.contains("energy") ||
        !entry.contains("time")) {
      refuse("needs power_limit, energy and time");
      continue;
    }
    if (!entry["power_limit"].is_number_integer() || !entry["energy"].is_number() ||
        !entry["time"].is_number()) {
      refuse("power_limit must be an integer (W), energy and time numbers");
      continue;
    }
    // get<int>() would wrap an integer that does not fit (4294967496 read as 200 W).
    const nlohmann::json& limit = entry["power_limit"];
    constexpr std::int64_t kMaxW = std::numeric_limits<int>::max();
    const bool fits =
        limit.is_number_unsigned()
            ? limit.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxW)
            : limit.get<std::int64_t>() >= -kMaxW && limit.get<std::int64_t>() <= kMaxW;
    if (!fits) {
      refuse("power_limit " + limit.dump() +
             " is out of range; a power limit is a positive whole number of watts");
      continue;
    }
    optimizer::PowerLimitMeasurement measurement;
    measurement.power_limit_w = limit.get<int>();
    measurement.energy_j = entry["energy"].get<double>();
    measurement.time_s = entry["time"].get<double>();
    if (const std::string problem = power_limit_measurement_problem(measurement);
        !problem.empty()) {
      refuse(problem);
      continue;
    }
    // Two rows for one limit would leave every selector to pick whichever it meets first.
    const auto [previous, fresh] = seen.emplace(measurement.power_limit_w, this_index);
    if (!fresh) {
      refuse("power_limit " + std::to_string(measurement.power_limit_w) +
             " W is measured twice (also measurement " + std::to_string(previous->second) +
             "); keep one of them");
      continue;
    }
    profile.measurements.push_back(measurement);
  }
  if (profile.measurements.empty() && skipped == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, where + "has no measurement");
  }
  return profile;
}

void save_power_limit_profile(const std::filesystem::path& path, const PowerLimitProfile& profile) {
  const std::string where = "power-limit profile " + path.string() + ": ";
  if (profile.measurements.empty()) {
    throw Error(ErrorKind::kInvalidArgument, where + "no measurement to save");
  }
  std::map<int, std::size_t> seen;  // the checks of load_power_limit_profile, before writing
  for (std::size_t i = 0; i < profile.measurements.size(); ++i) {
    const optimizer::PowerLimitMeasurement& m = profile.measurements[i];
    std::string problem = power_limit_measurement_problem(m);
    if (const auto [previous, fresh] = seen.emplace(m.power_limit_w, i);
        problem.empty() && !fresh) {
      problem = "power_limit " + std::to_string(m.power_limit_w) +
                " W is measured twice (also measurement " + std::to_string(previous->second) + ")";
    }
    if (!problem.empty()) {
      throw Error(ErrorKind::kInvalidArgument, where + "measurement " + std::to_string(i) + ": " +
                                                   problem +
                                                   "; it would not load, so nothing "
                                                   "is written");
    }
  }
  nlohmann::json document;
  document["measurements"] = nlohmann::json::array();
  for (const auto& m : profile.measurements) {
    document["measurements"].push_back(
        {{"power_limit", m.power_limit_w}, {"energy", m.energy_j}, {"time", m.time_s}});
  }
  // Put in place whole: a run killed while saving must not leave a truncated profile that the
  // next run would refuse (docs/cli.md, "Input and output files").
  OutputFileOptions options;
  options.what = "the power-limit profile";
  options.create_parent_directories = true;
  write_output_file(path, document.dump(4) + "\n", std::move(options));
}

}  // namespace zeus::runtime
