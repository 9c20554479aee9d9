#include "cli/sim/sim_args.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>
#include <unordered_set>

#include "common/csv.hpp"
#include "common/text.hpp"
#include "sim/limits.hpp"
#include "zeus/common/error.hpp"
#include "zeus/sim/trace.hpp"

namespace zeus::cli::sim_args {

namespace {

// More seeds than this is a typo (e.g. 1-1000000000), not a simulation anyone waits for.
constexpr std::size_t kMaxSeeds = sim::limits::kMaxSeeds;

// One seed of `item` (the whole comma-separated item, for the message) in `text`.
std::uint64_t parse_seed(std::string_view digits, std::string_view item, std::string_view text) {
  std::uint64_t seed = 0;
  digits = zeus::text::trim(digits, " ");
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--seeds \"{}\": \"{}\" is neither a seed (a non-negative integer) "
                            "nor a range of seeds; expected seeds and ranges separated by commas, "
                            "e.g. 1-50, 7 or 1,2,5-9",
                            text, item));
  }
  return seed;
}

}  // namespace

// "a,b, c" -> {"a", "b", "c"}; an empty item is an error naming `flag`.
std::vector<std::string> split_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> items;
  for (const std::string_view item : zeus::text::split_trimmed(text, ',', false, " ")) {
    if (item.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{} \"{}\": an item is empty; expected names separated by commas",
                              flag, text));
    }
    items.emplace_back(item);
  }
  return items;
}

// `text` is "all" or a comma-separated list of names from `valid`; returns them in the order of
// `valid`, without repeats.
std::vector<std::string> select_names(std::string_view text, const std::vector<std::string>& valid,
                                      std::string_view flag, std::string_view what) {
  const std::vector<std::string> requested = split_list(text, flag);
  if (std::find(requested.begin(), requested.end(), "all") != requested.end()) {
    return valid;
  }
  for (const std::string& name : requested) {
    if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: unknown {} \"{}\"; valid: {}, or all", flag, what, name,
                              fmt::join(valid, ", ")));
    }
  }
  std::vector<std::string> selected;
  for (const std::string& name : valid) {
    if (std::find(requested.begin(), requested.end(), name) != requested.end()) {
      selected.push_back(name);
    }
  }
  return selected;
}

// "1-50", "7", "1,2,5-9" -> the seeds, in the order given. Repeats and reversed ranges are errors.
std::vector<std::uint64_t> parse_seeds(std::string_view text) {
  std::vector<std::uint64_t> seeds;
  // A set for the repeats: a linear search per seed made --seeds 1-100000 take minutes.
  std::unordered_set<std::uint64_t> seen;
  const auto add = [&](std::uint64_t seed) {
    if (!seen.insert(seed).second) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--seeds \"{}\": seed {} is repeated", text, seed));
    }
    seeds.push_back(seed);
  };
  const auto too_many = [&] {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("--seeds \"{}\": more than {} seeds", text, kMaxSeeds));
  };
  for (const std::string& item : split_list(text, "--seeds")) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      add(parse_seed(item, item, text));
    } else {
      const std::uint64_t first = parse_seed(std::string_view(item).substr(0, dash), item, text);
      const std::uint64_t last = parse_seed(std::string_view(item).substr(dash + 1), item, text);
      if (first > last) {
        throw Error(ErrorKind::kInvalidArgument,
                    fmt::format("--seeds \"{}\": the range {}-{} is empty; write the smaller "
                                "seed first, e.g. {}-{}",
                                text, first, last, last, first));
      }
      if (last - first >= kMaxSeeds) {
        throw too_many();
      }
      for (std::uint64_t seed = first;; ++seed) {
        add(seed);
        if (seed == last) {
          break;
        }
      }
    }
    if (seeds.size() > kMaxSeeds) {
      throw too_many();
    }
  }
  return seeds;
}

