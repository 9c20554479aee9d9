// The wire format's models: requests and responses read from JSON with the reference's lax rules
// and constraints (every bad field listed), and written in its key order.
#include "zeus/bso/wire.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <limits>
#include <set>

#include "bso/wire_text.hpp"
#include "common/text.hpp"
#include "common/utf8.hpp"

namespace zeus::bso {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Collects every bad field of one object, like pydantic, then throws them together.
class Reader {
 public:
  Reader(const json& body, std::string where) : body_(body), where_(std::move(where)) {
    if (body_.is_null()) {
      add({where_}, "field required", "value_error.missing");
      finish();
    }
    if (!body_.is_object()) {
      add({where_}, "value is not a valid dict", "type_error.dict");
      finish();
    }
  }

  void add(json loc, std::string msg, std::string type, json ctx = nullptr) {
    errors_.push_back({std::move(loc), std::move(msg), std::move(type), std::move(ctx)});
  }
  void add_field(const std::string& key, std::string msg, std::string type, json ctx = nullptr) {
    add({where_, key}, std::move(msg), std::move(type), std::move(ctx));
  }
  void add_root(std::string msg) { add({where_, "__root__"}, std::move(msg), "value_error"); }

  // The raw value, or nullptr after recording "field required" (when required).
  const json* get(const std::string& key, bool required) {
    const auto found = body_.find(key);
    if (found == body_.end()) {
      if (required) {
        add_field(key, "field required", "value_error.missing");
      }
      return nullptr;
    }
    return &*found;
  }

  std::optional<double> number(const std::string& key, const json& value) {
    if (value.is_number()) {
      return value.get<double>();
    }
    if (value.is_boolean()) {
      return value.get<bool>() ? 1.0 : 0.0;
    }
    if (value.is_string()) {
      const std::string text = value.get<std::string>();
      char* end = nullptr;
      errno = 0;
      const double parsed = std::strtod(text.c_str(), &end);
      if (!text.empty() && end == text.c_str() + text.size() && !std::isspace(text.front())) {
        if (errno == ERANGE && std::isinf(parsed)) {
          add_field(key, out_of_range_message(text), "value_error.number.out_of_range",
                    {{"limit_value", std::numeric_limits<double>::max()}});
          return std::nullopt;
        }
        return parsed;
      }
    }
    add_field(key, "value is not a valid float", "type_error.float");
    return std::nullopt;
  }

  std::optional<long long> integer(const json& value, const json& loc) {
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) {
      add(loc, "ensure this value is less than or equal to 9223372036854775807",
          "value_error.number.not_le", {{"limit_value", std::numeric_limits<long long>::max()}});
      return std::nullopt;
    }
    if (value.is_number_integer()) {
      return value.get<long long>();
    }
    if (value.is_number_float()) {
      const double v = value.get<double>();
      if (std::isfinite(v) && std::fabs(v) < 9.2e18) {
        return static_cast<long long>(v);  // pydantic v1 truncates
      }
    } else if (value.is_boolean()) {
      return value.get<bool>() ? 1 : 0;
    } else if (value.is_string()) {
      const std::string text = value.get<std::string>();
      char* end = nullptr;
      errno = 0;
      const long long parsed = std::strtoll(text.c_str(), &end, 10);
      if (!text.empty() && end == text.c_str() + text.size() && errno == 0 &&
          !std::isspace(text.front())) {
        return parsed;
      }
    }
    add(loc, "value is not a valid integer", "type_error.integer");
    return std::nullopt;
  }

  std::optional<int> int32(const std::string& key, const json& value) {
    const auto parsed = integer(value, json{where_, key});
    if (!parsed) {
      return std::nullopt;
    }
    if (*parsed < std::numeric_limits<int>::min() || *parsed > std::numeric_limits<int>::max()) {
      add_field(key, "ensure this value fits in 32 bits", "value_error.number.not_le",
                {{"limit_value", std::numeric_limits<int>::max()}});
      return std::nullopt;
    }
    return static_cast<int>(*parsed);
  }

