// A step's record in AdminComment, and its summary (step_record.hpp).
#include "slurm/step_record.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

namespace zeus::slurm {

using nlohmann::json;

namespace {

// Slurm's special step ids (slurm.h: SLURM_BATCH_SCRIPT and friends).
constexpr std::uint32_t kPendingStep = 0xfffffffd;
constexpr std::uint32_t kExternStep = 0xfffffffc;
constexpr std::uint32_t kBatchStep = 0xfffffffb;
constexpr std::uint32_t kInteractiveStep = 0xfffffffa;

// The deepest nesting below the top object of a comment this rewrites: a deeper one is left alone
// (nlohmann's dump recurses once a level, and 100,000 levels overflow the stack).
constexpr int kMaxCommentDepth = 100;

// To a multiple of `unit` (0.001), so that JSON shows 1.015 rather than 1.0150000000000001.
double rounded(double value, double unit) {
  return std::round(value / unit) / (1.0 / unit);
}

json to_json(const StepRecord& record) {
  json gpus = json::object();
  for (const auto& [index, usage] : record.gpus) {
    json gpu = {{"energy_j", rounded(usage.energy_j, 0.001)},
                {"avg_power_w", rounded(usage.average_power_w, 0.001)}};
    gpu["power_limit_w"] = usage.power_limit_w ? json(*usage.power_limit_w) : json(nullptr);
    if (usage.prior_power_limit_w) {
      gpu["prior_power_limit_w"] = *usage.prior_power_limit_w;
    }
    gpus[std::to_string(index)] = std::move(gpu);
  }
  json out = {{"start", rounded(record.start_unix_s, 0.001)},
              {"duration_s", rounded(record.duration_s, 0.001)},
              {"energy_j", rounded(record.energy_j(), 0.001)},
              {"source", record.source},
              {"gpus", std::move(gpus)}};
  if (record.note) {
    out["note"] = *record.note;
  }
  if (record.partial) {
    out["partial"] = true;
  }
  return out;
}

double number_or(const json& object, const char* key, double fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

std::optional<std::uint32_t> watts_or_null(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) {
    return std::nullopt;
  }
  return it->get<std::uint32_t>();
}

}  // namespace

double StepRecord::energy_j() const {
  double total = 0.0;
  for (const auto& [index, usage] : gpus) {
    total += usage.energy_j;
  }
  return total;
}

std::string step_name(std::uint32_t step_id) {
  switch (step_id) {
    case kBatchStep:
      return "batch";
    case kExternStep:
      return "extern";
    case kInteractiveStep:
      return "interactive";
    case kPendingStep:
      return "pending";
    default:
      return std::to_string(step_id);
  }
}

namespace {

// An AdminComment as a JSON object, or nullopt: not JSON, not an object, or nested deeper than
// kMaxCommentDepth.
std::optional<json> parse_comment(const std::string& text) {
  bool too_deep = false;
  json comment;
  try {
    comment = json::parse(text, [&](int depth, json::parse_event_t, json&) {
      too_deep = too_deep || depth > kMaxCommentDepth;
      return true;
    });
  } catch (const json::exception&) {
    return std::nullopt;
  }
  if (too_deep || !comment.is_object()) {
    return std::nullopt;
  }
  return comment;
}

}  // namespace

std::optional<std::string> merge_admin_comment(const std::string& existing,
                                               const StepRecord& record, std::uint32_t max_steps) {
  json comment = json::object();
  if (existing.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto parsed = parse_comment(existing);
    if (!parsed) {
      return std::nullopt;
    }
    comment = std::move(*parsed);
  }
  json& zeus = comment["zeus"];
  if (!zeus.is_object()) {
    zeus = json::object();
  }
  zeus["version"] = 1;
  json& steps = zeus["steps"];
  if (!steps.is_object()) {
    steps = json::object();
  }
  if (steps.contains(record.step) || steps.size() < max_steps) {
    json& step = steps[record.step];
    if (!step.is_object()) {
      step = json::object();
    }
    step[record.node] = to_json(record);
  } else {
    json& other = zeus["other_steps"];
    if (!other.is_object()) {
      other = json::object();
    }
    const auto count = other.find("count");
    other["count"] =
        (count != other.end() && count->is_number_unsigned() ? count->get<std::uint64_t>()
                                                             : std::uint64_t{0}) +
        1;
    other["energy_j"] = rounded(number_or(other, "energy_j", 0.0) + record.energy_j(), 0.001);
  }
  return comment.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<StepRecord> find_step_record(const std::string& admin_comment,
                                           const std::string& step, const std::string& node) {
  const auto comment = parse_comment(admin_comment);
  if (!comment) {
    return std::nullopt;
  }
  const json* found = &*comment;
  for (const std::string& key : {std::string("zeus"), std::string("steps"), step, node}) {
    if (!found->is_object() || !found->contains(key)) {
      return std::nullopt;
    }
    found = &(*found)[key];
  }
  if (!found->is_object()) {
    return std::nullopt;
  }
  StepRecord record;
  record.step = step;
  record.node = node;
  record.start_unix_s = number_or(*found, "start", 0.0);
  record.duration_s = number_or(*found, "duration_s", 0.0);
  if (const auto it = found->find("source"); it != found->end() && it->is_string()) {
    record.source = it->get<std::string>();
  }
  if (const auto it = found->find("note"); it != found->end() && it->is_string()) {
    record.note = it->get<std::string>();
  }
  if (const auto it = found->find("partial"); it != found->end() && it->is_boolean()) {
    record.partial = it->get<bool>();
  }
  if (const auto gpus = found->find("gpus"); gpus != found->end() && gpus->is_object()) {
    for (const auto& [key, gpu] : gpus->items()) {
      if (!gpu.is_object()) {
        continue;
      }
      GpuUsage usage;
      usage.energy_j = number_or(gpu, "energy_j", 0.0);
      usage.average_power_w = number_or(gpu, "avg_power_w", 0.0);
      usage.power_limit_w = watts_or_null(gpu, "power_limit_w");
      usage.prior_power_limit_w = watts_or_null(gpu, "prior_power_limit_w");
      try {
        record.gpus[std::stoi(key)] = usage;
      } catch (const std::exception&) {
        continue;
      }
    }
  }
  return record;
}

std::string summary_text(std::uint32_t job_id, const StepRecord& record) {
  std::string out =
      fmt::format("zeus: step {}.{} on {}: {:.2f} s{}, {} GPU{}, {:.1f} J\n", job_id, record.step,
                  record.node, record.duration_s, record.partial ? " so far (still running)" : "",
                  record.gpus.size(), record.gpus.size() == 1 ? "" : "s", record.energy_j());
  for (const auto& [index, usage] : record.gpus) {
    out += fmt::format("  GPU {}: {:.1f} J, {:.1f} W average, ", index, usage.energy_j,
                       usage.average_power_w);
    out += usage.power_limit_w ? fmt::format("capped at {} W\n", *usage.power_limit_w)
                               : std::string("not capped\n");
  }
  if (record.note) {
    out += "  note: " + *record.note + "\n";
  }
  return out;
}

}  // namespace zeus::slurm