std::vector<std::optional<double>> parse_target_metrics(std::string_view text,
                                                        const std::vector<std::string>& workloads) {
  std::vector<std::optional<double>> targets(workloads.size());
  if (text.empty()) {
    return targets;
  }
  const auto number = [&](std::string_view digits, std::string_view dataset) {
    const std::optional<double> value = csv::to_double(zeus::text::trim(digits, " "));
    if (!value || !std::isfinite(*value)) {
      throw Error(
          ErrorKind::kInvalidArgument,
          fmt::format("--target-metric \"{}\": \"{}\" is not a finite number{}", text, digits,
                      dataset.empty() ? "" : fmt::format(" (the target of {})", dataset)));
    }
    return *value;
  };
  if (text.find('=') == std::string_view::npos) {
    if (workloads.size() != 1) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--target-metric {}: one number, but {} workloads are selected; "
                              "select one with --workload, or name each, e.g. --target-metric "
                              "cifar100=0.65,imagenet=0.6",
                              text, workloads.size()));
    }
    targets[0] = number(text, "");
    return targets;
  }
  for (const std::string& item : split_list(text, "--target-metric")) {
    const auto equals = item.find('=');
    if (equals == std::string::npos) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--target-metric \"{}\": \"{}\" is not DATASET=TARGET", text, item));
    }
    const std::string dataset(zeus::text::trim(std::string_view(item).substr(0, equals), " "));
    const auto found = std::find(workloads.begin(), workloads.end(), dataset);
    if (found == workloads.end()) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--target-metric \"{}\": \"{}\" is not a selected workload "
                              "(selected: {})",
                              text, dataset, fmt::join(workloads, ", ")));
    }
    auto& target = targets[static_cast<std::size_t>(found - workloads.begin())];
    if (target) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("--target-metric \"{}\": {} is given twice", text, dataset));
    }
    target = number(std::string_view(item).substr(equals + 1), dataset);
  }
  return targets;
}

DriftSpec parse_drift(const std::string& text) {
  const auto fail = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument,
                 fmt::format("--drift \"{}\": {}; expected AT:HOW with AT the first recurrence "
                             "after the drift (from 1) and HOW best*F, best/F (the built-in "
                             "models' best batch size times or divided by F) or target=X, e.g. "
                             "--drift 40:best*4",
                             text, why));
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    throw fail("no ':'");
  }
  DriftSpec spec;
  const std::string_view at_text = zeus::text::trim(std::string_view(text).substr(0, colon), " ");
  const auto [end, ec] =
      std::from_chars(at_text.data(), at_text.data() + at_text.size(), spec.at_recurrence);
  if (at_text.empty() || ec != std::errc() || end != at_text.data() + at_text.size() ||
      spec.at_recurrence < 1 || spec.at_recurrence > sim::limits::kMaxRecurrences) {
    throw fail(fmt::format("\"{}\" is not a recurrence from 1 to {}", at_text,
                           sim::limits::kMaxRecurrences));
  }
  const std::string_view how = zeus::text::trim(std::string_view(text).substr(colon + 1), " ");
  const auto number = [&](std::string_view digits) {
    const std::optional<double> value = csv::to_double(zeus::text::trim(digits, " "));
    if (!value || !std::isfinite(*value)) {
      throw fail(fmt::format("\"{}\" is not a finite number", digits));
    }
    return *value;
  };
  if (how.substr(0, 5) == "best*" || how.substr(0, 5) == "best/") {
    const double factor = number(how.substr(5));
    if (!(factor > 0.0)) {
      throw fail("the factor must be positive");
    }
    spec.best_batch_size_factor = how[4] == '*' ? factor : 1.0 / factor;
    if (!(*spec.best_batch_size_factor >= sim::ConvergenceShift::kMinFactor &&
          *spec.best_batch_size_factor <= sim::ConvergenceShift::kMaxFactor)) {
      throw fail(fmt::format("the best batch size may move by a factor of at most {:g}",
                             sim::ConvergenceShift::kMaxFactor));
    }
  } else if (how.substr(0, 7) == "target=") {
    spec.target_metric = number(how.substr(7));
  } else {
    throw fail(fmt::format("\"{}\" is not best*F, best/F or target=X", how));
  }
  return spec;
}

}  // namespace zeus::cli::sim_args