  std::optional<std::string> string(const std::string& key, const json& value) {
    if (value.is_string()) {
      return value.get<std::string>();
    }
    if (value.is_number_integer()) {
      return value.dump();  // unsigned values above 2^63 too
    }
    if (value.is_number_float()) {
      return python_float_repr(value.get<double>());
    }
    add_field(key, "str type expected", "type_error.str");
    return std::nullopt;
  }

  std::optional<bool> boolean(const std::string& key, const json& value) {
    if (value.is_boolean()) {
      return value.get<bool>();
    }
    if (value.is_number_integer()) {
      const auto v = value.get<long long>();
      if (v == 0 || v == 1) {
        return v == 1;
      }
    }
    if (value.is_string()) {
      const std::string word = text::ascii_lower(value.get<std::string>());
      for (const char* yes : {"1", "on", "t", "true", "y", "yes"}) {
        if (word == yes) {
          return true;
        }
      }
      for (const char* no : {"0", "off", "f", "false", "n", "no"}) {
        if (word == no) {
          return false;
        }
      }
    }
    add_field(key, "value could not be parsed to a boolean", "type_error.bool");
    return std::nullopt;
  }

  // Required (or defaulted) typed fields. A null value for a non-optional field is an error.
  template <typename T, typename Parse>
  void field(const std::string& key, T& out, bool required, Parse parse) {
    const json* value = get(key, required);
    if (value == nullptr) {
      return;
    }
    if (value->is_null()) {
      add_field(key, "none is not an allowed value", "type_error.none.not_allowed");
      return;
    }
    if (auto parsed = parse(key, *value)) {
      out = *parsed;
      parsed_.insert(key);
    }
  }
  template <typename T, typename Parse>
  void optional_field(const std::string& key, std::optional<T>& out, Parse parse) {
    const json* value = get(key, false);
    if (value == nullptr) {
      return;  // keep the default
    }
    if (value->is_null()) {
      out.reset();
      return;
    }
    if (auto parsed = parse(key, *value)) {
      out = *parsed;
      parsed_.insert(key);
    }
  }
  // Constraints apply to fields given and well-typed (a missing field keeps its default).
  bool parsed(const std::string& key) const { return parsed_.count(key) != 0; }

  void real(const std::string& key, double& out, bool required) {
    field(key, out, required, [this](const std::string& k, const json& v) { return number(k, v); });
  }
  void whole(const std::string& key, int& out, bool required) {
    field(key, out, required, [this](const std::string& k, const json& v) { return int32(k, v); });
  }
  void text(const std::string& key, std::string& out, bool required) {
    field(key, out, required, [this](const std::string& k, const json& v) { return string(k, v); });
  }
  void flag(const std::string& key, bool& out, bool required) {
    field(key, out, required,
          [this](const std::string& k, const json& v) { return boolean(k, v); });
  }

  void greater_than(const std::string& key, double value, double limit) {
    if (!parsed(key)) {
      return;
    }
    if (!(value > limit)) {
      add_field(key, "ensure this value is greater than " + limit_text(limit),
                "value_error.number.not_gt", {{"limit_value", limit_json(limit)}});
    }
  }
  void at_least(const std::string& key, double value, double limit) {
    if (!parsed(key)) {
      return;
    }
    if (!(value >= limit)) {
      add_field(key, "ensure this value is greater than or equal to " + limit_text(limit),
                "value_error.number.not_ge", {{"limit_value", limit_json(limit)}});
    }
  }
  void at_most(const std::string& key, double value, double limit) {
    if (!parsed(key)) {
      return;
    }
    if (!(value <= limit)) {
      add_field(key, "ensure this value is less than or equal to " + limit_text(limit),
                "value_error.number.not_le", {{"limit_value", limit_json(limit)}});
    }
  }
  void finite(const std::string& key, double value) {
    if (!parsed(key)) {
      return;
    }
    if (!std::isfinite(value)) {
      add_field(key, "ensure this value is a finite number", "value_error.number.not_finite");
    }
  }

  bool ok() const { return errors_.empty(); }
  void finish() {
    if (!errors_.empty()) {
      throw ValidationError(std::move(errors_));
    }
  }
  const std::string& where() const { return where_; }

 private:
  static std::string limit_text(double limit) {
    return limit == std::floor(limit) ? std::to_string(static_cast<long long>(limit))
                                      : python_float_repr(limit);
  }
  static json limit_json(double limit) {
    return limit == std::floor(limit) ? json(static_cast<long long>(limit)) : json(limit);
  }

  const json& body_;
  std::string where_;
  std::vector<FieldError> errors_;
  std::set<std::string> parsed_;
};

void read_trial_id(Reader& in, TrialId& trial) {
  in.text("job_id", trial.job_id, true);
  in.whole("batch_size", trial.batch_size, true);
  in.whole("trial_number", trial.trial_number, true);
}

std::string int_list_repr(const std::vector<int>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(values[i]);
  }
  return text + "]";
}

}  // namespace

JobSpec job_spec_from_json(const nlohmann::json& body, const std::string& where,
                           bool check_job_ids) {
  JobSpec spec;
  Reader in(body, where);
  in.real("max_power", spec.max_power_w, true);
  in.whole("number_of_gpus", spec.number_of_gpus, true);
  in.text("gpu_model", spec.gpu_model, true);
  in.optional_field("job_id", spec.job_id,
                    [&in](const std::string& k, const json& v) { return in.string(k, v); });
  in.text("job_id_prefix", spec.job_id_prefix, true);
  bool have_batch_sizes = false;
  if (const json* value = in.get("batch_sizes", true)) {
    if (!value->is_array()) {
      in.add_field("batch_sizes", "value is not a valid list", "type_error.list");
    } else if (check_job_ids && value->size() > kMaxBatchSizes) {
      in.add_field("batch_sizes",
                   "ensure this value has at most " + std::to_string(kMaxBatchSizes) +
                       " items (it has " + std::to_string(value->size()) + ")",
                   "value_error.list.max_items", {{"limit_value", kMaxBatchSizes}});
    } else {
      have_batch_sizes = true;
      for (std::size_t i = 0; i < value->size(); ++i) {
        const auto parsed = in.integer((*value)[i], json{where, "batch_sizes", i});
        if (!parsed) {
          have_batch_sizes = false;
        } else if (*parsed <= 0 || *parsed > std::numeric_limits<int>::max()) {
          in.add(json{where, "batch_sizes", i}, "ensure this value is greater than 0",
                 "value_error.number.not_gt", {{"limit_value", 0}});
          have_batch_sizes = false;
        } else {
          spec.batch_sizes.push_back(static_cast<int>(*parsed));
        }
      }
      if (value->empty()) {
        in.add_field("batch_sizes", "ensure this value has at least 1 items",
                     "value_error.list.min_items", {{"limit_value", 1}});
        have_batch_sizes = false;
      }
    }
  }
  in.whole("default_batch_size", spec.default_batch_size, true);
  in.real("eta_knob", spec.eta_knob, false);
  in.optional_field("beta_knob", spec.beta_knob,
                    [&in](const std::string& k, const json& v) { return in.number(k, v); });
  in.real("target_metric", spec.target_metric, false);
  in.flag("higher_is_better_metric", spec.higher_is_better_metric, false);
  in.whole("max_epochs", spec.max_epochs, false);
  in.whole("num_pruning_rounds", spec.num_pruning_rounds, false);
  in.whole("window_size", spec.window_size, false);
  in.real("mab_prior_mean", spec.mab_prior_mean, false);
  in.real("mab_prior_precision", spec.mab_prior_precision, false);
  in.whole("mab_num_explorations", spec.mab_num_explorations, false);
  in.optional_field("mab_seed", spec.mab_seed, [&in, &where](const std::string& k, const json& v) {
    return in.integer(v, json{where, k});
  });
  in.optional_field("policy", spec.policy,
                    [&in](const std::string& k, const json& v) { return in.string(k, v); });

  // Constraints (only on fields that parsed).
  in.greater_than("max_power", spec.max_power_w, 0);
  in.finite("max_power", spec.max_power_w);
  in.greater_than("number_of_gpus", spec.number_of_gpus, 0);
  if (in.get("gpu_model", false) != nullptr && spec.gpu_model.empty()) {
    in.add_field("gpu_model", "ensure this value has at least 1 characters",
                 "value_error.any_str.min_length", {{"limit_value", 1}});
  }
  if (check_job_ids && spec.window_size > kMaxWindowSize) {
    in.add_field("window_size",
                 "ensure this value is less than or equal to " + std::to_string(kMaxWindowSize) +
                     " (the runs a batch size's window keeps; 0 keeps every run in statistics)",
                 "value_error.number.not_le", {{"limit_value", kMaxWindowSize}});
  }
  if (check_job_ids && spec.gpu_model.size() > kMaxGpuModelBytes) {
    in.add_field(
        "gpu_model",
        "ensure this value has at most " + std::to_string(kMaxGpuModelBytes) + " characters",
        "value_error.any_str.max_length", {{"limit_value", kMaxGpuModelBytes}});
  }
  if (in.get("job_id_prefix", false) != nullptr && spec.job_id_prefix.empty()) {
    in.add_field("job_id_prefix", "ensure this value has at least 1 characters",
                 "value_error.any_str.min_length", {{"limit_value", 1}});
  }
  if (check_job_ids) {
    // Ids must come back intact through URLs (GET /jobs/{job_id}, ?job_id=) and logs.
    if (spec.job_id) {
      if (const std::string problem = job_id_problem(*spec.job_id); !problem.empty()) {
        in.add_field("job_id",
                     "job_id " + problem +
                         (spec.job_id->empty() ? "; send null to have the server assign one" : ""),
                     "value_error.job_id");
      }
    }
    if (!spec.job_id_prefix.empty()) {
      if (const std::string problem = job_id_problem(spec.job_id_prefix, kMaxJobIdPrefixBytes);
          !problem.empty()) {
        in.add_field("job_id_prefix",
                     "job_id_prefix " + problem +
                         (spec.job_id_prefix.size() > kMaxJobIdPrefixBytes
                              ? " (generated ids append 9 bytes, \"-<8 hex digits>\")"
                              : ""),
                     "value_error.job_id");
      }
    }
  }
  in.greater_than("default_batch_size", spec.default_batch_size, 0);
  in.at_least("eta_knob", spec.eta_knob, 0);
  in.at_most("eta_knob", spec.eta_knob, 1);
  if (spec.beta_knob) {
    in.greater_than("beta_knob", *spec.beta_knob, 0);
    in.finite("beta_knob", *spec.beta_knob);
  }
  in.finite("target_metric", spec.target_metric);
  in.greater_than("max_epochs", spec.max_epochs, 0);
  // The reference accepts 0 rounds and then fails when building the bandit: refuse it here.
  in.at_least("num_pruning_rounds", spec.num_pruning_rounds, 1);
  in.finite("mab_prior_mean", spec.mab_prior_mean);
  in.at_least("mab_prior_precision", spec.mab_prior_precision, 0);
  in.finite("mab_prior_precision", spec.mab_prior_precision);
  in.at_least("mab_num_explorations", spec.mab_num_explorations, 0);
  in.finish();

  // Root validators, as the reference's (after the fields).
  if (have_batch_sizes) {
    std::sort(spec.batch_sizes.begin(), spec.batch_sizes.end());
    if (std::adjacent_find(spec.batch_sizes.begin(), spec.batch_sizes.end()) !=
        spec.batch_sizes.end()) {
      in.add_root("batch_sizes(" + int_list_repr(spec.batch_sizes) +
                  ") contains duplicates; list each batch size once.");
    } else if (!std::binary_search(spec.batch_sizes.begin(), spec.batch_sizes.end(),
                                   spec.default_batch_size)) {
      in.add_root("Default BS(" + std::to_string(spec.default_batch_size) +
                  ") not in batch_sizes(" + int_list_repr(spec.batch_sizes) + ").");
    }
  }
  if (spec.job_id && spec.job_id->rfind(spec.job_id_prefix, 0) != 0) {
    in.add_root("job_id(" + *spec.job_id + ") must start with job_id_prefix(" + spec.job_id_prefix +
                ").");
  }
  in.finish();
  return spec;
}

TrialId trial_id_from_json(const nlohmann::json& body, const std::string& where) {
  TrialId trial;
  Reader in(body, where);
  read_trial_id(in, trial);
  in.finish();
  return trial;
}

TrainingResult training_result_from_json(const nlohmann::json& body, const std::string& where) {
  TrainingResult result;
  Reader in(body, where);
  read_trial_id(in, result.trial);
  in.real("time", result.time_s, true);
  in.real("energy", result.energy_j, true);
  in.real("metric", result.metric, true);
  in.whole("current_epoch", result.current_epoch, true);
  in.finish();
  // Beyond the reference: a cost needs finite, non-negative time and energy.
  in.at_least("time", result.time_s, 0);
  in.finite("time", result.time_s);
  in.at_least("energy", result.energy_j, 0);
  in.finite("energy", result.energy_j);
  in.finite("metric", result.metric);
  in.greater_than("current_epoch", result.current_epoch, 0);
  in.finish();
  return result;
}

ReportResponse report_response_from_json(const nlohmann::json& body) {
  ReportResponse response;
  Reader in(body, "response");
  in.flag("stop_train", response.stop_train, true);
  in.flag("converged", response.converged, true);
  in.text("message", response.message, true);
  in.finish();
  return response;
}

nlohmann::ordered_json to_json(const JobSpec& spec) {
  ordered_json out;
  out["max_power"] = spec.max_power_w;
  out["number_of_gpus"] = spec.number_of_gpus;
  out["gpu_model"] = spec.gpu_model;
  out["job_id"] = spec.job_id ? ordered_json(*spec.job_id) : ordered_json(nullptr);
  out["job_id_prefix"] = spec.job_id_prefix;
  out["batch_sizes"] = spec.batch_sizes;
  out["default_batch_size"] = spec.default_batch_size;
  out["eta_knob"] = spec.eta_knob;
  out["beta_knob"] = spec.beta_knob ? ordered_json(*spec.beta_knob) : ordered_json(nullptr);
  out["target_metric"] = spec.target_metric;
  out["higher_is_better_metric"] = spec.higher_is_better_metric;
  out["max_epochs"] = spec.max_epochs;
  out["num_pruning_rounds"] = spec.num_pruning_rounds;
  out["window_size"] = spec.window_size;
  out["mab_prior_mean"] = spec.mab_prior_mean;
  out["mab_prior_precision"] = spec.mab_prior_precision;
  out["mab_num_explorations"] = spec.mab_num_explorations;
  out["mab_seed"] = spec.mab_seed ? ordered_json(*spec.mab_seed) : ordered_json(nullptr);
  if (spec.policy) {
    out["policy"] = *spec.policy;
  }
  return out;
}

nlohmann::ordered_json to_json(const TrialId& trial) {
  ordered_json out;
  out["job_id"] = trial.job_id;
  out["batch_size"] = trial.batch_size;
  out["trial_number"] = trial.trial_number;
  return out;
}

nlohmann::ordered_json to_json(const TrainingResult& result) {
  ordered_json out = to_json(result.trial);
  out["time"] = result.time_s;
  out["energy"] = result.energy_j;
  out["metric"] = result.metric;
  out["current_epoch"] = result.current_epoch;
  return out;
}

nlohmann::ordered_json to_json(const ReportResponse& response) {
  ordered_json out;
  out["stop_train"] = response.stop_train;
  out["converged"] = response.converged;
  out["message"] = response.message;
  return out;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  // fmt's shortest round-trip form matches Python's repr except that Python always shows a
  // decimal point ("44000.0").
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) {
    text += ".0";
  }
  return text;
}

}  // namespace zeus::bso
